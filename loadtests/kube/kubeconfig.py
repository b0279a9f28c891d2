"""Kubeconfigs: one context resolved to what the harness needs, and kubeconfigs the harness writes itself.

Features the harness's clients cannot honour are refused here, in one line, rather than failing obscurely
later; every kubeconfig and credential file written is mode 0600.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from loadtests.errors import TargetError
from loadtests.kube.access import ClusterAccess
from loadtests.private import write_private

_UNSUPPORTED_USER = {"exec": "an exec credential plugin", "auth-provider": "an auth-provider plugin",
                     "username": "basic authentication", "password": "basic authentication"}
_UNSUPPORTED_CLUSTER = {"tls-server-name": "tls-server-name", "proxy-url": "a proxy (proxy-url)"}


def write_kubeconfig(path: Path, server: str, *, context: str = "loadtest", user: str = "harness",
                     ca: str | Path | None = None, client_cert: str | Path | None = None,
                     client_key: str | Path | None = None, token: str | None = None,
                     token_file: str | Path | None = None, insecure: bool = False) -> Path:
    """A kubeconfig with one cluster, user and context (current), pointing at credential files; mode 0600."""
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority"] = str(ca)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    credentials: dict[str, Any] = {}
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

    def materialize(self, workdir: Path) -> ClusterAccess:
        """Files for every credential, and a kubeconfig (0600) whose current context is this one (kwok uses it)."""
        ca = self.ca.place(workdir, "ca.crt")
        cert = self.client_cert.place(workdir, "client.crt")
        key = self.client_key.place(workdir, "client.key")
        token = self.token
        if token is None and self.token_file is not None:
            token = _read(self.token_file, self.source, "tokenFile").decode().strip()
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", self.server, context=self.name, ca=ca,
                                      client_cert=cert, client_key=key, token=token, token_file=self.token_file,
                                      insecure=self.insecure)
        return ClusterAccess(server=self.server.rstrip("/"), kubeconfig=str(kubeconfig), ca_file=ca,
                             cert_file=cert, key_file=key, token=token, insecure_skip_verify=self.insecure)


def _read(path: Path, source: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TargetError(f"{source}: {field} {path}: cannot read it ({error.strerror})") from None


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig as a mapping, or one line saying why it cannot be used."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise TargetError(f"kubeconfig {path}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise TargetError(f"kubeconfig {path}: not valid YAML ({getattr(error, 'problem', error)})") from None
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


def parse_context(config: dict[str, Any], name: str, source: Path) -> KubeContext:
    """Resolve one context to server and credentials; features the harness cannot honour are refused here."""
    context = _named(config, "contexts", name, source, "context")
    cluster = _named(config, "clusters", str(context.get("cluster")), source, f"context {name!r} names cluster")
    user_name = context.get("user")
    user = _named(config, "users", str(user_name), source, f"context {name!r} names user") if user_name else {}
    for key, what in _UNSUPPORTED_CLUSTER.items():
        if cluster.get(key):
            raise TargetError(f"{source}: context {name!r} uses {what}, which the harness does not support; "
                              "use a kubeconfig that reaches the apiserver directly")
    for key, what in _UNSUPPORTED_USER.items():
        if user.get(key):
            raise TargetError(f"{source}: context {name!r} authenticates with {what}, which the harness cannot "
                              "use; give it a client certificate or a token (e.g. from `kubectl create token`)")
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
    )
