"""An existing cluster someone else runs: used only when named explicitly, and left as it was found.

The user names the kubeconfig and the context, and confirms the context by repeating it (--allow-context);
the kubeconfig's current-context is never used by default. The harness brings its own kwok (a process of
ours on this machine, or a Deployment in the cluster), refuses to start next to harness objects it did not
create, and on `down` removes exactly what it created: its namespaces, its fake nodes, its kwok. etcd is not
reachable there, so the probes fall back to what the apiserver reports about storage.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import shlex
import shutil
import ssl
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml

from loadtests import binaries as binaries_mod
from loadtests import objects
from loadtests.errors import TargetError
from loadtests.k8sclient import ApiError, RestClient
from loadtests.target import kwok as kwok_mod
from loadtests.target.base import ClusterAccess, TargetInfo
from loadtests.target.pki import write_private
from loadtests.target.processes import ClusterState, ProcessGroup, ProcessRecord, free_ports, wait_for

KWOK_MODES = ("local", "in-cluster")
KWOK_NAMESPACE = "loadtest-kwok"  # the in-cluster kwok's namespace (kwok-configs/cluster/00-namespace.yaml)
KWOK_DEPLOYMENT = "kwok-controller"
FIELD_MANAGER = "k8s-loadtest"
NODE_LABELS = {"type": "kwok", **objects.MANAGED_BY}  # a node is the harness's only with both
DELETE_CONCURRENCY = 16

# What the harness does on any cluster, and what the in-cluster kwok install needs on top: (verb, resource, group)
REQUIRED_RIGHTS = (("create", "nodes", ""), ("delete", "nodes", ""), ("create", "namespaces", ""),
                   ("delete", "namespaces", ""), ("create", "pods", ""), ("create", "deployments", "apps"))
IN_CLUSTER_RIGHTS = (("create", "clusterroles", "rbac.authorization.k8s.io"),
                     ("create", "clusterrolebindings", "rbac.authorization.k8s.io"))

# kubeconfig features the harness's clients cannot honour; refused up front rather than failing obscurely later
_UNSUPPORTED_USER = {"exec": "an exec credential plugin", "auth-provider": "an auth-provider plugin",
                     "username": "basic authentication", "password": "basic authentication"}
_UNSUPPORTED_CLUSTER = {"tls-server-name": "tls-server-name", "proxy-url": "a proxy (proxy-url)"}

# object kind -> API path, for the objects in kwok-configs/cluster/
_PATHS = {
    ("v1", "Namespace"): "/api/v1/namespaces/{name}",
    ("v1", "ServiceAccount"): "/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
    ("v1", "ConfigMap"): "/api/v1/namespaces/{namespace}/configmaps/{name}",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
    ("apps/v1", "Deployment"): "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
}


# ------------------------------------------------------------------------------------------------ kubeconfig
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
        cluster: dict[str, Any] = {"server": self.server}
        if ca:
            cluster["certificate-authority"] = ca
        if self.insecure:
            cluster["insecure-skip-tls-verify"] = True
        user: dict[str, Any] = {}
        if cert and key:
            user.update({"client-certificate": cert, "client-key": key})
        if self.token_file is not None:
            user["tokenFile"] = str(self.token_file)
        elif token:
            user["token"] = token
        kubeconfig = workdir / "kubeconfig"
        write_private(kubeconfig, yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "target", "cluster": cluster}],
            "users": [{"name": "harness", "user": user}],
            "contexts": [{"name": self.name, "context": {"cluster": "target", "user": "harness"}}],
            "current-context": self.name,
        }, sort_keys=False).encode())
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


def guard(kubeconfig: str | None, context: str | None, allow_context: str | None) -> KubeContext:
    """Refuse unless the kubeconfig and context are named explicitly and the context is confirmed by name."""
    if not kubeconfig:
        raise TargetError("an existing cluster needs a kubeconfig: pass --kubeconfig FILE --context NAME "
                          "--allow-context NAME")
    path = Path(kubeconfig).expanduser().resolve()
    config = read_kubeconfig(path)
    names = context_names(config)
    listed = ", ".join(names) or "none"
    if not context:
        raise TargetError(f"refusing to load-test {path} without a named context: pass --context NAME and "
                          f"confirm it with --allow-context NAME (contexts there: {listed})")
    if context not in names:
        raise TargetError(f"context {context!r} is not in {path}; contexts there: {listed}")
    if allow_context != context:
        mismatch = f" (--allow-context {allow_context!r} does not match)" if allow_context else ""
        raise TargetError(f"refusing to load-test context {context!r} of {path}{mismatch}: confirm with "
                          f"--allow-context {shlex.quote(context)}")
    return parse_context(config, context, path)


# ------------------------------------------------------------------------------------------------ manifests
def cluster_manifests_dir() -> Path:
    return objects.kwok_configs_dir() / "cluster"


def in_cluster_manifests(heartbeat_factor: float) -> list[dict[str, Any]]:
    """kwok-configs/cluster/ with the kwok configuration, the shared flags and the pinned image tag filled in."""
    docs: list[dict[str, Any]] = []
    for path in sorted(cluster_manifests_dir().glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    config = kwok_mod.config_text(heartbeat_factor)
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            doc["data"]["kwok.yaml"] = config
        elif doc["kind"] == "Deployment":
            template = doc["spec"]["template"]
            container = template["spec"]["containers"][0]
            container["image"] = f"{container['image']}:{binaries_mod.KWOK_VERSION}"
            container["args"] = [*container["args"], *kwok_mod.common_flags(heartbeat_factor)]
            # a changed configuration rolls the pod, since the mounted file alone would not restart kwok
            template["metadata"].setdefault("annotations", {})["k8s-loadtest/kwok-config-sha256"] = (
                hashlib.sha256(config.encode()).hexdigest())
    return docs


def object_path(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    try:
        template = _PATHS[(obj["apiVersion"], obj["kind"])]
    except KeyError:
        raise TargetError(f"no API path known for {obj['apiVersion']} {obj['kind']}") from None
    return template.format(name=meta["name"], namespace=meta.get("namespace", ""))


def _cluster_scoped(obj: dict[str, Any]) -> bool:
    return "namespace" not in obj["metadata"]


# ------------------------------------------------------------------------------------------------ target
def _short(error: BaseException) -> str:
    """The gist of a connection error, on one line."""
    text = " ".join(str(getattr(error, "reason", None) or error).split())
    return f"{type(error).__name__}: {text[:200]}"


_UNREACHABLE = (urllib3.exceptions.HTTPError, OSError, ssl.SSLError)


def _local_kwok_binary() -> Path | None:
    kwok_set = binaries_mod.BinarySet("kwok", binaries_mod.KWOK_VERSION, binaries_mod.KWOK_BINARIES)
    return kwok_set.path("kwok") if kwok_set.is_cached() else None


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _owned(obj: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(_labels(obj).get(k) == v for k, v in labels.items())


@dataclass
class ClusterOptions:
    context: KubeContext
    kwok_mode: str | None = None  # "local" | "in-cluster"; None: local when the kwok binary is cached
    heartbeat_factor: float = 1.0
    log_dir: Path | None = None  # where the local kwok writes its log (default: the private work folder)
    kwok_ready_timeout_s: float = 180.0
    cleanup_timeout_s: float = 180.0


class ExistingCluster:
    """A cluster by kubeconfig and context: up brings the harness's kwok, down takes away all it created."""

    def __init__(self, options: ClusterOptions, log: Callable[[str], None] = print) -> None:
        if options.kwok_mode not in (None, *KWOK_MODES):
            raise TargetError(f"kwok mode {options.kwok_mode!r}: expected one of {', '.join(KWOK_MODES)}")
        self.options = options
        self.context = options.context
        self.log = log
        self.workdir: Path | None = None
        self.access: ClusterAccess | None = None
        self.client: RestClient | None = None
        self.kwok_mode: str | None = None
        self._info: TargetInfo | None = None
        self._claimed = False  # the leftover check passed: harness namespaces and labelled nodes are ours
        self._installed = False  # in-cluster kwok objects may exist and are ours to delete
        self._group: ProcessGroup | None = None
        self._kwok: ProcessRecord | None = None
        self.deleted_nodes: list[str] = []  # the record of the nodes removed by the last down

    @classmethod
    def from_args(cls, plan: Any, args: Any, *, log_dir: Path | None = None,
                  log: Callable[[str], None] = print) -> ExistingCluster:
        """From `loadtest run` arguments and the plan's target; the guard runs here, before anything starts."""
        context = guard(getattr(args, "kubeconfig", None) or plan.target.kubeconfig,
                        getattr(args, "context", None) or plan.target.context,
                        getattr(args, "allow_context", None))
        return cls(ClusterOptions(context=context, kwok_mode=getattr(args, "kwok_mode", None),
                                  heartbeat_factor=plan.target.heartbeat_factor, log_dir=log_dir), log)

    @property
    def _where(self) -> str:
        return f"context {self.context.name!r} ({self.context.server})"

    def _rest(self) -> RestClient:
        assert self.client is not None, "up() has not run"
        return self.client

    # ------------------------------------------------------------------------------------------ up
    def up(self) -> TargetInfo:
        try:
            try:
                version = self._up()
            except ApiError as error:
                raise TargetError(f"{self._where}: {error}") from None
            except _UNREACHABLE as error:
                raise TargetError(f"lost {self._where}: {_short(error)}") from None
        except BaseException:
            # a refused or half-done up leaves nothing behind (down only removes what was created)
            try:
                self.down()
            except TargetError as error:
                self.log(f"warning: clean-up after the failed start: {error}")
            raise
        assert self.access is not None
        self._info = TargetInfo(access=self.access, etcd_metrics_url=None,
                                versions={"kubernetes": version, "kwok": binaries_mod.KWOK_VERSION},
                                pids=self._pids(), kind="cluster")
        return self._info

    def _up(self) -> str:
        self.workdir = Path(tempfile.mkdtemp(prefix="k8s-loadtest-cluster-"))  # mode 0700
        self.access = self.context.materialize(self.workdir)
        try:
            self.client = RestClient(self.access, timeout_s=15.0)
        except (ssl.SSLError, OSError) as error:
            raise TargetError(f"{self.context.source}: context {self.context.name!r}: its certificates cannot "
                              f"be loaded ({_short(error)})") from None
        version = self._check_reachable()
        self.kwok_mode = self.options.kwok_mode or ("local" if _local_kwok_binary() else "in-cluster")
        self._check_rights(REQUIRED_RIGHTS + (IN_CLUSTER_RIGHTS if self.kwok_mode == "in-cluster" else ()))
        self._claim()
        if self.options.heartbeat_factor != 1.0:
            self.log(f"warning: heartbeat_factor {self.options.heartbeat_factor:g} stretches kwok's lease "
                     "renewals, but this cluster's controller-manager keeps its own node-monitor grace "
                     "period; fake nodes may turn NotReady")
        if self.kwok_mode == "local":
            self._start_local_kwok()
        else:
            self._install_in_cluster_kwok()
        return version

    def _check_reachable(self) -> str:
        """The server's gitVersion; any failure to reach or authenticate is one line naming the context."""
        client = self._rest()
        try:
            version = client.get("/version").get("gitVersion", "unknown")
            client.get("/api/v1/nodes", limit=1)  # /version may be public; this one needs the credentials
        except ApiError as error:
            if error.status in (401, 403):
                raise TargetError(f"{self._where} refused the kubeconfig's credentials (HTTP {error.status}: "
                                  f"{error.reason}); check the user of that context") from None
            raise TargetError(f"{self._where} answered HTTP {error.status}: {error.reason}") from None
        except _UNREACHABLE as error:
            raise TargetError(f"cannot reach {self._where}: {_short(error)}; is the cluster running and "
                              "the kubeconfig current?") from None
        self.log(f"existing cluster: {self._where}, Kubernetes {version}")
        return str(version)

    def _check_rights(self, rights: tuple[tuple[str, str, str], ...]) -> None:
        """Ask the apiserver (SelfSubjectAccessReview) rather than fail half-way through a run."""
        missing = []
        for verb, resource, group in rights:
            review = self._rest().create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": group}},
            })
            if not review.get("status", {}).get("allowed"):
                missing.append(f"{verb} {resource}")
        if missing:
            raise TargetError(f"{self._where}: the kubeconfig's user may not {', '.join(missing)}; the harness "
                              "needs rights like cluster-admin's on nodes, namespaces, pods and deployments")

    def _claim(self) -> None:
        """Refuse to start next to harness objects of another run; wait out namespaces still being deleted."""
        client = self._rest()
        nodes, _ = client.list_all("/api/v1/nodes", labelSelector=objects.NODE_SELECTOR)
        names = sorted(n["metadata"]["name"] for n in nodes)
        namespaces = []
        for name in (*objects.NAMESPACES, KWOK_NAMESPACE):
            path = f"/api/v1/namespaces/{name}"
            found = client.request("GET", path, ok=(404,))
            if found and found["metadata"].get("deletionTimestamp") and not names:
                self.log(f"waiting for namespace {name} (being deleted by an earlier run) to be gone")
                if self._gone_within([path], self.options.cleanup_timeout_s):
                    continue
            if found:
                namespaces.append(name)
        if names or namespaces:
            ctx = shlex.quote(self.context.name)
            found_text, fix = [], []
            if names:
                found_text.append(f"nodes {', '.join(names[:3])}" + (f" (+{len(names) - 3} more)"
                                                                      if len(names) > 3 else ""))
                fix.append(f"kubectl --context {ctx} delete nodes -l {objects.NODE_SELECTOR}")
            if namespaces:
                found_text.append(f"namespaces {', '.join(namespaces)}")
                fix.append(f"kubectl --context {ctx} delete namespace {' '.join(namespaces)}")
            raise TargetError(f"{self._where} already has objects of another harness run "
                              f"({'; '.join(found_text)}); if no run is using them, remove them: "
                              f"{' && '.join(fix)}")
        self._claimed = True

    def _start_local_kwok(self) -> None:
        assert self.workdir is not None and self.access is not None
        binary = _local_kwok_binary()
        if binary is None:
            raise TargetError(f"kwok {binaries_mod.KWOK_VERSION} is not in {binaries_mod.cache_root()}/bin; "
                              "run `make setup`, or use kwok_mode in-cluster")
        port = free_ports(1)[0]
        config = kwok_mod.write_config(self.workdir / "kwok.yaml", self.options.heartbeat_factor)
        state = ClusterState(name="existing-cluster", directory=str(self.workdir))
        self._group = ProcessGroup(state, self.options.log_dir or self.workdir / "logs")
        self._kwok = self._group.start("kwok", kwok_mod.local_argv(
            binary, Path(self.access.kubeconfig), config, port, self.options.heartbeat_factor))
        group, record = self._group, self._kwok
        wait_for(lambda: kwok_mod.healthy(port), 60, "kwok healthy", abort=lambda: group.exited(record))
        self.log(f"kwok {binaries_mod.KWOK_VERSION} runs here (pid {record.pid}, 127.0.0.1:{port}) against "
                 f"{self._where}")

    def _install_in_cluster_kwok(self) -> None:
        client = self._rest()
        self._installed = True  # from the first object on, so a half-done install is removed too
        for doc in in_cluster_manifests(self.options.heartbeat_factor):
            client.request("PATCH", object_path(doc), doc, content_type="application/apply-patch+yaml",
                           params={"fieldManager": FIELD_MANAGER, "force": "true"})
        path = f"/apis/apps/v1/namespaces/{KWOK_NAMESPACE}/deployments/{KWOK_DEPLOYMENT}"

        def available() -> bool:
            conditions = client.get(path).get("status", {}).get("conditions", [])
            return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)

        self.log(f"installed kwok in namespace {KWOK_NAMESPACE}; waiting for it to be Available")
        try:
            wait_for(available, self.options.kwok_ready_timeout_s, "kwok Deployment Available",
                     interval_s=2.0, abort=self._kwok_pod_failure)
        except TargetError as error:
            raise TargetError(f"{error} in {self._where}{self._kwok_pod_state()}") from None

    def _kwok_pods(self) -> list[dict[str, Any]]:
        return self._rest().get(f"/api/v1/namespaces/{KWOK_NAMESPACE}/pods",
                                labelSelector="app.kubernetes.io/name=kwok-controller").get("items", [])

    def _kwok_pod_failure(self) -> str | None:
        """A reason that waiting longer will not fix (the image cannot be pulled, kwok keeps crashing)."""
        for pod in self._kwok_pods():
            for status in pod.get("status", {}).get("containerStatuses", []):
                waiting = status.get("state", {}).get("waiting") or {}
                if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff",
                                             "CreateContainerConfigError", "InvalidImageName"):
                    return f"{waiting['reason']}: {waiting.get('message', '')}".strip()
        return None

    def _kwok_pod_state(self) -> str:
        for pod in self._kwok_pods():
            for condition in pod.get("status", {}).get("conditions", []):
                if condition.get("status") == "False" and condition.get("message"):
                    return f" (pod {pod['metadata']['name']}: {condition['message']})"
        return ""

    # ------------------------------------------------------------------------------------------ observe
    def _pids(self) -> dict[str, list[int]]:
        return {"kwok": [self._kwok.pid]} if self._kwok is not None and self._kwok.alive() else {}

    def info(self) -> TargetInfo:
        if self._info is None:
            raise TargetError("the existing cluster has not been brought up")
        self._info.pids = self._pids()
        return self._info

    def dead_components(self) -> list[str]:
        """The local kwok, if ours died; an in-cluster kwok is restarted by its Deployment."""
        return ["kwok"] if self._kwok is not None and not self._kwok.alive() else []

    # ------------------------------------------------------------------------------------------ down
    def down(self) -> None:
        """Remove what the harness created, and only that; safe to call twice and after a failed up."""
        problems: list[str] = []

        def attempt(what: str, action: Callable[[], Any]) -> bool:
            try:
                action()
                return True
            except (TargetError, ApiError) as error:
                problems.append(f"{what}: {error}")
            except _UNREACHABLE as error:
                problems.append(f"{what}: {_short(error)}")
            return False

        if self._claimed:
            namespaces = [f"/api/v1/namespaces/{name}" for name in objects.NAMESPACES]
            deleted = attempt("harness namespaces", lambda: self._delete_owned(namespaces, objects.MANAGED_BY))
            # while kwok still runs, the pods on the fake nodes finish deleting and the namespaces go quickly;
            # pods left on deleted nodes (kwok dead, say) are removed later by the pod garbage collector
            settled = deleted and attempt("harness namespaces", lambda: self._gone_within(namespaces, 60))
            nodes = attempt("harness nodes", self._delete_our_nodes)
            gone = settled and attempt("harness namespaces", lambda: self._wait_gone(
                namespaces, self.options.cleanup_timeout_s, "harness namespaces deleted"))
            if nodes and gone:
                self._claimed = False
        if self._group is not None and self._kwok is not None:
            self._group.stop_all()
            if self._kwok.alive():
                problems.append(f"kwok (pid {self._kwok.pid}) could not be stopped")
            else:
                self._group = self._kwok = None
        if self._installed and attempt("in-cluster kwok", self._uninstall_in_cluster_kwok):
            self._installed = False
        if problems:
            raise TargetError(f"clean-up of {self._where} incomplete: {'; '.join(problems)}")
        self._release()

    def _release(self) -> None:
        """Close the client and remove the private folder with the credential files."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _delete_owned(self, paths: list[str], labels: dict[str, str]) -> list[str]:
        """Delete objects that carry all `labels`, each only as the very object seen (uid precondition).

        Returns the paths deleted; objects without the labels are never touched.
        """
        client = self._rest()

        def delete(path: str) -> str | None:
            found = client.request("GET", path, ok=(404,))
            if not found or not _owned(found, labels):
                return None
            options = {"apiVersion": "v1", "kind": "DeleteOptions",
                       "preconditions": {"uid": found["metadata"]["uid"]}}
            client.request("DELETE", path, options, ok=(404, 409))
            return path

        with ThreadPoolExecutor(DELETE_CONCURRENCY, thread_name_prefix="cleanup") as pool:
            return [p for p in pool.map(delete, paths) if p]

    def _delete_our_nodes(self) -> None:
        """The nodes this run created: the harness-labelled ones (none existed when the cluster was claimed)."""
        client = self._rest()
        nodes, _ = client.list_all("/api/v1/nodes", labelSelector=objects.NODE_SELECTOR)
        record = sorted(n["metadata"]["name"] for n in nodes
                        if _owned(n, NODE_LABELS) and n["metadata"]["name"].startswith(objects.NODE_PREFIX))
        deleted = self._delete_owned([f"/api/v1/nodes/{name}" for name in record], NODE_LABELS)
        self.deleted_nodes = [p.rsplit("/", 1)[1] for p in deleted]

        def remaining() -> set[str]:
            items, _ = client.list_all("/api/v1/nodes", labelSelector=objects.NODE_SELECTOR)
            return {n["metadata"]["name"] for n in items} & set(record)

        wait_for(lambda: not remaining(), 60, "harness nodes deleted", interval_s=1.0)

    def _uninstall_in_cluster_kwok(self) -> None:
        """Its namespace (with everything in it) and its cluster-scoped RBAC, found from the same manifests."""
        scoped = [object_path(d) for d in in_cluster_manifests(self.options.heartbeat_factor) if _cluster_scoped(d)]
        self._delete_owned(scoped, objects.MANAGED_BY)
        self._wait_gone(scoped, self.options.cleanup_timeout_s, "in-cluster kwok removed")

    def _wait_gone(self, paths: list[str], timeout_s: float, what: str) -> None:
        client = self._rest()
        wait_for(lambda: not any(client.request("GET", p, ok=(404,)) for p in paths), timeout_s, what,
                 interval_s=1.0)

    def _gone_within(self, paths: list[str], timeout_s: float) -> bool:
        try:
            self._wait_gone(paths, timeout_s, "gone")
        except TargetError:
            return False
        return True
