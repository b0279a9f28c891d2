"""Read-only profiles of real clusters: what they hold (objects per kind, sizes, shapes) and how they are used
(traffic, from audit logs or two /metrics scrapes), to replay at a multiple; a profile says nothing private of the
cluster it was taken from (docs/profile.md)."""
