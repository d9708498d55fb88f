"""An answer still streaming, rendered block by block as its saved message will be.

Markdown's top-level blocks (paragraph, list, fence, table, heading…) before the last one cannot change
as text is appended: a block ends only when the next one starts. ``PartialDocument`` therefore keeps
the HTML of those blocks and parses only the text from the start of the last block on, so each render
costs what the unfinished tail costs, and the page is sent only the blocks that changed.

Link reference definitions (``[x]: https://…``) are the one exception: one defined late changes text
before it. A document that holds one is rendered whole from then on.

The last block of an unfinished answer may hold an inline marker whose closer has not arrived yet (a
code span's backtick, ``**``, ``_``, ``~~``). Rendered as it stands, the marker would show raw and then
vanish when the closer comes; ``close_open_inline`` closes it instead (or drops an opener that has
nothing after it yet), so the text looks as it will. The final render (``finished=True``) is the saved
message's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from api.services import render

_BACKTICK_RUN = re.compile(r"`+")
_SPECIAL = re.compile(r"[\\*_~]")  # a backslash escape or an emphasis / strikethrough delimiter


def _escaped(text: str, pos: int) -> bool:
    backslashes = 0
    while pos - backslashes > 0 and text[pos - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _open_code_span(content: str) -> tuple[int, int, list[tuple[int, int]]]:
    """Where an unclosed code span opens in inline ``content`` (``-1`` if none), its backtick count, and
    the closed spans before it as ``(start, end)``."""
    runs = [(m.start(), m.end() - m.start()) for m in _BACKTICK_RUN.finditer(content)]
    closed: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        start, count = runs[index]
        if _escaped(content, start):  # "\`" is a literal backtick; the rest of the run may open
            start, count = start + 1, count - 1
            if count == 0:
                index += 1
                continue
        closer = next((k for k in range(index + 1, len(runs)) if runs[k][1] == count), None)
        if closer is None:
            return start, count, closed
        closed.append((start, runs[closer][0] + count))
        index = closer + 1
    return -1, 0, closed


def _open_emphasis(content: str, end: int, code_spans: list[tuple[int, int]]) -> list[tuple[int, str, int]]:
    """The emphasis and strikethrough openers of ``content[:end]`` still waiting for a closer, as
    ``(position, marker, count)``; delimiters are judged by markdown-it's own flanking rules."""
    state = StateInline(content[:end], render.MARKDOWN, {}, [])
    stack: list[list[Any]] = []
    spans = iter(code_spans)
    span = next(spans, None)
    pos = 0
    while pos < end:
        if span is not None and pos >= span[0]:
            pos = span[1]
            span = next(spans, None)
            continue
        found = _SPECIAL.search(content, pos, end)
        if found is None:
            break
        if span is not None and found.start() >= span[0]:
            pos = span[0]
            continue
        pos = found.start()
        char = content[pos]
        if char == "\\":
            pos += 2
            continue
        scanned = state.scanDelims(pos, char != "_")
        count = scanned.length
        if char == "~" and count != 2:
            pos += count
            continue
        left = count
        while left and scanned.can_close and stack and stack[-1][1] == char:
            used = min(left, stack[-1][2])
            stack[-1][2] -= used
            left -= used
            if stack[-1][2] == 0:
                stack.pop()
        if left and scanned.can_open:
            stack.append([pos + count - left, char, left])
        pos += count
    return [(p, m, c) for p, m, c in stack]


def close_open_inline(content: str) -> tuple[int, str]:
    """For the inline text at the end of an unfinished answer: how many characters to cut from its end
    and what to append so no opener shows raw (``(0, "")`` when nothing is open).

    ``content`` is taken without trailing white space (a closer after a space would not close)."""
    content = content.rstrip()
    end = len(content)
    code_at, ticks, code_spans = _open_code_span(content)
    closers = ""
    if code_at >= 0:
        inside = content[code_at + ticks :]
        partial_closer = len(inside) - len(inside.rstrip("`"))
        if partial_closer and partial_closer < ticks:  # the closer is arriving: hide what came of it
            inside = inside[:-partial_closer]
        if inside.strip():
            closers = "`" * ticks
            end = code_at + ticks + len(inside)
        else:
            end = code_at
    stack = _open_emphasis(content, code_at if code_at >= 0 else end, code_spans)
    if code_at < 0:
        # An opener with nothing after it yet is dropped rather than shown or closed on nothing.
        while stack and not content[stack[-1][0] + stack[-1][2] : end].strip():
            end = stack.pop()[0]
        trimmed = content[:end].rstrip()
        end = len(trimmed)
    for _pos, marker, count in reversed(stack):
        closers += marker * count
    return len(content) - end, closers


def _finish_last_inline(text: str, tokens: list[Token]) -> str:
    """``text`` with the open inline markers of its last line closed, when that line is inline text."""
    last = next((t for t in reversed(tokens) if t.nesting != -1), None)
    if last is None or last.type != "inline" or not last.map:
        return text
    stripped = text.rstrip()
    if last.map[1] < stripped.count("\n") + 1:
        return text
    tail_line = last.content.rstrip().rsplit("\n", 1)[-1]
    if not tail_line or not stripped.endswith(tail_line):  # e.g. a table row's closing pipe
        return text
    cut, closers = close_open_inline(last.content)
    if not cut and not closers:
        return text
    return stripped[: len(stripped) - cut] + closers


def split_blocks(tokens: list[Token]) -> list[list[Token]]:
    """Top-level blocks: each a run of tokens that opens and closes at level 0."""
    blocks: list[list[Token]] = []
    current: list[Token] = []
    depth = 0
    for token in tokens:
        current.append(token)
        depth += token.nesting
        if depth == 0:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _line_offsets(text: str) -> list[int]:
    offsets = [0]
    for match in re.finditer("\n", text):
        offsets.append(match.end())
    return offsets


@dataclass
class PartialDocument:
    """One segment of an answer as it grows: ``render`` answers the HTML of each top-level block."""

    frozen: list[str] = field(default_factory=list)  # the HTML of the blocks that cannot change
    frozen_chars: int = 0  # where the text of the unfinished blocks starts
    whole: bool = False  # a reference definition was seen: the whole text is rendered each time

    def render(self, text: str, *, finished: bool = False) -> list[str]:
        """The HTML of every top-level block of ``text`` (which extends the text of the last call)."""
        tail = text[self.frozen_chars :]
        env = render.markdown_env(partial_text=None if finished else tail)
        blocks = split_blocks(render.parse_markdown(tail, env))
        if env.get("references") and not self.whole:
            self.whole = True
            self.frozen, self.frozen_chars = [], 0
            return self.render(text, finished=finished)
        if not blocks:
            return list(self.frozen)
        last = blocks[-1]
        last_start = _line_offsets(tail)[last[0].map[0]] if last[0].map else 0
        html = [render.render_tokens(block, env) for block in blocks[:-1]]
        if not finished:
            last_text = tail[last_start:]
            fixed = _finish_last_inline(last_text, last)
            if fixed != last_text:
                env = render.markdown_env(partial_text=fixed)
                env["references"] = {}
                last = [t for block in split_blocks(render.parse_markdown(fixed, env)) for t in block]
        result = [*self.frozen, *html]
        if last:
            result.append(render.render_tokens(last, env))
        if not self.whole:
            self.frozen = self.frozen + html
            self.frozen_chars += last_start
        return result


def render_unfinished(text: str) -> str:
    """An unfinished answer's whole HTML, as the live view shows it."""
    return "".join(PartialDocument().render(text))
