"""Session export (the JSON file payload, a Markdown transcript, an inert HTML page) and validated import."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from api.rules.errors import BadRequest, NotFound, PayloadTooLarge
from api.services import session_export, session_views
from api.services.session_export import export_session, import_session, to_markdown
from api.store import models
from api.store.models import Session
from talaria_testing import failed_saves
from talaria_testing.transcripts import message_row


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
    assert data["messages"] == session.messages and data["context_messages"] == [
        {"role": "user", "content": "ctx"}
    ]
    assert data == json.loads(session.path.read_bytes()) | {"updated_at": data["updated_at"]}


def test_json_export_imports_back_as_a_new_session(state_dir):
    session = _session()
    body, _, _ = export_session(session.session_id, "json")
    row = import_session(json.loads(body))
    assert row["session_id"] != session.session_id and row["message_count"] == 3


def test_markdown_export_is_a_readable_transcript(state_dir):
    session = _session()
    body, content_type, _ = export_session(session.session_id, "md")
    text = body.decode()
    assert content_type.startswith("text/markdown")
    assert text.startswith("# Plans")
    assert "## User · 2023-11-14 22:13 UTC" in text
    assert "Show me `code` and ```fences```" in text
    assert "**Tool call: search**\n\n- q: `x`" in text
    assert "## Tool result (search)" in text


def test_markdown_export_shows_tool_calls_and_results_readably_not_as_one_json_line():
    """A tool's output was dumped as the one JSON line the agent stored (its newlines as \\n)."""
    call = {
        "id": "c1",
        "function": {"name": "terminal", "arguments": '{"command": "ls -1 src", "timeout": 30}'},
    }
    result = '{"output": "app.py\\nutil.py", "exit_code": 0, "error": null}'
    text = to_markdown(
        {
            "title": "t",
            "messages": [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": "terminal", "content": result},
                {"role": "tool", "name": "todo", "content": '{"todos": [{"id": "1", "status": "done"}]}'},
                {"role": "tool", "name": "raw", "content": "plain words"},
            ],
        }
    )
    assert "**Tool call: terminal**\n\n- command: `ls -1 src`\n- timeout: `30`\n" in text
    assert "- output:\n\n```\napp.py\nutil.py\n```\n" in text
    assert "- exit_code: `0`\n- error: `null`\n" in text
    assert '- todos:\n\n```json\n[\n  {\n    "id": "1",' in text
    assert "```\nplain words\n```" in text
    assert "\\n" not in text


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


# ---------------------------------------------------------------------- import


def test_import_gets_a_new_id_and_the_default_workspace(state_dir, tmp_path):
    data = {
        "session_id": "../../etc/passwd",
        "title": "Imported",
        "workspace": "/etc",
        "created_workspace": "/root",
        "worktree_path": "/etc",
        "active_stream_id": "s1",
        "pending_user_message": "half",
        "messages": [
            message_row("user", "hi", 1.0),
            {**message_row("assistant", "yo", 2.0), "html": "<b>x</b>", "_idx": 1},
        ],
        "input_tokens": "lots",
        "pinned": "yes",
        "unknown_key": {"a": 1},
    }
    row = import_session(data)
    sid = row["session_id"]
    assert sid != data["session_id"] and models.is_safe_session_id(sid)
    stored = json.loads((state_dir / f"{sid}.json").read_bytes())
    assert stored["workspace"] != "/etc" and stored["created_workspace"] == stored["workspace"]
    assert (
        stored["worktree_path"] is None
        and stored["active_stream_id"] is None
        and stored["pending_user_message"] is None
    )
    assert stored["input_tokens"] == 0 and stored["pinned"] is False and "unknown_key" not in stored
    assert stored["messages"][1] == message_row("assistant", "yo", 2.0)
    assert [
        p.name for p in state_dir.iterdir() if p.name.endswith(".json") and not p.name.startswith("_")
    ] == [f"{sid}.json"]


@pytest.mark.parametrize(
    "data",
    [
        [],
        "x",
        {},
        {"messages": "no"},
        {"messages": [1]},
        {"messages": [{"content": "no role"}]},
        {"messages": [{"role": 5}]},
    ],
)
def test_import_rejects_invalid_files(state_dir, data):
    with pytest.raises(BadRequest):
        import_session(data)


def test_import_rejects_too_many_messages(state_dir, monkeypatch):
    monkeypatch.setattr(session_export, "IMPORT_MAX_MESSAGES", 3)
    with pytest.raises(PayloadTooLarge):
        import_session({"messages": [{"role": "user", "content": "x"}] * 4})


def test_import_accepts_a_saved_get_answer(state_dir):
    session = Session(title="round trip", messages=[message_row("user", f"m{i}", float(i)) for i in range(3)])
    session.save()
    answer = session_views.get_session_payload(session.session_id)
    row = import_session(json.loads(json.dumps(answer)))
    assert row["title"] == "round trip" and row["message_count"] == 3
    stored = json.loads((state_dir / f"{row['session_id']}.json").read_bytes())
    assert all("html" not in m and "_idx" not in m for m in stored["messages"])


@pytest.mark.parametrize("fault", sorted(failed_saves.FAULTS))
def test_an_import_whose_save_fails_leaves_no_session_behind(fault, tmp_path):
    with failed_saves.tmpfs_sessions(tmp_path) as (mnt, sessions):
        payload = {"session_id": "imp", "title": "Imported", "messages": [{"role": "user", "content": "hi"}]}
        with failed_saves.FAULTS[fault](mnt), pytest.raises(OSError):
            import_session(payload)
        assert not [
            p.name for p in sessions.iterdir() if p.name.endswith(".json") and p.name != "_index.json"
        ]
        assert all(s.title != "Imported" for s in models.store().sessions.values())
        assert all(row["title"] != "Imported" for row in models.all_sessions())
