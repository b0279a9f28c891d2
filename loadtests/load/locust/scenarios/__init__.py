"""The users of each scenario, one module per behaviour (pod_churn, kubelet_watchers, service_watchers,
informers, list_pollers, objects), each declared by name in config/scenarios.py, found by that name in
registry.py and built from the runner's LoadConfig (load/contract.py); base.py holds what they share.
Imported only inside the Locust processes."""
