"""JSON in and out of session files and the index: orjson, with the stdlib for what orjson refuses.

orjson rejects lone surrogates (``"\\ud800"``) and integers beyond 64 bits; such values do reach us
(messages written by other programs), and one of them must never keep a file from loading or saving.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data.decode("utf-8", "surrogatepass"))


def dumps(obj: Any, *, indent: bool = False) -> bytes:
    try:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 if indent else 0, default=str)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(obj, indent=2 if indent else None, ensure_ascii=True, default=str).encode("ascii")


def dumps_kept(obj: Any) -> bytes:
    """``dumps`` for bytes memory keeps (a sidebar row per session): orjson's bytes keep the whole buffer it
    reserved, about 15 times a short text (32 KB for a row of 1.7 KB), so these are copied to their size. Bytes
    written or sent at once are not: a copy of a session's messages would cost a save a second pass."""
    return bytes(memoryview(dumps(obj)))


def dumps_document(obj: dict[str, Any]) -> bytes:
    """One top-level key per line (``\n  "key": value``), each value compact.

    Readers that want only the metadata can stop at the line of a bulky key (``\n  "messages":``);
    compact values hold no raw newline, so that marker only ever matches at the top level.
    """
    lines = [b"  " + dumps(str(key)) + b": " + dumps(value) for key, value in obj.items()]
    return b"{\n" + b",\n".join(lines) + b"\n}" if lines else b"{}"
