"""The one JSON decoder reads what the standard library reads, to the same values, and words errors as it does."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from loadtests.kube import jsonbody

POD = Path(__file__).parent / "data" / "kube-apiserver_v1.37.2_pod.json"


def test_a_recorded_pod_decodes_to_the_standard_librarys_dict() -> None:
    body = POD.read_bytes()
    assert jsonbody.loads(body) == json.loads(body)
    assert jsonbody.loads(memoryview(body)) == json.loads(body)


def test_what_orjson_refuses_the_standard_library_still_reads() -> None:
    assert math.isnan(jsonbody.loads("[NaN]")[0]) and jsonbody.loads(b"[Infinity]") == [math.inf]
    assert jsonbody.loads(b'{"max": 9223372036854775807}')["max"] == 2**63 - 1  # int64, whole


def test_a_broken_body_is_the_standard_librarys_error() -> None:
    with pytest.raises(json.JSONDecodeError) as found:
        jsonbody.loads(b'{"kind": ')
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(b'{"kind": ')
    assert str(found.value) == str(expected.value)
