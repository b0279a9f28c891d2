"""The Kubernetes protocol, once for the whole harness: how to reach an apiserver, its REST paths, its errors,
watch decoding (JSON, and protobuf with Kubernetes's own messages in pb/), the LIST+WATCH loop, request names,
kubeconfigs, and a thread-safe REST client.

The fleet, the probes and the load all speak through this package. The load keeps its own gevent transport
(loadtests/load/locust/transport.py) but decodes, names and loops with the pieces here. Modules are imported
one by one, never from this file: `rest` loads urllib3, which must not be imported before Locust patches
the process for gevent.
"""
