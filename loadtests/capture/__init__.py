"""Read-only profiles of real clusters: what they hold (objects per kind, sizes, shapes) and, later, how they are
used (traffic); a profile says nothing private of the cluster it was taken from (docs/profile.md)."""
