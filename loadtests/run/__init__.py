"""One run from start to end: the runner (plan → target → steps → results), the step chooser of a capacity
search, the fleet of fake nodes and pods, and nodes joining inside a window."""
