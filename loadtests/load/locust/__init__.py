"""Code that runs only inside the Locust processes (importing Locust monkey-patches a process for gevent):
the locustfile, the master-worker link, the gevent transport, and the users of each scenario (scenarios/)."""
