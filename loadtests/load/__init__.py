"""The runner's side of the load (it never imports Locust): the scenarios (declared once in
config/scenarios.py) handed over to the Locust processes (contract.py), their command lines (processes.py),
the generator of a step (generator.py) and workers on other machines (remote.py). What runs inside Locust is
locust/."""
