"""Kubernetes's own protobuf messages at the pinned release: meta/v1, runtime, schema, intstr, resource and core/v1,
and the API groups a node's agents use (discovery/v1, node/v1, storage/v1, networking/v1, coordination/v1,
certificates/v1, events/v1, authentication/v1), and Prometheus's MetricFamily (client_model's metrics.proto, the
protobuf form of every component's /metrics), as Python modules written by `make protos` (generate.py says how
and from what) and committed. Import them one by one (`from loadtests.kube.pb import core_v1_pb2`): each needs
the `protobuf` runtime."""
