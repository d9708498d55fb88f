"""The conversation while it streams: live Markdown, and reading without being pulled to the end."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import Reply

from .helpers import (
    goto_app,
    import_session,
    new_session,
    open_page,
    qa_history,
    screenshots,
    send,
    wait_turn_done,
)

pytestmark = pytest.mark.e2e

RICH = (
    "# Plan\n\nSome **bold** words and a table:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\ndef answer():\n    return 42\n```\n\nThat is all."
)

# Notes, per change of the live bubble: was a code block in it highlighted, and its HTML at removal.
WATCH_LIVE = """() => {
  window.__liveHighlighted = false;
  window.__liveFinal = null;
  new MutationObserver((records) => {
    const live = document.querySelector('.msg.live');
    if (live && live.querySelector('.live-text pre code span')) window.__liveHighlighted = true;
    for (const r of records) for (const n of r.removedNodes) {
      if (n.nodeType === 1 && n.classList.contains('live')) {
        window.__liveFinal = [...n.querySelectorAll('.live-text')].map((b) => b.innerHTML).join('');
      }
    }
  }).observe(document.getElementById('messages'), {childList: true, subtree: true});
}"""


# The first transcript row in view and where its top is on screen.
FIRST_VISIBLE = """() => {
  const top = document.getElementById('transcript').getBoundingClientRect().top;
  const row = [...document.querySelectorAll('#messages .msg[data-idx]')]
    .find((n) => n.getBoundingClientRect().bottom > top);
  return [row.dataset.idx, Math.round(row.getBoundingClientRect().top - top)];
}"""


# Where a row's top is, relative to the transcript's top (the header above may change height).
ROW_TOP = """(idx) => Math.round(
  document.querySelector(`#messages .msg[data-idx="${idx}"]`).getBoundingClientRect().top
  - document.getElementById('transcript').getBoundingClientRect().top)"""


def test_markdown_renders_while_the_answer_streams_and_code_highlights_once_closed(page, server, llm):
    # The stream pauses inside the open code block: 29 tokens reach "return 42\n".
    hang_at = next(i for i, tok in enumerate(_tokens(RICH)) if "42" in tok) + 1
    llm.script(Reply(text=RICH, hang_after=hang_at, token_delay=0.02))
    new_session(page)
    page.evaluate(WATCH_LIVE)
    turn = send(page, "Give me a rich answer")
    live = page.locator(".msg.live .live-text")
    expect(live.locator("h1")).to_have_text("Plan")
    expect(live.locator("strong")).to_have_text("bold")
    expect(live.locator("table td").first).to_have_text("1")
    expect(live.locator("pre code")).to_contain_text("return 42")
    assert llm.wait_for_hang()
    # The block has not closed: shown as plain text, not yet highlighted, no raw Markdown anywhere.
    expect(live.locator("pre code span")).to_have_count(0)
    assert "**" not in live.first.text_content()
    screenshots(page, "live-markdown-streaming")
    llm.release()
    wait_turn_done(page, turn)
    body = page.locator(".msg-assistant .msg-body").last
    expect(body.locator("pre code span").first).to_be_attached()
    assert page.evaluate("window.__liveHighlighted"), "the closed code block was not highlighted live"
    # No re-layout at the end: the saved message is the very HTML that was on screen.
    assert page.evaluate("window.__liveFinal") == body.inner_html()
    screenshots(page, "live-markdown-done")


def _tokens(text: str) -> list[str]:
    from talaria_testing.fake_llm import split_tokens

    return split_tokens(text)


def test_a_reader_who_scrolls_up_stays_put_and_can_jump_to_latest(page, server, llm):
    session = import_session(server, "Long read", qa_history(12, answer_repeat=20))
    goto_app(page, f"/#/s/{session['session_id']}")
    expect(page.locator(".msg")).to_have_count(24)
    words = " ".join(f"w{i}" for i in range(160))
    llm.script(Reply(text=words, token_delay=0.03))
    turn = send(page, "Stream a long answer")
    expect(page.locator(".msg.live .live-text")).to_contain_text("w3")
    transcript = page.locator("#transcript")
    # At the bottom the view follows the new text.
    expect(page.locator(".msg.live .live-text")).to_contain_text("w20")
    assert transcript.evaluate("t => t.scrollHeight - t.scrollTop - t.clientHeight") < 40
    # Scroll up (as a wheel would): the view stays where the reader put it.
    page.mouse.move(640, 300)
    page.mouse.wheel(0, -1500)
    page.wait_for_function(
        "() => { const t = document.getElementById('transcript'); return t.scrollHeight - t.scrollTop - t.clientHeight > 1000; }"
    )
    jump = page.locator(".jump-latest")
    expect(jump).to_be_visible()
    # Let the wheel's smooth scroll come to rest before noting where the reader is.
    page.wait_for_function(
        """() => new Promise((resolve) => {
            const t = document.getElementById('transcript');
            const first = t.scrollTop;
            setTimeout(() => resolve(t.scrollTop === first), 250);
        })"""
    )
    held = page.evaluate(FIRST_VISIBLE)
    expect(page.locator(".msg.live .live-text")).to_contain_text("w60")
    top = page.evaluate(ROW_TOP, held[0])
    assert abs(top - held[1]) <= 2, (top, held)
    screenshots(page, "jump-to-latest")
    wait_turn_done(page, turn)
    # The end of the turn re-renders the transcript without moving what the reader looks at.
    top = page.evaluate(ROW_TOP, held[0])
    assert abs(top - held[1]) <= 2, (top, held)
    jump.click()
    page.wait_for_function(
        "() => { const t = document.getElementById('transcript');"
        " return t.scrollHeight - t.scrollTop - t.clientHeight < 40; }"
    )
    expect(jump).to_be_hidden()
    expect(page.locator(".msg-assistant").last).to_contain_text("w159")


# ---------------------------------------------------------------------- acting on messages

CODE_ANSWER = "Here:\n\n```python\nprint('hi')\n```\n\nDone."


def _two_turns(page, llm, first: str = "First answer.", second: str = "Second answer.") -> str:
    llm.script(Reply(text=first), Reply(text=second))
    sid = new_session(page)
    wait_turn_done(page, send(page, "First question"))
    wait_turn_done(page, send(page, "Second question"))
    expect(page.locator(".msg")).to_have_count(4)
    return sid


def test_copy_a_code_block_and_a_whole_message_as_markdown(page, server, llm):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    llm.script(Reply(text=CODE_ANSWER))
    new_session(page)
    wait_turn_done(page, send(page, "Show code"))
    answer = page.locator(".msg-assistant").last
    answer.locator(".copy-code").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print('hi')\n"
    answer.hover()
    answer.get_by_role("button", name="Copy this message as Markdown").click()
    assert page.evaluate("navigator.clipboard.readText()") == CODE_ANSWER
    screenshots(page, "message-actions")


def test_regenerate_replaces_the_last_answer(page, server, llm):
    sid = _two_turns(page, llm)
    llm.script(Reply(text="A better second answer."))
    turn = int(page.locator("#transcript").get_attribute("data-turns-done") or 0)
    page.locator(".msg-assistant").last.get_by_role("button", name="Regenerate the last answer").click()
    wait_turn_done(page, turn)
    expect(page.locator(".msg")).to_have_count(4)
    expect(page.locator(".msg-assistant").last).to_contain_text("A better second answer.")
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]["messages"]
    assert [m["content"] for m in saved][-1] == "A better second answer."
    # Only the last answer offers it.
    expect(page.get_by_role("button", name="Regenerate the last answer")).to_have_count(1)


def test_editing_an_earlier_message_can_replace_the_rest(page, server, llm):
    sid = _two_turns(page, llm)
    page.locator(".msg-user").first.get_by_role("button", name="Edit this message").click()
    expect(page.locator("#edit-note")).to_contain_text("Editing an earlier message")
    box = page.locator("#composer-input")
    expect(box).to_have_value("First question")
    llm.script(Reply(text="Answer to the new first question."))
    turn = send(page, "New first question")
    dialog = page.locator("dialog.modal")
    expect(dialog).to_be_visible()
    screenshots(page, "edit-replace-or-branch")
    dialog.get_by_role("button", name="New version").click()
    wait_turn_done(page, turn)
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]["messages"]
    assert [m["content"] for m in saved] == ["New first question", "Answer to the new first question."]
    expect(page.locator(".msg")).to_have_count(2)


def test_editing_an_earlier_message_can_branch_and_both_sessions_show_the_link(page, server, llm):
    parent = _two_turns(page, llm)
    page.locator(".msg-user").nth(1).get_by_role("button", name="Edit your last message and resend").click()
    expect(page.locator("#edit-note")).to_contain_text("Editing your last message")
    page.locator(".msg-user").first.get_by_role("button", name="Edit this message").click()
    llm.script(Reply(text="Answer in the branch."))
    turn = send(page, "A different first question")
    page.locator("dialog.modal").get_by_role("button", name="Branch").click()
    wait_turn_done(page, turn)
    child = page.url.rsplit("/", 1)[1]
    assert child != parent
    expect(page.locator("#lineage")).to_contain_text("Branch of")
    expect(page.locator(f'.session-row[data-sid="{child}"] .branch-mark')).to_be_visible()
    saved = server.get_json(f"/api/session?session_id={child}")["session"]
    assert saved["parent_session_id"] == parent
    assert [m["content"] for m in saved["messages"]] == [
        "A different first question",
        "Answer in the branch.",
    ]
    assert len(server.get_json(f"/api/session?session_id={parent}")["session"]["messages"]) == 4
    screenshots(page, "branch-child")
    page.locator("#lineage a").click()
    page.wait_for_url(re.compile(f"#/s/{parent}$"))
    expect(page.locator("#lineage")).to_contain_text("Branch:")
    expect(page.locator(f'#lineage a[href="#/s/{child}"]')).to_be_visible()


def test_branch_from_a_message_keeps_the_history_up_to_it(page, server, llm):
    parent = _two_turns(page, llm)
    page.locator(".msg-assistant").first.get_by_role(
        "button", name="Branch a new session from this message"
    ).click()
    page.wait_for_url(re.compile(r"#/s/(?!" + parent + r")[A-Za-z0-9_-]+$"))
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.locator("#chat-title")).to_have_text(re.compile(r"\(branch\)$"))
    # The branch is a normal session: a reload shows it, and it takes new turns.
    page.reload()
    expect(page.locator(".msg")).to_have_count(2)
    llm.script(Reply(text="Continuing the branch."))
    wait_turn_done(page, send(page, "Go on"))
    expect(page.locator(".msg")).to_have_count(4)


# ---------------------------------------------------------------------- rich answers

RICH_ANSWER = (
    "Euler: $e^{i\\pi} + 1 = 0$\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n"
    "- [x] derive\n- [ ] check\n\nDocs at https://example.com/docs\n\n"
    "![the chart](out/chart.png)\n\n![escape](../secret.png)"
)
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db40000000049454e44ae426082"
)


def test_math_task_lists_links_and_workspace_images_render(page, server, llm):
    workspace = server.root / "rich-ws" / "ws"
    (workspace / "out").mkdir(parents=True)
    (workspace / "out" / "chart.png").write_bytes(PNG_1PX)
    (workspace.parent / "secret.png").write_bytes(PNG_1PX)
    page.guard.allowed_statuses.add(403)  # the escaping image is refused, on purpose
    sid = server.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]
    goto_app(page, f"/#/s/{sid}")
    llm.script(Reply(text=RICH_ANSWER))
    wait_turn_done(page, send(page, "Show me everything"))
    body = page.locator(".msg-assistant .msg-body").last
    expect(body.locator("math")).to_have_count(2)
    expect(body.locator("math[display=block] mfrac")).to_have_count(1)
    expect(body.locator("input[type=checkbox]")).to_have_count(2)
    expect(body.locator("input[type=checkbox]").first).to_be_checked()
    expect(body.locator('a[href="https://example.com/docs"]')).to_be_visible()
    chart = body.locator('img[alt="the chart"]')
    expect(chart).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 1", arg=chart.element_handle())
    # The image that points out of the workspace is refused by the server and shown as a note.
    expect(body.locator(".media-missing")).to_have_text("[image not available: escape]")
    status = page.evaluate(
        "(sid) => fetch(`/api/media?session_id=${sid}&path=${encodeURIComponent('../secret.png')}`).then((r) => r.status)",
        sid,
    )
    assert status == 403
    screenshots(page, "rich-answer")


TOOL_HISTORY = [
    {"role": "user", "content": "Do the chores"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "ls -1 src"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {
                    "name": "patch",
                    "arguments": '{"mode": "replace", "path": "src/app.py", "old_string": "x = 1", "new_string": "x = 2"}',
                },
            },
            {
                "id": "c3",
                "type": "function",
                "function": {
                    "name": "todo",
                    "arguments": '{"todos": [{"id": "1", "content": "write tests", "status": "completed"},'
                    ' {"id": "2", "content": "ship it", "status": "pending"}]}',
                },
            },
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "terminal",
        "content": '{"output": "app.py\\nutil.py", "exit_code": 0}',
    },
    {
        "role": "tool",
        "tool_call_id": "c2",
        "name": "patch",
        "content": '{"success": true, "diff": "--- a/src/app.py\\n+++ b/src/app.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2"}',
    },
    {
        "role": "tool",
        "tool_call_id": "c3",
        "name": "todo",
        "content": '{"todos": [{"id": "1", "content": "write tests", "status": "completed"}, {"id": "2", "content": "ship it", "status": "pending"}]}',
    },
    {"role": "assistant", "content": "All done."},
]


def test_tool_cards_show_a_console_a_diff_and_a_checklist_with_raw_json_behind_a_toggle(page, server):
    session = import_session(server, "Chores", TOOL_HISTORY)
    goto_app(page, f"/#/s/{session['session_id']}")
    terminal = page.locator('.tool-card[data-tool-name="terminal"]')
    terminal.locator(":scope > summary").click()
    expect(terminal.locator(".console-command")).to_have_text("$ ls -1 src")
    expect(terminal.locator(".console-output")).to_have_text("app.py\nutil.py")
    expect(terminal.locator(".console-exit")).to_have_text("exit 0")
    expect(terminal.locator(".tool-args")).to_be_hidden()
    terminal.locator(".tool-raw > summary").click()
    expect(terminal.locator(".tool-args")).to_contain_text('"command": "ls -1 src"')
    patch = page.locator('.tool-card[data-tool-name="patch"]')
    patch.locator(":scope > summary").click()
    expect(patch.locator(".diff-path")).to_have_text("src/app.py")
    expect(patch.locator(".diff-add")).to_have_text("+x = 2\n")
    expect(patch.locator(".diff-del")).to_have_text("-x = 1\n")
    todo = page.locator('.tool-card[data-tool-name="todo"]')
    todo.locator(":scope > summary").click()
    expect(todo.locator(".todo-item")).to_have_count(2)
    expect(todo.locator(".todo-completed .todo-text")).to_have_text("write tests")
    expect(todo.locator(".todo-pending .todo-text")).to_have_text("ship it")
    screenshots(page, "tool-cards")


CLARIFY_HISTORY = [
    {"role": "user", "content": "Paint the shed"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "q1",
                "type": "function",
                "function": {
                    "name": "clarify",
                    "arguments": '{"question": "Which colour?", "choices": ["red", "blue"]}',
                },
            },
            {
                "id": "t1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "paint --colour blue shed.svg"}'},
            },
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "q1",
        "name": "clarify",
        "content": '{"question": "Which colour?", "choices_offered": ["red", "blue"], "user_response": "blue"}',
    },
    {
        "role": "tool",
        "tool_call_id": "t1",
        "name": "terminal",
        "content": '{"output": "done", "exit_code": 0}',
    },
    {"role": "assistant", "content": "Blue it is."},
]


def test_a_collapsed_card_says_what_it_ran_and_a_clarify_shows_question_choices_and_answer(page, server):
    """A collapsed card said "⚙ terminal done" without its command, and a clarify question and its answer
    survived only in the card's raw JSON."""
    session = import_session(server, "Shed", CLARIFY_HISTORY)
    goto_app(page, f"/#/s/{session['session_id']}")
    terminal = page.locator('.tool-card[data-tool-name="terminal"]')
    expect(terminal).not_to_have_attribute("open", "")
    expect(terminal.locator(":scope > summary .tool-brief")).to_have_text("paint --colour blue shed.svg")
    expect(terminal.locator(":scope > summary .tool-brief")).to_be_visible()
    clarify = page.locator('.tool-card[data-tool-name="clarify"]')
    expect(clarify.locator(":scope > summary .tool-brief")).to_have_text("Which colour?")
    clarify.locator(":scope > summary").click()
    expect(clarify.locator(".clarify-question")).to_have_text("Which colour?")
    expect(clarify.locator(".clarify-choice")).to_have_text(["red", "✓ blue"])
    expect(clarify.locator(".clarify-answer")).to_have_text("Answer: blue")
    expect(clarify.locator(".tool-args")).to_be_hidden()
    terminal.locator(":scope > summary").click()
    screenshots(page, "tool-card-brief-and-clarify")


# ---------------------------------------------------------------------- around the conversation


def test_question_mark_lists_the_shortcuts(page, server):
    goto_app(page)
    page.locator("body").press("?")
    dialog = page.locator("dialog.modal")
    expect(dialog).to_contain_text("Keyboard shortcuts")
    expect(dialog.locator("kbd", has_text="Alt + Shift + N")).to_be_visible()
    screenshots(page, "shortcuts")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    # Typed in the message box, "?" is just a character.
    page.locator("#composer-input").press("?")
    expect(page.locator("#composer-input")).to_have_value("?")
    expect(dialog).to_have_count(0)


def test_toasts_stack_at_most_three_and_never_cover_the_composer(page, server):
    goto_app(page)
    page.evaluate(
        "import('/static/js/toast.js').then((m) => { for (let i = 0; i < 5; i++) m.toast(`Notice ${i}`); })"
    )
    expect(page.locator(".toast")).to_have_count(3)
    expect(page.locator(".toast").last).to_have_text(re.compile("Notice 4"))
    for viewport in ({"width": 1280, "height": 800}, {"width": 390, "height": 844}):
        page.set_viewport_size(viewport)
        composer = page.locator("#composer").bounding_box()
        for box in [t.bounding_box() for t in page.locator(".toast").all()]:
            assert box["y"] + box["height"] <= composer["y"], (viewport, box, composer)
    page.set_viewport_size({"width": 1280, "height": 800})
    screenshots(page, "toasts")


def test_empty_untitled_sessions_stay_out_of_the_list(page, server):
    kept = import_session(server, "Has messages", qa_history(1, answer_repeat=1))
    first = new_session(page)
    expect(page.locator(f'.session-row[data-sid="{first}"]')).to_be_visible()  # the open one shows
    page.click("#new-session")
    page.wait_for_url(re.compile(r"#/s/(?!" + first + r")[A-Za-z0-9_-]+$"))
    second = page.url.rsplit("/", 1)[1]
    expect(page.locator(f'.session-row[data-sid="{first}"]')).to_have_count(0)
    page.locator(f'.session-row[data-sid="{kept["session_id"]}"] .session-open').click()
    expect(page.locator(f'.session-row[data-sid="{second}"]')).to_have_count(0)
    expect(page.locator(f'.session-row[data-sid="{kept["session_id"]}"]')).to_be_visible()
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    expect(page.locator(f'.session-row[data-sid="{kept["session_id"]}"]')).to_be_visible()
    expect(
        page.locator(f'.session-row[data-sid="{first}"], .session-row[data-sid="{second}"]')
    ).to_have_count(0)


# ---------------------------------------------------------------------- attachments

PASTE_AND_DROP = """([kind, name, text]) => {
  const data = new DataTransfer();
  data.items.add(new File([text], name, { type: 'text/plain' }));
  if (kind === 'paste') {
    document.getElementById('composer-input').dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true }));
  } else {
    const main = document.querySelector('.main');
    main.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
    main.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
  }
}"""


def png(width: int, height: int) -> bytes:
    """A valid RGB PNG of one teal colour."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x2f\x6f\x6a" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_attach_by_button_paste_and_drop_then_send(page, server, llm):
    workspace = server.root / "attach-ws"
    workspace.mkdir()
    sid = server.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]
    goto_app(page, f"/#/s/{sid}")
    page.locator(".composer input[type=file]").set_input_files(
        [
            {"name": "../../pixel.png", "mimeType": "image/png", "buffer": png(96, 64)},
            {"name": "data.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"},
        ]
    )
    page.evaluate(PASTE_AND_DROP, ["paste", "pasted.txt", "from the clipboard"])
    page.evaluate(PASTE_AND_DROP, ["drop", "dropped.md", "# dropped"])
    chips = page.locator(".attach-tray .attach-chip:not(.pending)")
    expect(chips).to_have_count(4)
    expect(chips).to_have_text(["pixel.png×", "data.csv×", "pasted.txt×", "dropped.md×"])
    screenshots(page, "attachments-tray")
    llm.script(Reply(text="I see a pixel and three files."))
    wait_turn_done(page, send(page, "Look at these"))
    expect(page.locator(".attach-tray")).to_be_hidden()
    user = page.locator(".msg-user").last
    image = user.locator("img.attach-image")
    expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 96", arg=image.element_handle())
    expect(user.locator(".msg-body")).to_have_text("Look at these")
    expect(user.locator(".attach-file")).to_have_text(["data.csv", "pasted.txt", "dropped.md"])
    # Stored under safe names inside the workspace; the agent was told each path.
    assert sorted(p.name for p in (workspace / "uploads").iterdir()) == [
        "data.csv",
        "dropped.md",
        "pasted.txt",
        "pixel.png",
    ]
    asked = llm.chat_requests()[-1]["body"]["messages"]
    text = next(m["content"] for m in reversed(asked) if m["role"] == "user")
    assert "[Attached image: uploads/pixel.png (in the workspace)]" in str(text)
    assert "[Attached file: uploads/data.csv (in the workspace)]" in str(text)
    saved = server.get_json(f"/api/session?session_id={sid}")["session"]["messages"][0]
    assert [a["path"] for a in saved["attachments"]] == [
        "uploads/pixel.png",
        "uploads/data.csv",
        "uploads/pasted.txt",
        "uploads/dropped.md",
    ]
    screenshots(page, "attachments-sent")


def test_a_wrong_type_or_a_fake_image_is_refused_with_a_clear_error(page, server):
    workspace = server.root / "attach-bad"
    workspace.mkdir()
    sid = server.post_json("/api/session/new", {"workspace": str(workspace)})["session"]["session_id"]
    page.guard.allowed_statuses.add(415)
    goto_app(page, f"/#/s/{sid}")
    page.locator(".composer input[type=file]").set_input_files(
        [{"name": "setup.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\x90\x00"}]
    )
    expect(page.locator(".toast-error")).to_contain_text(
        "only images (PNG, JPEG, GIF, WebP), PDFs and text files"
    )
    page.locator(".composer input[type=file]").set_input_files(
        [{"name": "photo.png", "mimeType": "image/png", "buffer": b"<svg onload=alert(1)>"}]
    )
    expect(page.locator(".toast-error", has_text="photo.png is not a PNG")).to_be_visible()
    expect(page.locator(".attach-tray .attach-chip")).to_have_count(0)
    assert not (workspace / "uploads").exists() or not any((workspace / "uploads").iterdir())


MATH_SIZES = """() => {
  const body = document.querySelector('.msg-assistant .msg-body');
  const size = (n) => parseFloat(getComputedStyle(n).fontSize);
  const text = body.querySelector('p');
  const block = body.querySelector('math[display=block]');
  const inline = body.querySelector('math:not([display=block])');
  return { text: size(text), block: size(block), inline: size(inline),
           blockHeight: block.getBoundingClientRect().height, lineHeight: text.getBoundingClientRect().height };
}"""


def test_display_math_is_larger_than_the_text_around_it_and_inline_math_is_not(page, server):
    """A displayed formula read no larger than the text around it; inline math keeps the text's size."""
    session = import_session(
        server,
        "Math sizes",
        [
            {"role": "user", "content": "Show a formula"},
            {"role": "assistant", "content": "Inline $x + y$ here.\n\n$$x + y = z$$\n\nAfter it."},
        ],
    )
    goto_app(page, f"/#/s/{session['session_id']}")
    expect(page.locator(".msg-assistant math[display=block]")).to_have_count(1)
    sizes = page.evaluate(MATH_SIZES)
    assert sizes["block"] >= sizes["text"] * 1.2, sizes
    assert sizes["inline"] <= sizes["text"], sizes
    assert sizes["block"] <= sizes["text"] * 1.5, sizes  # it stands out without becoming a headline
    screenshots(page, "display-math")


HAIKU = "An old silent pond\nA frog jumps into the pond\nSplash! Silence again"


def test_a_haiku_keeps_its_three_lines_while_streaming_and_once_saved(page, server, llm):
    """Single line breaks collapsed: a three-line haiku showed as one line."""
    llm.script(Reply(text=f"Here is a haiku:\n\n{HAIKU}", hang_after=14, token_delay=0.02))
    new_session(page)
    turn = send(page, "Write a haiku")
    live = page.locator(".msg.live .live-text")
    expect(live).to_contain_text("frog")
    assert llm.wait_for_hang()
    assert live.locator("p").last.locator("br").count() >= 1
    llm.release()
    wait_turn_done(page, turn)
    poem = page.locator(".msg-assistant .msg-body p").last
    expect(poem.locator("br")).to_have_count(2)
    lines = poem.evaluate("p => p.innerText.split('\\n')")
    assert lines == HAIKU.split("\n")
    screenshots(page, "haiku-line-breaks")


# Notes every text the live bubble showed outside code, whenever it changed.
WATCH_RAW_MARKERS = """() => {
  window.__liveTexts = [];
  new MutationObserver(() => {
    const live = document.querySelector('.msg.live .live-text');
    if (!live) return;
    const copy = live.cloneNode(true);
    for (const code of copy.querySelectorAll('code, pre')) code.remove();
    window.__liveTexts.push(copy.textContent);
  }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
}"""

OPEN_SPAN = "To install it, run `pip install --upgrade talaria-webui` and then **restart the server** now."


def test_an_open_code_span_shows_as_code_mid_stream_never_as_a_raw_backtick(page, server, llm):
    """An unclosed inline code span showed its raw backtick while the answer streamed."""
    hang_at = next(i for i, tok in enumerate(_tokens(OPEN_SPAN)) if "--upgrade" in tok) + 1
    llm.script(Reply(text=OPEN_SPAN, hang_after=hang_at, token_delay=0.03))
    new_session(page)
    page.evaluate(WATCH_RAW_MARKERS)
    page.evaluate(WATCH_LIVE)
    turn = send(page, "How do I install it?")
    live = page.locator(".msg.live .live-text")
    assert llm.wait_for_hang()
    expect(live.locator("code")).to_have_text("pip install --upgrade")
    screenshots(page, "open-code-span-mid-stream")
    llm.release()
    wait_turn_done(page, turn)
    body = page.locator(".msg-assistant .msg-body").last
    expect(body.locator("code")).to_have_text("pip install --upgrade talaria-webui")
    expect(body.locator("strong")).to_have_text("restart the server")
    seen = page.evaluate("window.__liveTexts")
    assert seen and not [text for text in seen if "`" in text or "**" in text]
    assert page.evaluate("window.__liveFinal") == body.inner_html()


def _long_answer(parts: int) -> str:
    return "\n\n".join(
        f"## Part {i}\n\nStep {i} uses `code`, **bold** and a line\nbreak.\n\n- one\n- two\n\n```python\nx = {i}\n```"
        for i in range(parts)
    )


def test_a_tab_that_joins_a_long_answer_mid_turn_ends_with_the_same_page_as_one_that_watched(
    browser, server, llm
):
    """Render events of a long answer are patches; the journal folds the old ones into a snapshot. A tab
    that opens the session mid-turn gets that snapshot and what follows, and shows the same final page."""
    text = _long_answer(900)  # about 85 KB: the journal has folded patches before the pause
    tokens = _tokens(text)
    llm.script(Reply(text=text, hang_after=len(tokens) * 2 // 3))
    with open_page(browser, server.base_url) as watcher:
        sid = new_session(watcher)
        watcher.evaluate(WATCH_LIVE)
        turn = send(watcher, "A long answer please")
        assert llm.wait_for_hang(60)
        with open_page(browser, server.base_url) as joiner:
            goto_app(joiner, f"/#/s/{sid}")
            expect(joiner.locator(".msg.live .live-text h2").first).to_have_text("Part 0")
            expect(joiner.locator(".msg.live .live-text h2").last).to_have_text(re.compile(r"Part \d+"))
            joiner.evaluate(WATCH_LIVE)
            llm.release()
            wait_turn_done(watcher, turn, timeout=60000)
            wait_turn_done(joiner, 0, timeout=60000)
            saved = server.get_json(f"/api/session?session_id={sid}")["session"]["messages"][-1]
            assert saved["content"] == text
            for tab in (watcher, joiner):
                body = tab.locator(".msg-assistant .msg-body").last
                assert tab.evaluate("window.__liveFinal") == body.inner_html()
                expect(body.locator("h2")).to_have_count(900)


def test_an_answer_too_long_for_markdown_streams_as_appended_plain_text_and_ends_as_saved(page, server, llm):
    """Past the Markdown size cap a segment is one preformatted text: the page appends what arrives
    instead of receiving the whole text again, and ends with the saved message's HTML."""
    word = "x" * 199 + "\n"
    text = "Start with **bold**.\n\n" + word * 1400  # 280 KB in 1,400 tokens (the agent saves it stripped)
    llm.script(Reply(text=text, hang_after=1300))
    new_session(page)
    page.evaluate(WATCH_LIVE)
    turn = send(page, "A very long answer")
    assert llm.wait_for_hang(60)
    live = page.locator(".msg.live .live-text")
    expect(live.locator("pre.plain-text code")).to_be_attached()
    llm.release()
    wait_turn_done(page, turn, timeout=60000)
    body = page.locator(".msg-assistant .msg-body").last
    expect(body.locator("pre.plain-text")).to_have_count(1)
    assert page.evaluate("window.__liveFinal") == body.inner_html()
