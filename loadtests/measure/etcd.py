"""What is asked of etcd itself at the window's close: its alarms and the keys under each prefix (the figures
its /metrics pages give are analysis/etcd.py's)."""

from __future__ import annotations

import base64
import json

from loadtests.kube import jsonbody
from loadtests.kube.access import ClusterAccess
from loadtests.kube.rest import send_once

# Key prefixes counted in etcd at the window's close: what the main etcd holds of each (with Events in their
# own etcd, "events" falls to zero in the main one)
COUNTED_PREFIXES = {"events": "/registry/events/", "pods": "/registry/pods/", "leases": "/registry/leases/"}


def _post(client: ClusterAccess, path: str, body: dict[str, object], timeout_s: float) -> dict[str, object]:
    """One call to etcd's JSON gateway (/v3/...), with the client certificate etcd requires; OSError naming
    the status when etcd answers with anything but 200."""
    response = send_once("POST", client.server.rstrip("/") + path, tls=client.ssl_context(),
                         body=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
                         timeout_s=timeout_s)
    if response.status != 200:
        raise OSError(f"etcd {path}: HTTP {response.status}: {response.data.decode('utf-8', 'replace')[:200]}")
    return jsonbody.loads(response.data or b"{}")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    """The range end that covers every key starting with prefix (its last byte plus one)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def alarms(client: ClusterAccess, timeout_s: float = 10.0) -> list[str]:
    """etcd's raised alarms (NOSPACE when the database reached its quota, CORRUPT), one per member."""
    found = _post(client, "/v3/maintenance/alarm", {"action": "GET"}, timeout_s).get("alarms") or []
    return sorted({str(a.get("alarm")) for a in found if isinstance(a, dict) and a.get("alarm")})


def key_counts(client: ClusterAccess, prefixes: dict[str, str] | None = None,
               timeout_s: float = 30.0) -> dict[str, int]:
    """Keys under each prefix, counted by etcd itself (count_only: no value leaves etcd)."""
    counts = {}
    for name, prefix in (prefixes or COUNTED_PREFIXES).items():
        reply = _post(client, "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)),
                                               "count_only": True}, timeout_s)
        counts[name] = int(reply.get("count") or 0)
    return counts
