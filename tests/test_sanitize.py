"""The model-facing projection: which stored rows a provider is sent."""

from __future__ import annotations

from api.rules.sanitize import sanitize_messages_for_api

MARKER = "[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns, summarized"


def _roles_and_text(rows: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in rows]


def test_a_failed_turns_user_message_is_not_sent_so_the_next_one_stays_alone():
    rows = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "lost words"},
        {"role": "assistant", "content": "⚠ HTTP 401", "_error": True},
        {"role": "user", "content": "fresh words"},
        {"role": "assistant", "content": "answer"},
    ]
    assert _roles_and_text(sanitize_messages_for_api(rows)) == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "fresh words"),
        ("assistant", "answer"),
    ]


def test_a_trailing_unanswered_user_message_is_left_out_of_the_history():
    rows = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "stopped before any output"},
        {"role": "assistant", "content": "", "_partial": True},
        {"role": "assistant", "content": "⚠ interrupted", "_error": True, "_interrupted": True},
    ]
    assert _roles_and_text(sanitize_messages_for_api(rows)) == [("user", "hi"), ("assistant", "hello")]


def test_a_turn_that_failed_after_a_tool_call_keeps_the_call_and_its_result():
    call = {"id": "c1", "type": "function", "function": {"name": "todo", "arguments": "{}"}}
    rows = [
        {"role": "user", "content": "plan"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "⚠ HTTP 500", "_error": True},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "done"},
    ]
    out = sanitize_messages_for_api(rows)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user", "assistant"]
    assert out[1]["tool_calls"] == [call]


def test_a_compaction_summary_in_the_user_role_is_kept_before_the_next_user_row():
    rows = [{"role": "user", "content": MARKER}, {"role": "user", "content": "go on"}]
    assert _roles_and_text(sanitize_messages_for_api(rows)) == [("user", MARKER)]


def test_an_answered_user_row_is_kept_whatever_follows():
    rows = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "partial", "_partial": True, "_cancelled": True},
    ]
    assert _roles_and_text(sanitize_messages_for_api(rows)) == [("user", "q"), ("assistant", "partial")]


def test_lone_surrogates_become_the_replacement_character_and_clean_values_are_returned_as_they_are():
    from api.rules.sanitize import scrub_surrogates

    clean = {"role": "user", "content": ["ok", {"text": "fine ✓ 𝄞"}]}
    assert scrub_surrogates(clean) is clean
    dirty = {"content": "bad \ud800 end", "parts": [{"text": "\udfff"}], "key\udc00": 1}
    assert scrub_surrogates(dirty) == {
        "content": "bad \ufffd end",
        "parts": [{"text": "\ufffd"}],
        "key\ufffd": 1,
    }
    assert dirty["content"] == "bad \ud800 end"  # the input is not changed
