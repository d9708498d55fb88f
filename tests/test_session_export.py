"""Session export: the JSON file payload, a readable Markdown transcript, an inert standalone HTML page."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from api import session_admin
from api.errors import BadRequest, NotFound
from api.models import Session
from api.session_export import export_session, to_markdown


def _session() -> Session:
    session = Session(
        title='Plans <img src=x onerror="alert(1)">',
        model="m1",
        messages=[
            {"role": "user", "content": "Show me `code` and ```fences```", "timestamp": 1700000000.0},
            {
                "role": "assistant",
                "content": "Sure: <script>alert('x')</script> [click](javascript:alert(1))",
                "timestamp": 1700000001.0,
                "tool_calls": [{"id": "c1", "function": {"name": "search", "arguments": '{"q": "x"}'}}],
            },
            {"role": "tool", "name": "search", "tool_call_id": "c1", "content": "result <b>text</b>"},
        ],
        context_messages=[{"role": "user", "content": "ctx"}],
    )
    session.save()
    return session


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_json_export_is_the_session_file_payload(state_dir):
    session = _session()
    body, content_type, filename = export_session(session.session_id, "json")
    data = json.loads(body)
    assert content_type.startswith("application/json") and filename == f"talaria-{session.session_id}.json"
    assert data["messages"] == session.messages and data["context_messages"] == [{"role": "user", "content": "ctx"}]
    assert data == json.loads(session.path.read_bytes()) | {"updated_at": data["updated_at"]}


def test_json_export_imports_back_as_a_new_session(state_dir):
    session = _session()
    body, _, _ = export_session(session.session_id, "json")
    row = session_admin.import_session(json.loads(body))
    assert row["session_id"] != session.session_id and row["message_count"] == 3


def test_markdown_export_is_a_readable_transcript(state_dir):
    session = _session()
    body, content_type, _ = export_session(session.session_id, "md")
    text = body.decode()
    assert content_type.startswith("text/markdown")
    assert text.startswith("# Plans")
    assert "## User · 2023-11-14 22:13 UTC" in text
    assert "Show me `code` and ```fences```" in text
    assert "**Tool call: search**" in text and '{"q": "x"}' in text
    assert "## Tool result (search)" in text


def test_markdown_fences_outgrow_backticks_inside_tool_output():
    text = to_markdown({"title": "t", "messages": [{"role": "tool", "content": "a ```` b"}]})
    assert "`````\na ```` b\n`````" in text


def test_html_export_is_standalone_and_inert(state_dir):
    session = _session()
    body, content_type, filename = export_session(session.session_id, "html")
    page = body.decode()
    assert content_type.startswith("text/html") and filename.endswith(".html")
    assert page.startswith("<!doctype html>")
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    assert ".highlight" in page  # Pygments token CSS is inline
    parser = _Tags()
    parser.feed(page)
    tags = [t for t, _ in parser.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags
    for _, attrs in parser.tags:
        assert not any(name.startswith("on") for name in attrs)
        assert not str(attrs.get("href", "")).startswith("javascript:")
    assert "&lt;img src=x" in page  # the hostile title is text
    assert "<code>code</code>" in page


def test_export_rejects_unknown_formats_and_missing_sessions(state_dir):
    session = _session()
    with pytest.raises(BadRequest):
        export_session(session.session_id, "pdf")
    with pytest.raises(NotFound):
        export_session("nosuchsession", "json")
