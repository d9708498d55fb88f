"""Chatting in a real browser against the real server and hermes-agent, with the fake LLM answering."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import (
    DroppingProxy,
    goto_app,
    import_session,
    new_session,
    open_page,
    qa_history,
    screenshot,
    screenshots,
    send,
    transcript_state,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

STREAMED = "Streaming works: **bold** words arrive one by one, then `inline code` and the end."
TODO_ARGS = {"todos": [{"id": "1", "content": "write the browser tests", "status": "pending"}]}

# Records the rendered HTML of each live bubble as it leaves the page (the moment `done` re-renders),
# and the length of its visible text at every change while it streams.
WATCH_LIVE = """() => {
  window.__live = [];
  window.__liveLengths = [];
  new MutationObserver((records) => {
    const live = document.querySelector('.msg.live .live-text');
    if (live) window.__liveLengths.push(live.textContent.length);
    for (const r of records) for (const n of r.removedNodes) {
      if (n.nodeType === 1 && n.classList.contains('live') && !n.isConnected) {
        window.__live.push([...n.querySelectorAll('.live-text')].map((b) => b.innerHTML).join(''));
      }
    }
  }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
}"""


def test_an_answer_streams_token_by_token_then_renders_markdown(page, server, llm):
    llm.script(Reply(text=STREAMED, token_delay=0.06))
    sid = new_session(page)
    page.evaluate(WATCH_LIVE)
    turn = send(page, "Hello there, please stream")
    expect(page.locator(".msg-user").last).to_contain_text("Hello there, please stream")
    live = page.locator(".msg.live .live-text")
    expect(live).to_contain_text("Streaming")
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator("#send")).to_be_hidden()
    screenshot(page, "chat-streaming")
    wait_turn_done(page, turn)

    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".msg-body strong")).to_have_text("bold")
    expect(answer.locator(".msg-body code")).to_have_text("inline code")
    lengths = page.evaluate("window.__liveLengths")
    assert len(set(lengths)) >= 5, f"the answer did not arrive in pieces: {lengths}"
    # What was on screen at the end of the stream is exactly what the saved message shows.
    assert page.evaluate("window.__live") == [answer.locator(".msg-body").inner_html()]
    # After the first exchange the agent's title generator names the session (the fake LLM answers
    # "Title: About <first words>"); the header and the sidebar follow.
    expect(page.locator("#chat-title")).to_have_text("About Hello there, please stream")
    expect(page.locator(f'.session-row[data-sid="{sid}"] .session-title')).to_have_text(
        "About Hello there, please stream"
    )
    assert (
        server.get_json(f"/api/session?session_id={sid}")["session"]["title"]
        == "About Hello there, please stream"
    )
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]
    assert [m["role"] for m in saved["messages"]] == ["user", "assistant"]
    assert saved["messages"][1]["content"] == STREAMED
    screenshot(page, "chat-answer")


def test_tool_calls_and_reasoning_are_collapsible_cards(page, server, llm):
    llm.script(
        Reply(
            text="Let me plan.",
            reasoning="The user wants a plan; the todo tool fits.",
            tool_calls=[{"id": "call_t1", "name": "todo", "arguments": TODO_ARGS}],
        ),
        Reply(text="The plan is written."),
    )
    new_session(page)
    turn = send(page, "Plan the work")
    wait_turn_done(page, turn)
    card = page.locator(".tool-card", has_text="todo")
    expect(card).to_have_count(1)
    expect(card).not_to_have_attribute("open", "")
    expect(card.locator(".tool-args")).to_be_hidden()
    card.locator(":scope > summary").click()
    expect(card.locator(".todo-item")).to_have_text(["☐write the browser tests"])
    card.locator(".tool-raw > summary").click()
    expect(card.locator(".tool-args")).to_contain_text("write the browser tests")
    expect(card.locator(".tool-result")).not_to_be_empty()
    expect(card.locator(".tool-state")).to_have_text("done")
    expect(page.locator(".msg-assistant").last).to_contain_text("The plan is written.")
    reasoning = page.locator(".reasoning")
    expect(reasoning).to_have_count(1)
    expect(reasoning.locator(".reasoning-body")).to_be_hidden()
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning-body")).to_have_text("The user wants a plan; the todo tool fits.")
    screenshots(page, "chat-tool-card")


def test_compress_shows_the_marker_and_a_reload_shows_the_same_state(page, server, llm):
    session = import_session(server, "Long talk to compress", qa_history(6))
    goto_app(page, f"/#/s/{session['session_id']}")
    expect(page.locator(".msg")).to_have_count(12)
    llm.script(Reply(text="Seventh answer, streamed."))
    turn = send(page, "One more question")
    wait_turn_done(page, turn)

    box = page.locator("#composer-input")
    box.fill("/comp")
    expect(page.locator("#slash-list [role=option]")).to_have_count(1)
    box.press("Tab")
    expect(box).to_have_value("/compress ")
    box.type("topic 5")
    box.press("Enter")
    marker = page.locator(".compress-marker")
    expect(marker).to_have_count(1, timeout=30000)
    # Long answers summarized into a short summary: the marker tells how much room was made.
    expect(marker.locator("summary")).to_have_text(
        re.compile(r"^earlier turns compressed here — about [\d,]+ tokens saved$")
    )
    saved = server.get_json(f"/api/session?session_id={session['session_id']}&msg_limit=1")["session"]
    assert saved["compression_anchor_visible_idx"] is not None
    expect(marker.locator(".compress-marker-summary")).to_be_hidden()
    marker.locator("summary").click()
    expect(marker.locator(".compress-marker-summary")).to_be_visible()
    expect(marker.locator(".compress-marker-summary")).not_to_be_empty()
    expect(page.locator("#context-meter")).to_be_visible()
    # The marker sits after the anchor message; every message is still there.
    expect(page.locator(".msg")).to_have_count(14)
    screenshot(page, "compression-marker")

    marker.locator("summary").click()  # collapse again so both views compare equal
    before = transcript_state(page)
    title_before = page.locator("#chat-title").inner_text()
    meter_before = page.locator("#context-meter-label").inner_text()
    page.reload()
    expect(page.locator(".compress-marker")).to_have_count(1)
    expect(page.locator(".msg")).to_have_count(14)
    assert transcript_state(page) == before
    assert page.locator("#chat-title").inner_text() == title_before
    assert page.locator("#context-meter-label").inner_text() == meter_before

    page.locator("#composer-input").fill("/uncompress")
    page.locator("#composer-input").press("Enter")
    expect(page.locator(".compress-marker")).to_have_count(0)
    expect(page.locator(".msg")).to_have_count(14)


def test_compress_reports_a_context_of_the_size_the_meter_shows(page, server, llm):
    """/compress said ~67 tokens while the meter beside it said 1.6k: it counted the messages alone."""
    new_session(page)
    llm.script(Reply(text="First answer."), Reply(text="Second answer."))
    wait_turn_done(page, send(page, "First question"))
    wait_turn_done(page, send(page, "Second question"))
    expect(page.locator("#context-meter")).to_be_visible()
    meter = int(page.locator("#context-meter").get_attribute("title").split()[1].replace(",", ""))
    page.locator("#composer-input").fill("/compress")
    page.locator("#composer-input").press("Enter")
    report = page.locator(".toast", has_text="tokens")
    expect(report).to_be_visible(timeout=30000)
    before = int(re.search(r"~([\d,]+)", report.inner_text()).group(1).replace(",", ""))
    assert 0.5 * meter <= before <= 2 * meter, (report.inner_text(), meter)
    screenshots(page, "compress-report-and-meter")


def test_stop_ends_the_answer_mid_stream_and_keeps_what_arrived(page, server, llm):
    words = " ".join(f"word{i}" for i in range(40))
    llm.script(Reply(text=words, hang_after=4), Reply(text="After the stop, all is well."))
    sid = new_session(page)
    turn = send(page, "Say many words")
    expect(page.locator(".msg.live .live-text")).to_contain_text("word2")
    assert llm.wait_for_hang()
    page.click("#stop")
    wait_turn_done(page, turn)
    expect(page.locator("#send")).to_be_visible()
    answer = page.locator(".msg-assistant").last
    expect(answer).to_contain_text("word0")
    expect(answer).not_to_contain_text("word39")
    screenshot(page, "chat-stopped")
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]
    assert saved["active_stream_id"] is None
    assert "word39" not in str(saved["messages"])

    turn = send(page, "Still there?")
    wait_turn_done(page, turn)
    expect(page.locator(".msg-assistant").last).to_contain_text("After the stop, all is well.")


def test_a_second_tab_opened_mid_answer_shows_it_so_far_and_follows_it(page, browser, server, llm):
    words = " ".join(f"word{i}" for i in range(12))
    llm.script(Reply(text=words, hang_after=6))
    sid = new_session(page)
    turn = send(page, "Tell me twelve words")
    expect(page.locator(".msg.live .live-text")).to_contain_text("word5")
    assert llm.wait_for_hang()
    with open_page(browser, server.base_url) as other:
        goto_app(other, f"/#/s/{sid}")
        # The journal replays from the first event; the checkpointed partial row is not shown twice.
        expect(other.locator(".msg.live .live-text")).to_have_text(
            " ".join(f"word{i}" for i in range(6)) + " "
        )
        expect(other.locator(".msg-user")).to_have_count(1)
        expect(other.locator(".msg-assistant:not(.live)")).to_have_count(0)
        expect(other.locator("#stop")).to_be_visible()
        screenshot(other, "second-tab-mid-stream")
        other_turn = 0
        llm.release()
        wait_turn_done(page, turn)
        wait_turn_done(other, other_turn)
        expect(other.locator(".msg-assistant .msg-body")).to_have_text(words)
        assert transcript_state(other) == transcript_state(page)


def test_escape_stops_a_streaming_answer(page, server, llm):
    llm.script(Reply(text="alpha beta gamma delta epsilon zeta eta theta", hang_after=2))
    new_session(page)
    turn = send(page, "Greek letters please")
    expect(page.locator(".msg.live .live-text")).to_contain_text("alpha")
    assert llm.wait_for_hang()
    page.keyboard.press("Escape")
    wait_turn_done(page, turn)
    expect(page.locator(".msg-assistant").last).not_to_contain_text("theta")


def test_a_dropped_stream_resumes_from_the_last_event_without_loss_or_repeat(browser, server, llm):
    text = " ".join(f"piece{i}" for i in range(30))
    llm.script(Reply(text=text, token_delay=0.03))
    proxy = DroppingProxy(server.port, cut_after=6)
    try:
        with open_page(browser, proxy.url) as page:
            new_session(page)
            page.evaluate(WATCH_LIVE)
            turn = send(page, "Count the pieces")
            wait_turn_done(page, turn)
            body = page.locator(".msg-assistant").last.locator(".msg-body")
            expect(body).to_have_text(text)
            assert page.evaluate("window.__live") == [body.inner_html()]
    finally:
        proxy.close()
    first, second = proxy.streams[:2]
    assert first["first_id"] == 1
    # The browser reconnected with the id of the last event it had, and the server went on from there.
    assert second["headers"].get("last-event-id") == "6"
    assert second["first_id"] == 7


def test_edit_the_last_message_and_resend_replaces_the_turn(page, server, llm):
    llm.script(Reply(text="First answer."), Reply(text="Answer to the edited question."))
    sid = new_session(page)
    turn = send(page, "Original question")
    wait_turn_done(page, turn)
    page.locator(".msg-user").last.get_by_role("button", name="Edit your last message and resend").click()
    box = page.locator("#composer-input")
    expect(box).to_have_value("Original question")
    expect(page.locator("#edit-note")).to_be_visible()
    turn = send(page, "Edited question")
    wait_turn_done(page, turn)
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.locator(".msg-user")).to_have_text(re.compile("Edited question"))
    expect(page.locator(".msg-assistant")).to_contain_text("Answer to the edited question.")
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]
    assert [m["content"] for m in saved["messages"]] == ["Edited question", "Answer to the edited question."]


def test_slash_commands_complete_and_run(page, server, llm):
    llm.script(Reply(text="Answer one."), Reply(text="Answer two."), Reply(text="Answer two again."))
    sid = new_session(page)
    box = page.locator("#composer-input")
    box.fill("/")
    # The page's six commands, then the agent's that the page runs (no skills are installed here).
    names = ["compress", "uncompress", "undo", "retry", "clear", "title", "new", "model", "help", "usage"]
    names += ["reasoning", "goal"]
    names += ["reload-mcp", "reload-skills"]
    expect(page.locator("#slash-list [role=option] .slash-name")).to_have_text(
        [re.compile(rf"^/{name}\b") for name in names]
    )
    box.fill("/u")
    options = page.locator("#slash-list [role=option]")
    expect(options).to_have_count(3)  # /uncompress, /undo, /usage
    box.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    screenshot(page, "slash-completion")
    box.press("Escape")
    expect(page.locator("#slash-list")).to_be_hidden()

    box.fill("/title Commands at work")
    box.press("Enter")
    expect(page.locator("#chat-title")).to_have_text("Commands at work")

    turn = send(page, "First")
    wait_turn_done(page, turn)
    turn = send(page, "Second")
    wait_turn_done(page, turn)
    expect(page.locator(".msg")).to_have_count(4)

    box.fill("/undo")
    box.press("Enter")
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.locator(".toast", has_text="Removed 2 messages")).to_be_visible()

    turn = send(page, "/retry")
    wait_turn_done(page, turn)
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.locator(".msg-user")).to_contain_text("First")
    expect(page.locator(".msg-assistant")).to_contain_text("Answer two again.")

    # /clear asks first, empties the view at once, and can be undone until its window closes.
    box.fill("/clear")
    box.press("Enter")
    page.locator("dialog.modal").get_by_role("button", name="Cancel").click()
    expect(page.locator(".msg")).to_have_count(2)
    box.fill("/clear")
    box.press("Enter")
    page.locator("dialog.modal").get_by_role("button", name="Clear").click()
    expect(page.locator(".msg")).to_have_count(0)
    page.locator(".toast", has_text="Conversation cleared.").get_by_role("button", name="Undo").click()
    expect(page.locator(".msg")).to_have_count(2)
    assert len(server.get_json(f"/api/session?session_id={sid}")["session"]["messages"]) == 2
    box.fill("/clear")
    box.press("Enter")
    page.locator("dialog.modal").get_by_role("button", name="Clear").click()
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator("#empty-state")).to_be_visible()
    deadline = time.monotonic() + 20
    while (
        server.get_json(f"/api/session?session_id={sid}")["session"]["messages"]
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]
    assert saved["messages"] == [] and saved["title"] in ("Commands at work", "Untitled")
    expect(page.locator(".msg")).to_have_count(0)


def test_export_links_download_the_session(page, server):
    session = import_session(server, "Export me", qa_history(1))
    goto_app(page, f"/#/s/{session['session_id']}")
    expect(page.locator(".msg")).to_have_count(2)
    for link, suffix in (("JSON", ".json"), ("Markdown", ".md"), ("HTML", ".html")):
        page.click("#export-menu summary")
        with page.expect_download() as info:
            page.get_by_role("menuitem", name=link).click()
        download = info.value
        assert download.suggested_filename.endswith(suffix)
        assert "Topic 0" in Path(download.path()).read_text(encoding="utf-8")
        expect(page.locator("#export-menu")).not_to_have_attribute("open", "")
