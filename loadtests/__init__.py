"""Load tests for the Kubernetes control plane: KWOK fake nodes, a real apiserver and etcd, Locust load."""

from pathlib import Path

__version__ = "0.1.0"

# The package's own data (plans/, lessons/, kwok_configs/, data/) sits beside this file, wherever a module is.
PACKAGE_DIR = Path(__file__).resolve().parent
