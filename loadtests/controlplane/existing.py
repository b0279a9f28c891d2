"""An existing cluster someone else runs: used only when named explicitly, and left as it was found.

The user names the kubeconfig and the context, and confirms the context by repeating it (--allow-context);
the kubeconfig's current-context is never used by default. The harness brings its own kwok (a process of
ours on this machine, or a Deployment in the cluster), refuses to start next to harness objects it did not
create, and on `down` removes exactly what it created: its namespaces, its fake nodes, its kwok. etcd is not
reachable there, so the probes fall back to what the apiserver reports about storage.
"""

from __future__ import annotations

import shlex
import shutil
import ssl
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.binaries import cache as binaries_mod
from loadtests.config import versions
from loadtests.controlplane import kwok as kwok_mod
from loadtests.controlplane.base import TargetInfo, TargetRequest
from loadtests.controlplane.health import HealthCheck, endpoint_check
from loadtests.controlplane.processes import ClusterState, ProcessGroup, ProcessRecord, free_ports, wait_for
from loadtests.errors import AccessRefused, TargetError
from loadtests.kube import objects
from loadtests.kube.access import ClusterAccess
from loadtests.kube.credentials import forget_tokens
from loadtests.kube.errors import ApiError
from loadtests.kube.kubeconfig import KubeContext, context_names, parse_context, read_kubeconfig
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.paths import object_path, resource_path
from loadtests.kube.rest import RestClient, short_error

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


# ------------------------------------------------------------------------------------------------ target
def _cluster_scoped(obj: dict[str, Any]) -> bool:
    return "namespace" not in obj["metadata"]


def _local_kwok_binary() -> Path | None:
    kwok_set = binaries_mod.BinarySet("kwok", versions.KWOK_VERSION, binaries_mod.KWOK_BINARIES)
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
        self._kwok_port: int | None = None
        self.deleted_nodes: list[str] = []  # the record of the nodes removed by the last down

    @classmethod
    def from_request(cls, plan: Any, request: TargetRequest, *, log_dir: Path | None = None,
                     log: Callable[[str], None] = print) -> ExistingCluster:
        """From what the command line said and the plan's target; the guard runs here, before anything starts."""
        context = guard(request.kubeconfig or plan.target.kubeconfig, request.context or plan.target.context,
                        request.allow_context)
        return cls(ClusterOptions(context=context, kwok_mode=request.kwok_mode,
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
                lost = "lost " if not error.status else ""
                raise TargetError(f"{lost}{self._where}: {error}") from None
        except BaseException:
            # a refused or half-done up leaves nothing behind (down only removes what was created)
            try:
                self.down()
            except TargetError as error:
                self.log(f"warning: clean-up after the failed start: {error}")
            raise
        assert self.access is not None
        self._info = TargetInfo(access=self.access, etcd_metrics_url=None,
                                versions={"kubernetes": version, "kwok": versions.KWOK_VERSION},
                                pids=self._pids(), kind="cluster")
        return self._info

    def _up(self) -> str:
        self.workdir = Path(tempfile.mkdtemp(prefix="k8s-loadtest-cluster-"))  # mode 0700
        self.access = self.context.materialize(self.workdir)
        try:
            self.client = RestClient(self.access, timeout_s=15.0)
        except (ssl.SSLError, OSError) as error:
            raise AccessRefused(f"{self.context.source}: context {self.context.name!r}: its certificates cannot "
                                f"be loaded ({short_error(error)})") from None
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
            client.get(resource_path("nodes"), limit=1)  # /version may be public; this one needs the credentials
        except ApiError as error:
            if not error.status:
                raise TargetError(f"cannot reach {self._where}: {error.reason}; is the cluster running and "
                                  "the kubeconfig current?") from None
            if error.status == 401:
                raise AccessRefused(f"{self._where} refused the kubeconfig's credentials (HTTP 401: "
                                    f"{error.reason}); check the user of that context") from None
            if error.status == 403:  # who it is was accepted; what it may do was not
                raise AccessRefused(f"{self._where}: the kubeconfig's user may not list nodes (HTTP 403: "
                                    f"{error.reason}); the harness needs rights like cluster-admin's on nodes, "
                                    "namespaces, pods and deployments") from None
            raise TargetError(f"{self._where} answered HTTP {error.status}: {error.reason}") from None
        self.log(f"existing cluster: {self._where}, Kubernetes {version}")
        return str(version)

    def _check_rights(self, rights: tuple[tuple[str, str, str], ...]) -> None:
        """Ask the apiserver (SelfSubjectAccessReview) rather than fail half-way through a run."""
        missing = []
        for verb, resource, group in rights:
            review = self._rest().create(resource_path("selfsubjectaccessreviews"), {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": group}},
            })
            if not review.get("status", {}).get("allowed"):
                missing.append(f"{verb} {resource}")
        if missing:
            raise AccessRefused(f"{self._where}: the kubeconfig's user may not {', '.join(missing)}; the harness "
                                "needs rights like cluster-admin's on nodes, namespaces, pods and deployments")

    def _claim(self) -> None:
        """Refuse to start next to harness objects of another run; wait out namespaces still being deleted."""
        client = self._rest()
        nodes = client.list_items("nodes", label_selector=objects.NODE_SELECTOR)
        names = sorted(n["metadata"]["name"] for n in nodes)
        namespaces = []
        for name in (*self._harness_namespaces(), KWOK_NAMESPACE):
            path = resource_path("namespaces", name=name)
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
            raise TargetError(f"kwok {versions.KWOK_VERSION} is not in {binaries_mod.cache_root()}/bin; "
                              "run `make setup`, or use kwok_mode in-cluster")
        port = free_ports(1)[0]
        config = kwok_mod.write_config(self.workdir / "kwok.yaml", self.options.heartbeat_factor)
        state = ClusterState(name="existing-cluster", directory=str(self.workdir))
        self._group = ProcessGroup(state, self.options.log_dir or self.workdir / "logs")
        self._kwok_port = port
        self._kwok = self._group.start("kwok", kwok_mod.local_argv(
            binary, Path(self.access.kubeconfig), config, port, self.options.heartbeat_factor))
        group, record = self._group, self._kwok
        wait_for(lambda: kwok_mod.healthy(port), 60, "kwok healthy", abort=lambda: group.exited(record))
        self.log(f"kwok {versions.KWOK_VERSION} runs here (pid {record.pid}, 127.0.0.1:{port}) against "
                 f"{self._where}")

    def _install_in_cluster_kwok(self) -> None:
        client = self._rest()
        self._installed = True  # from the first object on, so a half-done install is removed too
        for doc in kwok_mod.in_cluster_manifests(self.options.heartbeat_factor):
            client.request("PATCH", object_path(doc), doc, content_type="application/apply-patch+yaml",
                           params={"fieldManager": FIELD_MANAGER, "force": "true"})
        path = resource_path("deployments", KWOK_NAMESPACE, KWOK_DEPLOYMENT)

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
        return self._rest().get(resource_path("pods", KWOK_NAMESPACE),
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

    def node_identities(self, names: Sequence[str]) -> NodeIdentities | None:
        """None: we do not hold the cluster's CA, so no node's certificate can be made; the node agents then send
        as the load's own identity."""
        return None

    def stopped_from_outside(self) -> str | None:
        """Never known here: the cluster is someone else's, and its processes are not ours to watch."""
        return None

    def folders(self) -> list[Path]:
        """Its private folder (credentials, kwok's kubeconfig) and where the local kwok logs."""
        return [p for p in (self.workdir, self.options.log_dir) if p is not None]

    def health_checks(self) -> list[HealthCheck]:
        """The cluster's apiserver (/livez, with the context's credentials) and our local kwok, if any."""
        client = self._rest()
        checks = [HealthCheck("kube-apiserver",
                              lambda: None if client.answers("/livez") else "stopped answering /livez")]
        if self._kwok is not None and self._kwok_port:
            port = self._kwok_port
            group = self._group
            checks.append(endpoint_check("kwok", self._kwok, f"127.0.0.1:{port}", "/healthz",
                                         lambda _url: kwok_mod.healthy(port),
                                         exit_reason=group.exit_reason if group else None))
        return checks

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
            return False

        if self._claimed:
            namespaces = [resource_path("namespaces", name=name) for name in self._harness_namespaces()]
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

    def _harness_namespaces(self) -> list[str]:
        """The harness's fixed namespaces, and those the objects scenario made (one per N nodes), found by
        their name and the managed-by label."""
        listed = self._rest().list_items("namespaces", label_selector=objects.MANAGED_BY_SELECTOR)
        made = sorted(n["metadata"]["name"] for n in listed
                      if n["metadata"]["name"].startswith(objects.NS_OBJECTS_PREFIX) and _owned(n, objects.MANAGED_BY))
        return [*objects.NAMESPACES, *made]

    def _release(self) -> None:
        """Close the client and remove the private folder with the credential files (and forget its tokens)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.access is not None:
            forget_tokens(self.access.kubeconfig)
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
        nodes = client.list_items("nodes", label_selector=objects.NODE_SELECTOR)
        record = sorted(n["metadata"]["name"] for n in nodes
                        if _owned(n, NODE_LABELS) and n["metadata"]["name"].startswith(objects.NODE_PREFIX))
        deleted = self._delete_owned([resource_path("nodes", name=name) for name in record], NODE_LABELS)
        self.deleted_nodes = [p.rsplit("/", 1)[1] for p in deleted]

        def remaining() -> set[str]:
            items = client.list_items("nodes", label_selector=objects.NODE_SELECTOR)
            return {n["metadata"]["name"] for n in items} & set(record)

        wait_for(lambda: not remaining(), 60, "harness nodes deleted", interval_s=1.0)

    def _uninstall_in_cluster_kwok(self) -> None:
        """Its namespace (with everything in it) and its cluster-scoped RBAC, found from the same manifests."""
        manifests = kwok_mod.in_cluster_manifests(self.options.heartbeat_factor)
        scoped = [object_path(d) for d in manifests if _cluster_scoped(d)]
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
