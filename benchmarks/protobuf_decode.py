"""What decoding one watch event costs the load's client: JSON (a line, json.loads) vs protobuf (a frame,
Kubernetes's own messages through the `protobuf` library), per event, for a typical pod and a BOOKMARK.

The pod is what the harness's pods look like once kwok runs them (one container, its requests, the default
tolerations, the kube-api-access volume the ServiceAccount admission plugin adds, five conditions, three
managedFields entries); it is built with the generated classes and its
JSON is the same object in the JSON form, so both carry the same fields. Each decoder is fed one event per
call, as the transports feed them; the figure is the median over rounds of the mean over a round's events.
"protobuf (summary)" is what the load's watchers get (metadata, a Pod's node, phase and conditions, and what a
node's agents read of it: volumes, imagePullSecrets, ServiceAccount, env references; SUMMARY_FIELDS),
"protobuf (full)" every field, "protobuf (parse only)" the messages parsed and nothing converted. A recorded
pod too: one kwok ran on a local kube-apiserver v1.37.2, as that apiserver answered a GET of it in each
encoding (RECORDED, in tests/unit/data; tests/integration/test_load.py makes such a pod), each put in an
event as the apiserver frames one. Writes benchmarks/results/protobuf_decode.md, the raw rounds and the
payloads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from google.protobuf import __version__ as protobuf_version  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from loadtests.kube.pb import core_v1_pb2, meta_v1_pb2, runtime_pb2  # noqa: E402
from loadtests.kube.watch import INITIAL_EVENTS_END, WatchDecoder  # noqa: E402
from loadtests.kube.watch_protobuf import MAGIC, ProtobufWatchDecoder, encode_frame, message_dict  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "protobuf_decode.md"
# a GET of a Running pod, answered in JSON and in protobuf
RECORDED = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data"
STAMP = 1_765_000_000


def _managed(meta: meta_v1_pb2.ObjectMeta, manager: str, fields: dict, subresource: str = "") -> None:
    entry = meta.managedFields.add(manager=manager, operation="Update", apiVersion="v1", fieldsType="FieldsV1",
                                   subresource=subresource)
    entry.time.seconds = STAMP
    entry.fieldsV1.Raw = json.dumps(fields, separators=(",", ":")).encode()


def typical_pod(rv: str) -> core_v1_pb2.Pod:
    """A churn pod of the harness as kwok runs it."""
    pod = core_v1_pb2.Pod()
    meta = pod.metadata
    meta.name, meta.namespace, meta.uid = "churn-7f3a9c-x2b8q", "loadtest-churn", "0d6f1c9e-7a51-4c0b-9a53-2f1d6b0e8c41"
    meta.resourceVersion, meta.creationTimestamp.seconds = rv, STAMP
    meta.labels.update({"app.kubernetes.io/managed-by": "k8s-loadtest", "app": "churn", "k8s-loadtest/run": "run-1"})
    meta.annotations["k8s-loadtest/created"] = "1765000000.123"
    _managed(meta, "k8s-loadtest", {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {
        "f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}}}})
    _managed(meta, "kube-scheduler", {"f:status": {"f:conditions": {}}}, "status")
    _managed(meta, "kwok", {"f:status": {"f:conditions": {}, "f:phase": {}, "f:podIP": {}}}, "status")
    spec = pod.spec
    container = spec.containers.add(name="app", image="registry.k8s.io/pause:3.10", imagePullPolicy="IfNotPresent",
                                    terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File")
    container.resources.requests["cpu"].string, container.resources.requests["memory"].string = "10m", "16Mi"
    spec.restartPolicy, spec.dnsPolicy, spec.schedulerName = "Always", "ClusterFirst", "default-scheduler"
    spec.terminationGracePeriodSeconds, spec.serviceAccountName, spec.nodeName = 30, "default", "kwok-node-00042"
    spec.enableServiceLinks, spec.preemptionPolicy, spec.priority = True, "PreemptLowerPriority", 0
    spec.securityContext.SetInParent()
    _kube_api_access(spec, container)
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        spec.tolerations.add(key=key, operator="Exists", effect="NoExecute", tolerationSeconds=300)
    status = pod.status
    status.phase, status.hostIP, status.podIP, status.qosClass = "Running", "10.0.0.42", "10.128.42.7", "Burstable"
    status.podIPs.add(ip="10.128.42.7")
    status.hostIPs.add(ip="10.0.0.42")
    status.startTime.seconds = STAMP + 1
    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
        condition = status.conditions.add(type=kind, status="True")
        condition.lastTransitionTime.seconds = STAMP + 1
    running = status.containerStatuses.add(name="app", ready=True, restartCount=0, image="registry.k8s.io/pause:3.10",
                                           imageID="", containerID="kwok://app", started=True)
    running.state.running.startedAt.seconds = STAMP + 1
    return pod


def _kube_api_access(spec: core_v1_pb2.PodSpec, container: core_v1_pb2.Container) -> None:
    """The projected volume the ServiceAccount admission plugin adds to a pod (a token, the cluster's CA, the
    namespace), and its mount."""
    name = "kube-api-access-wrqql"
    projected = spec.volumes.add(name=name).volumeSource.projected
    projected.defaultMode = 420
    projected.sources.add().serviceAccountToken.MergeFrom(
        core_v1_pb2.ServiceAccountTokenProjection(expirationSeconds=3607, path="token"))
    root_ca = projected.sources.add().configMap
    root_ca.localObjectReference.name = "kube-root-ca.crt"
    root_ca.items.add(key="ca.crt", path="ca.crt")
    namespace = projected.sources.add().downwardAPI.items.add(path="namespace")
    namespace.fieldRef.apiVersion, namespace.fieldRef.fieldPath = "v1", "metadata.namespace"
    container.volumeMounts.add(name=name, readOnly=True, mountPath="/var/run/secrets/kubernetes.io/serviceaccount")


def bookmark(rv: str) -> core_v1_pb2.Pod:
    found = core_v1_pb2.Pod()
    found.metadata.resourceVersion = rv
    found.metadata.annotations[INITIAL_EVENTS_END] = "true"
    return found


def payloads(message: core_v1_pb2.Pod, event_type: str) -> tuple[bytes, bytes]:
    """(the JSON line, the protobuf frame) of one event of this object."""
    line = json.dumps({"type": event_type, "object": {"kind": "Pod", "apiVersion": "v1", **message_dict(message)}},
                      separators=(",", ":")).encode() + b"\n"
    return line, encode_frame(event_type, message, "v1", "Pod")


def parse_only(frame: bytes) -> None:
    event = meta_v1_pb2.WatchEvent.FromString(frame[4:])
    unknown = runtime_pb2.Unknown.FromString(event.object.raw[len(MAGIC):])
    core_v1_pb2.Pod.FromString(unknown.raw)


def per_event_us(feed: Callable[[bytes], object], payload: bytes, events: int, rounds: int) -> list[float]:
    """Mean µs per event of each round."""
    found = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(events):
            feed(payload)
        found.append((time.perf_counter_ns() - start) / events / 1000)
    return found


def decoders() -> dict[str, Callable[[bytes], object]]:
    """Each way of decoding one event, fed its bytes as a transport feeds them."""
    json_lines, summary, full = WatchDecoder(), ProtobufWatchDecoder(), ProtobufWatchDecoder(full=True)
    return {
        "json": lambda data: json_lines.feed(data, 0.0),
        "protobuf (summary)": lambda data: summary.feed(data, 0.0),
        "protobuf (full)": lambda data: full.feed(data, 0.0),
        "protobuf (parse only)": parse_only,
    }


def recorded(event_type: str) -> tuple[bytes, bytes]:
    """(the JSON line, the protobuf frame) of an event of the recorded pod: its GET bodies as a watch carries them
    (the embedded object of a protobuf watch event is what a GET answers, `k8s\\x00` + Unknown)."""
    as_json = (RECORDED / "kube-apiserver_v1.37.2_pod.json").read_bytes().strip()
    as_protobuf = (RECORDED / "kube-apiserver_v1.37.2_pod.pb").read_bytes()
    line = b'{"type":"' + event_type.encode() + b'","object":' + as_json + b"}\n"
    event = meta_v1_pb2.WatchEvent(type=event_type)
    event.object.raw = as_protobuf
    data = event.SerializeToString()
    return line, len(data).to_bytes(4, "big") + data


def measure(events: int, rounds: int) -> dict[str, dict]:
    found: dict[str, dict] = {}
    cases = {"pod": payloads(typical_pod("4242"), "MODIFIED"), "pod (recorded)": recorded("MODIFIED"),
             "bookmark": payloads(bookmark("4242"), "BOOKMARK")}
    for name, (line, frame) in cases.items():
        for decoder, feed in decoders().items():
            payload = line if decoder == "json" else frame
            feed(payload)  # warm
            rounds_us = per_event_us(feed, payload, events, rounds)
            found[f"{name}: {decoder}"] = {"bytes": len(payload), "rounds_us": rounds_us,
                                          "median_us": statistics.median(rounds_us)}
        if name in ("pod", "bookmark"):
            keep_raw(f"protobuf_decode/{name}.jsonl.gz", line)
            keep_raw(f"protobuf_decode/{name}.frame.gz", frame)
    return found


def conclusion(found: dict[str, dict]) -> str:
    """What the table says, in its own figures."""
    def span(decoder: str, of: str = "median_us", form: str = ".2f") -> str:
        ratios = [found[f"{pod}: {decoder}"][of] / found[f"{pod}: json"][of] for pod in ("pod", "pod (recorded)")]
        return f"{min(ratios):{form}}-{max(ratios):{form}}"

    return (f"A pod event the load's watchers decode from protobuf costs {span('protobuf (summary)')}x the JSON "
            f"one's CPU in this Python client, with every field {span('protobuf (full)')}x; parsing the messages "
            f"alone is {span('protobuf (parse only)')}x: the cost is building Python dicts, which json.loads does in "
            f"C. The bytes received are {span('protobuf (summary)', 'bytes', '.0%')} of JSON's.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    found = measure(args.events, args.rounds)
    keep_raw("protobuf_decode.json.gz", {"events": args.events, "rounds": args.rounds, "figures": found})
    setting = (f"Python {sys.version.split()[0]}, protobuf {protobuf_version} ({api_implementation.Type()} backend); "
               f"{args.rounds} rounds of {args.events} events, one event per feed")
    lines = results_head("Decoding one watch event: JSON vs protobuf", setting,
                         ".venv/bin/python benchmarks/protobuf_decode.py",
                         ["event", "decoder", "bytes", "µs per event (median of rounds)", "rounds min-max µs",
                          "vs json"])
    for key, figure in found.items():
        event, decoder = key.split(": ")
        json_us = found[f"{event}: json"]["median_us"]
        lines.append(f"| {event} | {decoder} | {figure['bytes']:,} | {figure['median_us']:.1f} | "
                     f"{min(figure['rounds_us']):.1f}-{max(figure['rounds_us']):.1f} | "
                     f"{figure['median_us'] / json_us:.2f}x |")
    lines += ["", conclusion(found)]
    lines += ["", "Raw rounds: benchmarks/results/raw/protobuf_decode.json.gz; the payloads: "
                  "benchmarks/results/raw/protobuf_decode/ (pod.jsonl.gz, pod.frame.gz, bookmark.jsonl.gz, "
                  "bookmark.frame.gz); the recorded pod: tests/unit/data/kube-apiserver_v1.37.2_pod.{json,pb}."]
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
