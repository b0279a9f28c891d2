"""Kubeconfigs: one context resolved to what the harness needs, and kubeconfigs the harness writes itself.

Credentials are what `kubectl` accepts: client certificates, tokens and token files, exec plugins (aws,
gke-gcloud-auth-plugin, kubelogin) and the oidc auth-provider, through the kubernetes client's loader; also
proxy-url and tls-server-name. What the harness cannot honour is refused here, in one line, before anything
starts; every kubeconfig and credential file written is mode 0600.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtests.errors import TargetError, read_text, text_of
from loadtests.kube.access import ClusterAccess
from loadtests.kube.credentials import exec_command_path, refreshing_token, resolve
from loadtests.kube.private import write_private

_UNSUPPORTED_USER = {"username": "basic authentication", "password": "basic authentication"}
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
PROXY_SCHEMES = ("http", "https")
# auth-providers Kubernetes clients dropped in 1.26, and the exec plugin that replaced each
_REMOVED_AUTH_PROVIDERS = {"gcp": "gke-gcloud-auth-plugin", "azure": "kubelogin (`kubelogin convert-kubeconfig`)"}
_AUTH_PROVIDERS = ("oidc",)


def write_kubeconfig(path: Path, server: str, *, context: str = "loadtest", user: str = "harness",
                     ca: str | Path | None = None, client_cert: str | Path | None = None,
                     client_key: str | Path | None = None, token: str | None = None,
                     token_file: str | Path | None = None, insecure: bool = False,
                     exec_plugin: dict[str, Any] | None = None, auth_provider: dict[str, Any] | None = None,
                     proxy_url: str | None = None, tls_server_name: str | None = None) -> Path:
    """A kubeconfig with one cluster, user and context (current), pointing at credential files; mode 0600."""
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority"] = str(ca)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    if tls_server_name:
        cluster["tls-server-name"] = tls_server_name
    credentials: dict[str, Any] = {}
    if exec_plugin:
        credentials["exec"] = exec_plugin
    if auth_provider:
        credentials["auth-provider"] = auth_provider
    if client_cert and client_key:
        credentials.update({"client-certificate": str(client_cert), "client-key": str(client_key)})
    if token_file:
        credentials["tokenFile"] = str(token_file)
    elif token:
        credentials["token"] = token
    write_private(path, yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
    }, sort_keys=False).encode())
    return path


@dataclass(frozen=True)
class Material:
    """A certificate, key or CA as a kubeconfig gives it: a file of the user's, or inline data."""

    path: Path | None = None
    data: bytes | None = None

    def place(self, workdir: Path, name: str) -> str | None:
        """A file path for it: the user's own file, or inline data written to a private file of ours."""
        if self.data is not None:
            target = workdir / name
            write_private(target, self.data)
            return str(target)
        return str(self.path) if self.path else None


@dataclass(frozen=True)
class KubeContext:
    """One context of a kubeconfig, resolved to what the harness needs; nothing is written until materialize."""

    name: str
    source: Path
    server: str
    ca: Material = Material()
    client_cert: Material = Material()
    client_key: Material = Material()
    token: str | None = None
    token_file: Path | None = None
    insecure: bool = False
    exec_plugin: dict[str, Any] | None = field(default=None, compare=False)  # command made absolute if a path
    auth_provider: dict[str, Any] | None = field(default=None, compare=False)
    proxy_url: str | None = None
    tls_server_name: str | None = None

    @property
    def refreshes(self) -> bool:
        """Whether its token comes from a plugin (and expires): then each process resolves it for itself."""
        return bool(self.exec_plugin or self.auth_provider)

    def materialize(self, workdir: Path) -> ClusterAccess:
        """Files for every credential, and a kubeconfig (0600) whose current context is this one (kwok uses it).

        A plugin's stanza is kept in that kubeconfig: kwok runs the plugin itself, and every process of ours
        resolves the token from it through the kubernetes client's loader; the plugin runs once here, so a
        plugin that fails is one line before anything starts.
        """
        ca = self.ca.place(workdir, "ca.crt")
        cert = self.client_cert.place(workdir, "client.crt")
        key = self.client_key.place(workdir, "client.key")
        token = self.token
        if token is None and self.token_file is not None:
            token = text_of(_read(self.token_file, self.source, "tokenFile"), self.token_file, "token file").strip()
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", self.server, context=self.name, ca=ca,
                                      client_cert=cert, client_key=key, token=token, token_file=self.token_file,
                                      insecure=self.insecure, exec_plugin=self.exec_plugin,
                                      auth_provider=self.auth_provider, proxy_url=self.proxy_url,
                                      tls_server_name=self.tls_server_name)
        credential_context = None
        if self.refreshes:
            first = resolve(kubeconfig, self.name, temp_dir=workdir, shown_as=self.source)
            if first.token:
                refreshing_token(str(kubeconfig), self.name, first=first)
                credential_context = self.name
            else:  # an exec plugin that hands out a client certificate: used as it is given now
                cert, key = first.cert_file, first.key_file
        return ClusterAccess(server=self.server.rstrip("/"), kubeconfig=str(kubeconfig), ca_file=ca,
                             cert_file=cert, key_file=key, token=token, insecure_skip_verify=self.insecure,
                             credential_context=credential_context, proxy_url=self.proxy_url,
                             tls_server_name=self.tls_server_name)


def _read(path: Path, source: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TargetError(f"{source}: {field} {path}: cannot read it ({error.strerror})") from None


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig as a mapping, or one line saying why it cannot be used."""
    try:
        data = yaml.safe_load(read_text(path, "kubeconfig"))
    except OSError as error:
        raise TargetError(f"kubeconfig {path}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        problem = " ".join(str(getattr(error, "problem", None) or error).split())
        raise TargetError(f"kubeconfig {path}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise TargetError(f"kubeconfig {path}: not a kubeconfig (expected a mapping with clusters, users, contexts)")
    return data


def context_names(config: dict[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in config.get("contexts") or [] if isinstance(c, dict)]


def _named(config: dict[str, Any], section: str, name: str, source: Path, what: str) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section.rstrip("s"))
            if isinstance(body, dict):
                return body
    raise TargetError(f"{source}: {what} {name!r} is not in the file's {section}")


def _material(entry: dict[str, Any], key: str, source: Path) -> Material:
    """`key-data` (base64, inline) or `key` (a file path, relative to the kubeconfig's folder)."""
    inline = entry.get(f"{key}-data")
    if inline:
        try:
            return Material(data=base64.b64decode(str(inline), validate=True))
        except (binascii.Error, ValueError):
            raise TargetError(f"{source}: {key}-data is not valid base64") from None
    if entry.get(key):
        return Material(path=_file(entry[key], source, key))
    return Material()


def _file(value: Any, source: Path, field: str) -> Path:
    path = Path(str(value)).expanduser()
    path = path if path.is_absolute() else source.parent / path
    if not path.is_file():
        raise TargetError(f"{source}: {field} {path} does not exist")
    return path


def _proxy_url(cluster: dict[str, Any], where: str) -> str | None:
    url = str(cluster.get("proxy-url") or "")
    if not url:
        return None
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in PROXY_SCHEMES:
        raise TargetError(f"{where}: proxy-url {url!r}: the harness supports http:// and https:// proxies only")
    return url


def _exec_plugin(user: dict[str, Any], source: Path, where: str) -> dict[str, Any] | None:
    """The exec stanza with its command found (a path made absolute); refused if the command is missing."""
    stanza = user.get("exec")
    if not stanza:
        return None
    if not isinstance(stanza, dict) or not stanza.get("command"):
        raise TargetError(f"{where}: its exec plugin names no command")
    if stanza.get("apiVersion") not in EXEC_API_VERSIONS:
        raise TargetError(f"{where}: exec plugin apiVersion {stanza.get('apiVersion')!r} is not supported "
                          f"(expected one of {', '.join(EXEC_API_VERSIONS)})")
    command = str(stanza["command"])
    found = exec_command_path(command, source.parent)
    if found is None:
        hint = ("not found on PATH" if os.sep not in command
                else f"no executable file at {source.parent / Path(command).expanduser()}")
        raise TargetError(f"{where}: exec plugin command {command!r} is not installed ({hint}); install it or "
                          "use a context with a token or client certificate")
    # for kwok (client-go), which runs it without a terminal: a plugin that must prompt fails there either way
    return {**stanza, "command": found if os.sep in command else command, "interactiveMode": "Never"}


def _auth_provider(user: dict[str, Any], where: str) -> dict[str, Any] | None:
    provider = user.get("auth-provider")
    if not provider:
        return None
    name = str(provider.get("name") if isinstance(provider, dict) else "")
    if name in _REMOVED_AUTH_PROVIDERS:
        raise TargetError(f"{where}: the {name!r} auth-provider was removed from Kubernetes clients in 1.26; "
                          f"use its exec plugin instead: {_REMOVED_AUTH_PROVIDERS[name]}")
    if name not in _AUTH_PROVIDERS:
        raise TargetError(f"{where}: auth-provider {name!r} is not supported (only {', '.join(_AUTH_PROVIDERS)}); "
                          "use an exec plugin, a token or a client certificate")
    return dict(provider)


def parse_context(config: dict[str, Any], name: str, source: Path) -> KubeContext:
    """Resolve one context to server and credentials; features the harness cannot honour are refused here."""
    context = _named(config, "contexts", name, source, "context")
    cluster = _named(config, "clusters", str(context.get("cluster")), source, f"context {name!r} names cluster")
    user_name = context.get("user")
    user = _named(config, "users", str(user_name), source, f"context {name!r} names user") if user_name else {}
    where = f"kubeconfig {source}: context {name}"
    for key, what in _UNSUPPORTED_USER.items():
        if user.get(key):
            raise TargetError(f"{source}: context {name!r} authenticates with {what}, which the harness cannot "
                              "use; give it a client certificate, a token (e.g. from `kubectl create token`) "
                              "or an exec plugin")
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise TargetError(f"{source}: context {name!r}: cluster has no server URL (got {server!r})")
    cert, key = _material(user, "client-certificate", source), _material(user, "client-key", source)
    if (cert == Material()) != (key == Material()):
        raise TargetError(f"{source}: context {name!r}: a client certificate needs its key, and a key its "
                          "certificate")
    return KubeContext(
        name=name, source=source, server=server,
        ca=_material(cluster, "certificate-authority", source), client_cert=cert, client_key=key,
        token=str(user["token"]) if user.get("token") else None,
        token_file=_file(user["tokenFile"], source, "tokenFile") if user.get("tokenFile") else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        exec_plugin=_exec_plugin(user, source, where), auth_provider=_auth_provider(user, where),
        proxy_url=_proxy_url(cluster, where), tls_server_name=str(cluster.get("tls-server-name") or "") or None,
    )
