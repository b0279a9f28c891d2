"""Who sent a request, in words that leave no name of the cluster's: the client's class from its user, the
product its user agent names, and a salted hash of the user where requests are counted per identity."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from loadtests.measure.audit import product_of

NODE, SERVICE_ACCOUNT, CONTROLLER, USER = "node", "serviceaccount", "controller", "user"
CLASSES = (NODE, SERVICE_ACCOUNT, CONTROLLER, USER)
# the control plane's own components, as their client certificates name them
CONTROLLERS = frozenset({"system:kube-controller-manager", "system:kube-scheduler", "system:apiserver",
                         "system:kube-aggregator", "system:cloud-controller-manager"})
# kube-up's kube-proxy credential: one agent per node, replayed as a node's agents are
NODE_USERS = frozenset({"system:kube-proxy"})
# user agents of the control plane's components (kube-controller-manager's controllers send with ServiceAccounts
# of their own, so their class alone does not say it) and of the fake fleet's one controller (kwok acts for every
# fake node at once): one of each whatever the cluster's size
CONTROL_PLANE_PRODUCTS = frozenset({"kube-controller-manager", "kube-scheduler", "kube-apiserver",
                                    "cloud-controller-manager"})
ONCE_PRODUCTS = CONTROL_PLANE_PRODUCTS | {"kwok"}
HASH_CHARS = 12
# a product is a program's name; anything else in its place (spaces, a URL, an e-mail) is not kept
_PRODUCT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
NO_PRODUCT, OTHER_PRODUCT = "(none)", "(other)"
# requests to no resource, named by these first segments of their path (the longest that fits), else "(other)"
PATHS = ("/api", "/apis", "/openapi/v2", "/openapi/v3", "/version", "/healthz", "/livez", "/readyz", "/metrics",
         "/.well-known/openid-configuration", "/openid/v1/jwks")
OTHER_PATH = "(other)"


def client_class(username: str, groups: tuple[str, ...]) -> str:
    """node (system:node:<name>, the group system:nodes), serviceaccount (system:serviceaccount:<ns>:<name>),
    controller (the control plane's components), user (anyone else)."""
    if username.startswith("system:node:") or "system:nodes" in groups or username in NODE_USERS:
        return NODE
    if username.startswith("system:serviceaccount:"):
        return SERVICE_ACCOUNT
    if username in CONTROLLERS:
        return CONTROLLER
    return USER


def runs_once(client: str | None, product_name: str | None) -> bool:
    """Whether a client is one of the control plane's own components, or the fake fleet's controller: clients a
    cluster holds one of whatever its size, so their requests and watches do not grow with a replay's k."""
    return client == CONTROLLER or product_name in ONCE_PRODUCTS


def product(user_agent: str) -> str:
    """The user agent's product (measure.audit.product_of), kept only where it reads as a program's name."""
    name = product_of(user_agent)
    if not name:
        return NO_PRODUCT
    return name if _PRODUCT.fullmatch(name) else OTHER_PRODUCT


def hashed(salt: bytes, name: str) -> str:
    """sha256 of the salt and the name, its first 12 hex digits: the same name groups as one, and without the
    salt (which never leaves the machine) no list of guessed names finds it."""
    return hashlib.sha256(salt + name.encode()).hexdigest()[:HASH_CHARS]


def path_of(uri: str) -> str:
    """A request to no resource by the known first segments of its path (`/apis` for discovery)."""
    path = urlsplit(uri).path.rstrip("/") or "/"
    known = [p for p in PATHS if path == p or path.startswith(p + "/")]
    return max(known, key=len) if known else OTHER_PATH
