"""The compression marker of a session compressed elsewhere: the server sends where it goes."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from .helpers import goto_app, import_session, screenshots

pytestmark = pytest.mark.e2e


def test_a_session_compressed_by_hermes_webui_shows_its_marker_after_the_anchor_row(page, server):
    base = time.time() - 600
    rows = []
    for i in range(3):
        rows.append({"role": "user", "content": f"Question {i} about the plan", "timestamp": base + 2 * i})
        rows.append(
            {
                "role": "assistant",
                "content": f"Answer {i}: step one, then two.",
                "timestamp": base + 2 * i + 1,
            }
        )
    # hermes-webui records the anchor's key and no index into the transcript.
    key = {"role": "assistant", "ts": base + 3, "text": "Answer 1: step one, then two.", "attachments": 0}
    session = import_session(
        server,
        "Compressed elsewhere",
        rows,
        compression_anchor_message_key=key,
        compression_anchor_summary="The first turns agreed on the plan. ~2,400 → ~300 tokens",
        compression_anchor_mode="manual",
    )
    goto_app(page, f"/#/s/{session['session_id']}")
    expect(page.locator(".msg")).to_have_count(6)
    marker = page.locator(".compress-marker")
    expect(marker).to_have_count(1)
    assert marker.evaluate("node => node.previousElementSibling.dataset.idx") == "3"
    expect(marker.locator("summary")).to_have_text("earlier turns compressed here — about 2,100 tokens saved")
    screenshots(page, "marker-from-elsewhere")
