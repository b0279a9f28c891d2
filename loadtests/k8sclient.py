"""A small thread-safe REST client for the harness's own bookkeeping (fleet, clean-up, checks).

Plain JSON over a pooled urllib3 connection: creating thousands of nodes must cost the harness far less CPU
than it costs the apiserver, which the kubernetes client's model classes would not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import urllib3

from loadtests.target.base import ClusterAccess


class ApiError(Exception):
    def __init__(self, status: int, body: str, method: str, path: str) -> None:
        self.status = status
        self.body = body
        try:
            self.reason = json.loads(body).get("message", body[:200])
        except ValueError:
            self.reason = body[:200]
        super().__init__(f"{method} {path}: HTTP {status}: {self.reason}")


class RestClient:
    def __init__(self, access: ClusterAccess, *, pool_size: int = 32, timeout_s: float = 30.0) -> None:
        self.access = access
        self.pool = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, block=True, ssl_context=access.ssl_context(),
            timeout=urllib3.Timeout(connect=5.0, read=timeout_s), retries=False,
        )
        self.headers = {"Accept": "application/json", **access.auth_headers()}

    def request(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
                content_type: str = "application/json", ok: tuple[int, ...] = ()) -> dict[str, Any]:
        """Send one request; statuses in `ok` (besides 2xx) return {} instead of raising."""
        url = self.access.server + path + (f"?{urlencode(params)}" if params else "")
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        response = self.pool.request(method, url, body=data, headers=headers)
        if 200 <= response.status < 300:
            return json.loads(response.data) if response.data else {}
        if response.status in ok:
            return {}
        raise ApiError(response.status, response.data.decode(errors="replace"), method, path)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params or None)

    def create(self, path: str, body: dict[str, Any], *, exist_ok: bool = False) -> dict[str, Any]:
        return self.request("POST", path, body, ok=(409,) if exist_ok else ())

    def delete(self, path: str, *, missing_ok: bool = True, **params: Any) -> dict[str, Any]:
        return self.request("DELETE", path, params=params or None, ok=(404,) if missing_ok else ())

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def list_all(self, path: str, *, page: int = 500, **params: Any) -> tuple[list[dict[str, Any]], str]:
        """Every item of a LIST (paginated), and the resourceVersion to WATCH from."""
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            query = {"limit": page, **params, **({"continue": cont} if cont else {})}
            result = self.get(path, **query)
            items.extend(result.get("items", []))
            cont = result.get("metadata", {}).get("continue", "")
            if not cont:
                return items, result.get("metadata", {}).get("resourceVersion", "")

    def watch(self, path: str, resource_version: str, *, timeout_s: int = 60,
              **params: Any) -> Iterator[tuple[str, dict[str, Any], float]]:
        """Yield (type, object, monotonic receive time) from a WATCH until the server ends it."""
        query = {"watch": "1", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": timeout_s, **params}
        url = f"{self.access.server}{path}?{urlencode(query)}"
        response = self.pool.request("GET", url, headers=self.headers, preload_content=False,
                                     timeout=urllib3.Timeout(connect=5.0, read=timeout_s + 30))
        try:
            if response.status != 200:
                raise ApiError(response.status, response.read().decode(errors="replace"), "WATCH", path)
            buffer = b""
            for chunk in response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        event = json.loads(line)
                        yield event["type"], event["object"], time.monotonic()
        finally:
            response.release_conn()

    def close(self) -> None:
        self.pool.clear()
