"""JSON in and out of session files and the index (``api.rules.jsonio``)."""

from __future__ import annotations

import tracemalloc

from api.rules import jsonio


def test_encoded_json_that_memory_keeps_holds_its_text_alone():
    """orjson's bytes keep the whole buffer it reserved, about 15 times the text: the sidebar index, which keeps
    each session's encoded row, held 32 KB for a row of 1.7 KB. What ``dumps_kept`` returns holds its text."""
    row = {f"field_{i}": "a value of the row" for i in range(60)}
    tracemalloc.start()
    try:
        kept = [jsonio.dumps_kept(row) for _ in range(50)]
        held = tracemalloc.get_traced_memory()[0] / len(kept)
    finally:
        tracemalloc.stop()
    assert jsonio.loads(kept[0]) == row
    assert held < 2 * len(kept[0]), (held, len(kept[0]))
