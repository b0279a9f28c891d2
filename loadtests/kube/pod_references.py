"""The ConfigMaps and Secrets a pod names, as the kubelet of its node finds them: it watches each one on its own
(a watch of `metadata.name=<name>` in the pod's namespace), so they are a node's watches beyond its fixed ones.

Paths in k8s.io/kubernetes@v1.37.2. The kubelet's watch-based managers (pkg/kubelet/configmap/configmap_manager.go
getConfigMapNames, pkg/kubelet/secret/secret_manager.go getSecretNames) take the names that
podutil.VisitPodConfigmapNames and VisitPodSecretNames (pkg/api/v1/pod/util.go) visit, and start one reflector per
object when a pod is registered (pkg/kubelet/util/manager/cache_based_manager.go RegisterPod,
watch_based_manager.go objectCache.AddReference). Each minute (startRecycleIdleWatch) it stops the reflectors whose
object was not read for maxIdleTime, 5 x resyncInterval (the kubelet's syncFrequency, 1 min by default), and starts
one again when the object is next read. So of the names visited:
- kept: read on every sync of the pod, watched while the pod exists: ConfigMap and Secret volumes and a projected
  volume's configMap and secret sources (their volume plugins read them through the managers on each remount:
  pkg/volume/configmap, secret, projected), and imagePullSecrets (kubelet_pods.go getPullSecretsForPod, each sync);
- transient: read once or never, their watch dropped once idle: env's configMapKeyRef and secretKeyRef and envFrom's
  configMapRef and secretRef of every container (init, regular, ephemeral), read when a container starts
  (kubelet_pods.go makeEnvironmentVariables), so dropped 5-6 min later; and the secretRef of the other volume
  plugins VisitPodSecretNames visits (azureFile, cephfs, cinder, flexVolume, rbd, scaleIO, iscsi, storageos, csi's
  nodePublishSecretRef), which read their Secret with a client of their own: never read through the manager, so
  dropped at the first check after the watch's initial list.
A name both kept and transient is kept. The pod is its JSON form, or the summary watch_protobuf decodes of a
protobuf one (SUMMARY_FIELDS holds these fields).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# per resource: where a pod's spec names one, as dotted paths of its JSON form (a path through a list reaches into
# each element), kept or transient (the module's docstring)
# - the volume sources its visitor's switch tests, in order (the first set one is the volume's): (source, path, kept)
VOLUMES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "configmaps": (("projected", "sources.configMap.name", True), ("configMap", "name", True)),
    "secrets": (("azureFile", "secretName", False), ("cephfs", "secretRef.name", False),
                ("cinder", "secretRef.name", False), ("flexVolume", "secretRef.name", False),
                ("projected", "sources.secret.name", True), ("rbd", "secretRef.name", False),
                ("secret", "secretName", True), ("scaleIO", "secretRef.name", False),
                ("iscsi", "secretRef.name", False), ("storageos", "secretRef.name", False),
                ("csi", "nodePublishSecretRef.name", False)),
}
# - each container's (podutil.AllContainers: init, regular, ephemeral)
CONTAINERS = ("initContainers", "containers", "ephemeralContainers")
CONTAINER_PATHS = {"configmaps": ("envFrom.configMapRef.name", "env.valueFrom.configMapKeyRef.name"),
                   "secrets": ("envFrom.secretRef.name", "env.valueFrom.secretKeyRef.name")}
# - the pod's own
SPEC_PATHS = {"configmaps": (), "secrets": ("imagePullSecrets.name",)}


def _names(value: Any, path: list[str]) -> Iterator[str]:
    """The strings at a dotted path of a JSON value."""
    if isinstance(value, list):
        for element in value:
            yield from _names(element, path)
    elif not path:
        if isinstance(value, str):
            yield value
    elif isinstance(value, dict) and path[0] in value:
        yield from _names(value[path[0]], path[1:])


def _volume_names(volume: dict[str, Any], resource: str) -> tuple[bool, list[str]]:
    """(kept, the names) of one volume: its first set source of the visitor's switch."""
    for source, path, kept in VOLUMES[resource]:
        if volume.get(source) is not None:
            return kept, list(_names(volume[source], path.split(".")))
    return True, []


def referenced_objects(pod: dict[str, Any], resource: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(kept, transient): the (namespace, name) of each ConfigMap (resource "configmaps") or Secret ("secrets") the
    pod names, those its kubelet keeps watching while the pod exists, and those it watches only until idle."""
    if resource not in VOLUMES:
        raise ValueError(f"a pod names no {resource!r}; expected one of: {', '.join(VOLUMES)}")
    spec = pod.get("spec") or {}
    kept = [name for path in SPEC_PATHS[resource] for name in _names(spec, path.split("."))]
    transient = [name for containers in CONTAINERS for path in CONTAINER_PATHS[resource]
                 for name in _names(spec.get(containers) or [], path.split("."))]
    for volume in spec.get("volumes") or ():
        volume_kept, names = _volume_names(volume, resource)
        (kept if volume_kept else transient).extend(names)
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    kept_set = {(namespace, name) for name in kept if name}  # the visitors skip empty names
    return kept_set, {(namespace, name) for name in transient if name} - kept_set
