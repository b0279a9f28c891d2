"""Credentials that refresh: one kubeconfig context resolved by the kubernetes client's own loader
(`kubernetes.config.kube_config.KubeConfigLoader`), in whichever process needs a token.

Exec plugins (aws, gke-gcloud-auth-plugin, kubelogin) and auth-providers hand out tokens that expire. Each
process (the harness, every Locust process) keeps its own copy of the token in memory, obtains it again a
little before the plugin's `expirationTimestamp` and when the apiserver answers 401 to it, and never writes
it anywhere: what crosses process boundaries is the kubeconfig path and the context name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from loadtests.errors import AccessRefused, TargetError, UnreadableFile, text_of

REFRESH_AHEAD_MAX_S = 60.0  # obtain a new token at most this long before the old one expires
REFRESH_AHEAD_FRACTION = 0.25  # ... and at most this fraction of its lifetime (short-lived test tokens)
NO_EXPIRY_REREAD_S = 300.0  # a token without an expiry is resolved again this often (rotated token files)
RETRY_AFTER_FAILURE_S = 5.0  # after a failed resolution, the old token is used this long before trying again
MIN_REJECTED_AGE_S = 1.0  # a 401 to a token younger than this is not the token's age: no new resolution


def exec_command_path(command: str, kubeconfig_dir: Path) -> str | None:
    """Where an exec plugin's command is, as kubectl finds it: a command with a path separator relative to
    the kubeconfig's folder, a bare name on PATH; None when it is not there (or not executable)."""
    if os.sep in command:
        path = Path(command).expanduser()
        path = path if path.is_absolute() else kubeconfig_dir / path
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(command)


@dataclass(frozen=True)
class Credential:
    """What one resolution of a context gave: a bearer token (or a client certificate an exec plugin handed
    out) and when it expires."""

    token: str | None
    obtained_at: float  # time.time()
    expires_at: float | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def refresh_at(self) -> float:
        """When to obtain the next one: ahead of the expiry by a part of the lifetime, at most a minute."""
        if self.expires_at is None:
            return self.obtained_at + NO_EXPIRY_REREAD_S
        lifetime = max(0.0, self.expires_at - self.obtained_at)
        return self.expires_at - min(REFRESH_AHEAD_MAX_S, REFRESH_AHEAD_FRACTION * lifetime)


class _LoaderErrors(logging.Handler):
    """The kubernetes loader logs a failing exec plugin (and returns no token) instead of raising: this
    collects those messages from the calling thread, so the failure can be told in one line."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(" ".join(record.getMessage().split()))


@contextlib.contextmanager
def _loader_errors() -> Iterator[_LoaderErrors]:
    handler = _LoaderErrors()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def resolve(kubeconfig: Path, context: str, *, temp_dir: Path | None = None, shown_as: Path | None = None,
            clock: Callable[[], float] = time.time) -> Credential:
    """The context's credential now, through the kubernetes client's loader (which runs the exec plugin
    again on every call); an AccessRefused in one line, naming the kubeconfig as `shown_as` (the user's file
    rather than our copy), when it gives none. Files the loader writes (client certificates from a plugin,
    inline data) go to temp_dir, which should be private."""
    from kubernetes.client import Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader

    where = f"kubeconfig {shown_as or kubeconfig}: context {context}"
    try:
        config = yaml.safe_load(text_of(kubeconfig.read_bytes(), shown_as or kubeconfig, "kubeconfig"))
    except UnreadableFile as error:  # its own line names the file; an AccessRefused, as refreshes expect
        raise AccessRefused(str(error)) from None
    except (OSError, yaml.YAMLError) as error:
        said = " ".join(str(getattr(error, "strerror", None) or error).split())
        raise AccessRefused(f"{where}: cannot read it ({said})") from None
    configuration = Configuration()
    obtained_at = clock()
    with _loader_errors() as errors:
        try:
            # a new loader each time: a loader keeps the last token it saw even when the plugin then fails
            loader = KubeConfigLoader(config, active_context=context, config_base_path=str(kubeconfig.parent),
                                      temp_file_path=str(temp_dir) if temp_dir else None)
            loader.load_and_set(configuration)
        except (ConfigException, KeyError, ValueError, OSError) as error:
            raise AccessRefused(f"{where}: the kubernetes client cannot load it ({' '.join(str(error).split())})"
                              ) from None
    bearer = str(configuration.api_key.get("BearerToken") or "")
    token = bearer.removeprefix("Bearer ").strip() or None
    cert_file = configuration.cert_file if token is None else None
    key_file = configuration.key_file if token is None else None
    if token is None and not (cert_file and key_file):
        reason = "; ".join(errors.messages) or "it gave neither a token nor a client certificate"
        raise AccessRefused(f"{where}: no credentials from its user ({reason[:300]})")
    expiry = getattr(loader, "expiry", None)
    return Credential(token=token, obtained_at=obtained_at, expires_at=expiry.timestamp() if expiry else None,
                      cert_file=cert_file, key_file=key_file)


class RefreshingToken:
    """The current token of one context for every thread (or greenlet) of this process: obtained once, again
    ahead of its expiry, and again when the apiserver rejects it; one resolution at a time."""

    def __init__(self, kubeconfig: Path, context: str, *, first: Credential | None = None,
                 clock: Callable[[], float] = time.time, resolver: Callable[..., Credential] = resolve) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self._clock = clock
        self._resolve = resolver
        self._lock = threading.Lock()
        self._credential = first
        self._retry_at = 0.0  # after a failed resolution: not before this
        self.resolutions = 0  # how many times the loader was asked (each runs an exec plugin once)
        self.last_error = ""

    def token(self) -> str | None:
        """The token to send now; refreshed first when it is due."""
        credential = self._credential
        if credential is not None and self._clock() < credential.refresh_at():
            return credential.token
        with self._lock:
            credential = self._credential
            now = self._clock()
            if credential is None or (now >= credential.refresh_at() and now >= self._retry_at):
                credential = self._renew(keep_old=credential is not None)
            return credential.token if credential else None

    def rejected(self, token: str | None) -> bool:
        """The apiserver answered 401 to `token`: obtain a new one unless that already happened; whether the
        token to send now differs (a retry may then succeed)."""
        with self._lock:
            credential = self._credential
            if (credential is not None and credential.token == token
                    and self._clock() - credential.obtained_at >= MIN_REJECTED_AGE_S):
                credential = self._renew(keep_old=True)
            return credential is not None and credential.token != token

    def _renew(self, *, keep_old: bool) -> Credential | None:
        """A new credential; when a refresh fails, the old one is kept (it may still be accepted) and the
        failure is retried later, so thousands of users do not run the plugin at once."""
        self.resolutions += 1
        try:
            self._credential = self._resolve(self.kubeconfig, self.context, temp_dir=self.kubeconfig.parent)
        except TargetError as error:  # AccessRefused, or a plugin that failed otherwise
            if not keep_old:
                raise
            self.last_error = str(error)
            self._retry_at = self._clock() + RETRY_AFTER_FAILURE_S
            logging.getLogger(__name__).warning("credential refresh failed, the old token is used: %s", error)
        return self._credential


_tokens: dict[tuple[str, str], RefreshingToken] = {}
_tokens_lock = threading.Lock()


def refreshing_token(kubeconfig: str, context: str, first: Credential | None = None) -> RefreshingToken:
    """This process's RefreshingToken for a context of a kubeconfig (one per pair, shared by all clients);
    `first`: a credential just resolved, so the plugin need not run again at once."""
    key = (kubeconfig, context)
    with _tokens_lock:
        token = _tokens.get(key)
        if token is None:
            token = _tokens[key] = RefreshingToken(Path(kubeconfig), context, first=first)
        return token


def forget_tokens(kubeconfig: str) -> None:
    """Drop this process's tokens of a kubeconfig (its file is about to be removed)."""
    with _tokens_lock:
        for key in [k for k in _tokens if k[0] == kubeconfig]:
            del _tokens[key]
