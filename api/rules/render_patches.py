"""The ``render`` events of a streaming answer as patches of its text segments (pure).

A segment is shown either as Markdown blocks or, once its text is too costly for Markdown
(``api.services.render.too_costly_for_markdown``), as one preformatted text. A ``render`` event patches one
segment:

- ``{segment, keep, blocks, chars}``: keep the first ``keep`` blocks, drop the rest, append ``blocks``
  (each the sanitized HTML of one top-level block);
- ``{segment, plain, plain_from, chars}``: the segment is preformatted text; ``plain`` is its text from
  character ``plain_from`` on (``0``: it replaces whatever the segment showed).

``keep: 0`` and ``plain_from: 0`` make a patch a snapshot: it needs nothing before it. The journal
folds a segment's old patches into one snapshot (``snapshot``), so a reader that joins late or resumes
gets the current state once, then the patches that followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SegmentState:
    """What a reader that applied every patch of one segment shows."""

    blocks: list[str] = field(default_factory=list)
    plain: list[str] | None = None  # the preformatted text, in pieces; None while shown as blocks
    chars: int = 0


def diff(shown: list[str], blocks: list[str]) -> tuple[int, list[str]]:
    """How many leading blocks of ``shown`` stay, and the blocks that replace the rest."""
    keep = 0
    for old, new in zip(shown, blocks, strict=False):
        if old != new:
            break
        keep += 1
    return keep, blocks[keep:]


def apply(state: SegmentState, patch: dict[str, Any]) -> None:
    """``state`` after ``patch`` (a ``render`` event's data)."""
    state.chars = int(patch.get("chars") or state.chars)
    plain = patch.get("plain")
    if isinstance(plain, str):
        if int(patch.get("plain_from") or 0) == 0 or state.plain is None:
            state.plain = []
            state.blocks = []
        state.plain.append(plain)
        return
    keep = int(patch.get("keep") or 0)
    state.plain = None
    state.blocks = state.blocks[:keep] + [str(b) for b in patch.get("blocks") or []]


def snapshot(segment: int, state: SegmentState) -> dict[str, Any]:
    """One patch that brings an empty segment to ``state``."""
    if state.plain is not None:
        return {"segment": segment, "plain": "".join(state.plain), "plain_from": 0, "chars": state.chars}
    return {"segment": segment, "keep": 0, "blocks": list(state.blocks), "chars": state.chars}


def size(patch: dict[str, Any]) -> int:
    """The characters of HTML or text a patch carries."""
    plain = patch.get("plain")
    if isinstance(plain, str):
        return len(plain)
    return sum(len(str(b)) for b in patch.get("blocks") or [])
