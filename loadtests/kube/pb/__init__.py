"""Kubernetes's own protobuf messages (meta/v1, runtime, schema, intstr, resource, core/v1) at the pinned
release, as Python modules written by `make protos` (generate.py says how and from what) and committed.
Import them one by one (`from loadtests.kube.pb import core_v1_pb2`): each needs the `protobuf` runtime."""
