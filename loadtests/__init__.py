"""Load tests for the Kubernetes control plane: KWOK fake nodes, a real apiserver and etcd, Locust load."""

__version__ = "0.1.0"
