"""Control planes the harness runs against, behind one interface (base.Target): a local one it starts from
pinned binaries (local.py, with pki.py, processes.py, kwok.py), or an existing cluster named by kubeconfig
and context (existing.py)."""
