"""The load: Locust user classes, one module per behaviour (pod_churn, kubelet_watchers, informers,
list_pollers), declared in catalog.py, built from the runner's LoadConfig (config.py), talking to the
apiserver through the gevent transport (transport.py).

This package's top level imports nothing: the runner reads catalog.py and config.py, and importing Locust
(which the user modules do) monkey-patches the whole process for gevent.
"""
