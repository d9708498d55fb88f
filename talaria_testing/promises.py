"""Checks of the durability promises on a state folder after a crash and startup recovery.

The promises: an acknowledged save is on disk whole; the transcript only shrinks on purpose; compression
touches only the context; nothing removed on purpose springs back; every genuine loss is recovered; recovery
destroys nothing (docs/recovery.md).

Inputs are snapshots (``{relative path: bytes}`` of the whole state folder): the scenario's starting
state (``old``), the state a complete run leaves (``new``), the crashed state before recovery
(``pre``) and the state after recovery (``post``). Each check returns readable violation strings; an
empty list means every promise held.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from talaria_testing.scenarios import (
    COMPRESS,
    DELETE,
    DELIBERATE,
    LOSS,
    OTHER,
    RECOVERY,
    SID,
    UNDELETE,
)

INDEX = "sessions/_index.json"


def live_rel(sid: str = SID) -> str:
    return f"sessions/{sid}.json"


def bak_rel(sid: str = SID) -> str:
    return f"sessions/{sid}.json.bak"


def parse(data: bytes | None) -> Any:
    if data is None:
        return None
    from api.rules import jsonio

    try:
        return jsonio.loads(data)
    except ValueError:
        return None


def _digest(value: Any) -> str:
    return hashlib.sha1(orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:16]


def fingerprint(data: bytes | None) -> tuple:
    """What "the same version" means: the transcript, the context's rows (role, content) and the title.

    Timestamps a compression stamps on context rows, ``updated_at`` and fresh generations differ
    between two runs of the same operation and are left out.
    """
    if data is None:
        return ("absent",)
    doc = parse(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return ("raw", hashlib.sha1(data).hexdigest()[:16])
    ctx = doc.get("context_messages")
    ctx_rows = (
        [(m.get("role"), m.get("content")) if isinstance(m, dict) else m for m in ctx]
        if isinstance(ctx, list)
        else None
    )
    return ("doc", len(doc["messages"]), _digest(doc["messages"]), _digest(ctx_rows), doc.get("title"))


def describe(fp: tuple) -> str:
    if fp[0] == "doc":
        return f"doc({fp[1]} msgs, title={fp[4]!r})"
    return fp[0]


def _row_key(m: Any) -> tuple:
    return (
        (m.get("role"), orjson.dumps(m.get("content"), option=orjson.OPT_SORT_KEYS), m.get("timestamp"))
        if isinstance(m, dict)
        else ("?", repr(m), None)
    )


@dataclass
class Expectation:
    """Where a scenario starts (``old``) and where one complete run of it ends (``new``)."""

    scenario: str
    kind: str
    old: dict[str, bytes]
    new: dict[str, bytes]

    @property
    def old_fp(self) -> tuple:
        return fingerprint(self.old.get(live_rel()))

    @property
    def new_fp(self) -> tuple:
        return fingerprint(self.new.get(live_rel()))

    @property
    def restored_fp(self) -> tuple:
        """Recovery scenarios: the backup is what must end up live."""
        return fingerprint(self.old.get(bak_rel()))

    def allowed_pre(self) -> set[tuple]:
        if self.kind == RECOVERY:
            return {self.old_fp, self.restored_fp}
        return {self.old_fp, self.new_fp}

    def old_doc(self) -> Any:
        return parse(self.old.get(live_rel()))

    def new_doc(self) -> Any:
        return parse(self.new.get(live_rel()))


def _is_kept_name(rel: str) -> bool:
    return rel == INDEX or ".tmp." in rel.rsplit("/", 1)[-1]


def _files_parse(exp: Expectation, post: dict[str, bytes]) -> list[str]:
    out = []
    old_bytes = set(exp.old.values())
    for rel, data in post.items():
        parts = rel.split("/")
        if len(parts) != 2 or parts[0] != "sessions" or not parts[1].endswith(".json"):
            continue
        doc = parse(data)
        if parts[1].startswith("_"):
            if doc is None and rel != INDEX and data not in old_bytes:
                out.append(f"P1 {rel} is not valid JSON after recovery")
            continue
        if not (isinstance(doc, dict) and isinstance(doc.get("messages"), list)) and data not in old_bytes:
            out.append(f"P1 {rel} does not parse as a session after recovery ({len(data)} bytes)")
    if INDEX in post and not isinstance(parse(post[INDEX]), list):
        out.append("P1 _index.json is torn (not a JSON list)")
    return out


def _nothing_destroyed(pre: dict[str, bytes], post: dict[str, bytes]) -> list[str]:
    """Promise 6: every file recovery found (bar the index cache and temp files) still exists byte for byte."""
    remaining = set(post.values())
    out = []
    for rel, data in pre.items():
        if _is_kept_name(rel):
            continue
        if data not in remaining:
            out.append(
                f"P6 recovery destroyed {rel} ({len(data)} bytes, fingerprint {describe(fingerprint(data))})"
            )
    return out


def check(
    exp: Expectation, pre: dict[str, bytes], post: dict[str, bytes], *, acknowledged: bool
) -> list[str]:
    """Promises 1-6 for one crashed-then-recovered state folder (``pre`` before recovery, ``post`` after)."""
    out: list[str] = []
    pre_fp = fingerprint(pre.get(live_rel()))
    post_fp = fingerprint(post.get(live_rel()))
    allowed = exp.allowed_pre()
    if pre_fp not in allowed:
        out.append(
            f"P1 crash left {describe(pre_fp)}, neither the old {describe(exp.old_fp)} nor the new {describe(exp.new_fp)} version"
        )
    if acknowledged:
        want = exp.restored_fp if exp.kind == RECOVERY else exp.new_fp
        if pre_fp != want:
            out.append(
                f"P1 the operation returned but the file holds {describe(pre_fp)}, not {describe(want)}"
            )
    if exp.kind == LOSS:
        if post_fp != exp.old_fp:
            out.append(
                f"P5 genuine loss not recovered: after recovery {describe(post_fp)}, want {describe(exp.old_fp)}"
            )
    elif exp.kind == RECOVERY:
        if post_fp != exp.restored_fp:
            out.append(
                f"P5 restore incomplete after re-running recovery: {describe(post_fp)}, want {describe(exp.restored_fp)}"
            )
    elif post_fp != pre_fp:
        tag = "P4" if exp.kind in (DELIBERATE, COMPRESS, DELETE) else "P2"
        out.append(
            f"{tag} recovery changed {describe(pre_fp)} into {describe(post_fp)} ({exp.kind} operation)"
        )
    if exp.kind in (DELETE, UNDELETE) and pre_fp == ("absent",) and post_fp != ("absent",):
        out.append("P4 a deleted session came back after recovery")
    if exp.kind == COMPRESS:
        old_doc, post_doc = exp.old_doc(), parse(post.get(live_rel()))
        same_kind = isinstance(post_doc, dict) and isinstance(old_doc, dict)
        if same_kind and orjson.dumps(post_doc.get("messages")) != orjson.dumps(old_doc.get("messages")):
            out.append("P3 compression changed the visible transcript")
    other_before = fingerprint(exp.old.get(live_rel(OTHER)))
    other_after = fingerprint(post.get(live_rel(OTHER)))
    if other_after != other_before:
        out.append(f"P2 the bystander session changed: {describe(other_before)} -> {describe(other_after)}")
    out.extend(_files_parse(exp, post))
    out.extend(_nothing_destroyed(pre, post))
    return out


def index_violations(sessions: Path) -> list[str]:
    """The sidebar index (validated, then written) lists exactly the session files, with their counts."""
    from api.rules.jsonio import loads as loads_json
    from api.store import models

    sessions = Path(sessions)
    index_file = sessions / "_index.json"
    files: dict[str, int] = {}
    for path in sessions.glob("*.json"):
        if path.name.startswith("_") or path.is_symlink():
            continue
        try:
            doc = loads_json(path.read_bytes())
        except (ValueError, UnicodeDecodeError, OSError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
            files[path.name[:-5]] = len(doc["messages"])
    out = []
    index = models.store().index
    try:
        index.forget(sessions)
        rows = index.all_rows(sessions, index_file)
        index.flush(index_file)
        listed = {r["session_id"]: r.get("message_count") for r in rows}
        written = parse(index_file.read_bytes()) if index_file.exists() else None
    finally:
        index.forget(sessions)
    if listed != files:
        out.append(f"index lists {sorted(listed.items())}, files hold {sorted(files.items())}")
    if not isinstance(written, list):
        out.append("_index.json missing or not a list after a flush")
    else:
        on_disk = {r.get("session_id"): r.get("message_count") for r in written if isinstance(r, dict)}
        if on_disk != files:
            out.append(f"_index.json lists {sorted(on_disk.items())}, files hold {sorted(files.items())}")
    return out


def spring_back_violations(exp: Expectation, post: dict[str, bytes], sessions: Path) -> list[str]:
    """Promise 4 against ``state.db``: with the removed rows still in the agent's database, reconciliation
    brings none of them back (display nor model context) once the deliberate operation landed."""
    if exp.kind not in (DELIBERATE, COMPRESS) or fingerprint(post.get(live_rel())) != exp.new_fp:
        return []
    from api.store.models import _load_session_from_path, reconciled_state_db_messages_for_session

    old_doc = exp.old_doc()
    if not isinstance(old_doc, dict) or not isinstance(old_doc.get("messages"), list):
        return []
    state_rows = [dict(m) for m in old_doc["messages"] if isinstance(m, dict)]
    session = _load_session_from_path(Path(sessions) / f"{SID}.json")
    if session is None:
        return ["P4 the live file did not load for the reconciliation check"]
    out = []
    if exp.kind == DELIBERATE:
        kept = {_row_key(m) for m in session.messages}
        removed = [m for m in state_rows if _row_key(m) not in kept]
        for prefer_context in (False, True):
            merged = reconciled_state_db_messages_for_session(
                session, prefer_context=prefer_context, state_messages=state_rows
            )
            back = [
                m for m in merged if isinstance(m, dict) and _row_key(m) in {_row_key(r) for r in removed}
            ]
            if back:
                view = "model context" if prefer_context else "display"
                out.append(
                    f"P4 reconciliation with state.db brought back {len(back)} removed row(s) into the {view}"
                )
    else:
        new_doc = exp.new_doc()
        generation = new_doc.get("compression_generation") if isinstance(new_doc, dict) else None
        if not generation or generation == old_doc.get("compression_generation"):
            return []  # uncompress: the full context is meant to come back
        merged = reconciled_state_db_messages_for_session(
            session, prefer_context=True, state_messages=state_rows
        )
        if len(merged) != len(session.context_messages):
            out.append(
                f"P4 compressed context sprang back: reconciled context has {len(merged)} rows, compressed {len(session.context_messages)}"
            )
        shown = reconciled_state_db_messages_for_session(
            session, prefer_context=False, state_messages=state_rows
        )
        if len(shown) != len(session.messages):
            out.append(
                f"P3 reconciliation changed the transcript after compression: {len(shown)} vs {len(session.messages)} rows"
            )
    return out


def chat_turn_outcome(old_msgs: list, post: dict) -> str:
    doc = parse(post.get(live_rel())) or {}
    tail = (doc.get("messages") or [])[len(old_msgs) :]
    if not tail:
        return "no_turn"
    if tail[-1].get("_interrupted"):
        return "interrupted_with_partial" if any(m.get("_partial") for m in tail) else "interrupted"
    return "complete"


def chat_turn_violations(old_msgs: list, post: dict, *, started: bool, finished: bool) -> list[str]:
    """A chat turn (``talaria_testing.scripted_turns``) after a crash and startup: the rows before it are
    untouched; once ``start_turn`` returned the user row is there; a finished turn is stored exactly; an
    unfinished one ends with the interrupted marker after at most its checkpointed partial answer."""
    from talaria_testing.scripted_turns import ANSWER, USER_TEXT

    doc = parse(post.get(live_rel()))
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return ["P1 the session file does not parse after recovery"]
    out = []
    msgs = doc["messages"]
    if msgs[: len(old_msgs)] != old_msgs:
        out.append("P2 rows from before the turn changed")
    if doc.get("active_stream_id") or doc.get("pending_user_message"):
        out.append("the turn is still pending after startup")
    tail = [
        (m.get("role"), m.get("content"), bool(m.get("_partial")), bool(m.get("_interrupted")))
        for m in msgs[len(old_msgs) :]
    ]
    user = ("user", USER_TEXT, False, False)
    complete = [user, ("assistant", ANSWER, False, False)]
    if finished:
        if tail != complete:
            out.append(f"P1 the finished turn is not stored exactly: {tail}")
        return out
    if not tail:
        if started:
            out.append("P1 the acknowledged user message is gone")
        return out
    if tail == complete:
        return out  # the final merge landed just before the kill
    if tail[0][:2] != user[:2]:
        out.append(f"the turn's first row is not the user message: {tail[0]}")
    if not tail[-1][3]:
        out.append(f"an unfinished turn has no interrupted marker: {tail}")
    for role, content, partial, _ in tail[1:-1]:
        if (
            role != "assistant"
            or not partial
            or not isinstance(content, str)
            or not ANSWER.startswith(content)
        ):
            out.append(f"an invented or mangled answer row: {(role, content, partial)}")
    if len(tail) > 3:
        out.append(f"more than one partial row kept: {tail}")
    return out
