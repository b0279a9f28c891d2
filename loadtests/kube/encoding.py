"""A body's encoding told from its Content-Type, once for every transport (the harness's thread client and the
load's gevent client): JSON through watch.py, Kubernetes's protobuf through watch_protobuf.py, whose runtime is
imported only when an answer is protobuf. Nothing here does I/O."""

from __future__ import annotations

from typing import Any

from loadtests.kube import jsonbody, watch
from loadtests.kube.watch import Decoder, WatchDecoder, is_protobuf


def decoder_for(content_type: str | None, full: bool = False, fields: tuple[str, ...] = ()) -> Decoder:
    """The decoder of a watch answered with this Content-Type: protobuf frames, or JSON lines (what the
    apiserver sends for kinds without protobuf, custom resources, whatever the Accept asked). `fields`: what of
    each object is converted from protobuf (watch_protobuf.projector); JSON is read whole."""
    if not is_protobuf(content_type):
        return WatchDecoder()
    from loadtests.kube.watch_protobuf import ProtobufWatchDecoder

    return ProtobufWatchDecoder(full, fields)


def object_of(body: bytes, content_type: str | None, fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """A GET's or a LIST's answer as a dict, whichever encoding came: every field, or from protobuf only
    `fields` of it (of each item of a list)."""
    if not is_protobuf(content_type):
        return jsonbody.loads(body)
    from loadtests.kube.watch_protobuf import decode_object

    return decode_object(body, full=not fields, fields=fields)


def status_of(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The Status an error answer carries, as a dict ({} when the body is not one), in JSON or protobuf."""
    if is_protobuf(content_type):
        from loadtests.kube.watch_protobuf import decode_status

        return decode_status(body)
    try:
        data = jsonbody.loads(body or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def list_metadata(body: bytes, content_type: str | None) -> dict[str, Any]:
    """A LIST's metadata (resourceVersion, continue) without decoding its items, whichever encoding came."""
    if not is_protobuf(content_type):
        return watch.list_metadata(body)
    from loadtests.kube.watch_protobuf import list_metadata as protobuf_list_metadata

    return protobuf_list_metadata(body)
