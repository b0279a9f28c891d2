"""Drop secrets from what a report shows: reports get attached to tickets and mailed around.

The plan and environment are rendered as stored, minus any key whose name looks like a credential. Matching is
on the key name only (normalised: camelCase split, lower case, `-` as `_`), so a value is never guessed at.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(r"token|password|passwd|secret|client_key|private_key|key_file|cert_file|credential"
                        r"|authorization|bearer|api_key")
REDACTED_NOTE = "keys that look like credentials are left out"


def is_secret_key(name: Any) -> bool:
    normal = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name)).lower().replace("-", "_")
    return bool(SECRET_KEY.search(normal))


def redact(value: Any) -> Any:
    """A copy of `value` without any mapping key named like a secret, at any depth."""
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value
