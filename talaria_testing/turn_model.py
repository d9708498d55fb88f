"""A model-based run of chat turns: random steps against the real server, each checked against a small model.

Steps are turn outcomes (``talaria_testing.turn_outcomes``), a server killed mid-turn, history edits (undo,
retry, truncate at a user message, clear), manual compress and uncompress, and graceful restarts. The
model holds, per turn, the rows it leaves in the transcript and the rows the model is sent afterwards
(both projected by ``turn_outcomes.project``), the texts edits removed, and where exact model context
starts after a compression. After every step:

- the session file's ``messages`` equal the model's transcript (so every acknowledged user message is
  there, nothing an edit removed springs back, and the transcript only shrinks through an edit: a
  non-edit step keeps every earlier row byte for byte);
- every tool call is followed by its result, and no result lacks its call;
- after a turn, the model's first request of it holds exactly the rows the model predicts (uncompressed),
  or ends with the rows since the compression and carries nothing removed and nothing glued (compressed).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

from talaria_testing.chat_client import named, on_disk
from talaria_testing.server_proc import ServerProc
from talaria_testing.turn_outcomes import (
    KINDS,
    drive,
    expected,
    expected_killed,
    kill_mid_turn,
    project,
    turn_request,
)

MARKER = "[CONTEXT COMPACTION"
# fmt: off
WEIGHTS = {
    "answer": 20, "tool": 14, "provider_401": 4, "provider_500": 4, "tool_then_500": 4,
    "cancel_streaming": 5, "cancel_before_output": 4, "cancel_in_tool": 2, "denied_approval": 2, "killed": 2,
    "undo": 6, "retry": 5, "truncate": 4, "clear": 1, "compress": 5, "uncompress": 3, "restart": 1,
}
# fmt: on
EDITS = ("undo", "retry", "truncate", "clear")


@dataclass
class Turn:
    user: str
    transcript: list[tuple]
    model: list[tuple]


@dataclass
class Model:
    turns: list[Turn] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # user texts an edit removed (and no retry sent again)
    exact_from: int | None = None  # None: uncompressed; else the first turn the context holds verbatim
    undo: list[int | None] = field(
        default_factory=list
    )  # exact_from before the compression uncompress undoes (one level)

    def transcript(self) -> list[tuple]:
        return [row for turn in self.turns for row in turn.transcript]

    def context(self) -> list[tuple]:
        return [row for turn in self.turns for row in turn.model]

    def cut(self, keep_turns: int) -> None:
        """An edit kept the first ``keep_turns`` turns."""
        self.removed.update(t.user for t in self.turns[keep_turns:])
        del self.turns[keep_turns:]
        if self.exact_from is not None and keep_turns < self.exact_from:
            # the cut removed rows the compression summarized: the compression is forgotten
            self.exact_from, self.undo = None, []


class Violation(AssertionError):
    pass


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise Violation(message)


def tool_pairing_problems(rows: list[dict]) -> list[str]:
    """Every tool call followed by its result before the next user row; no result without its call."""
    problems, open_calls, declared = [], set(), set()
    for i, row in enumerate(rows):
        role = row.get("role")
        if role == "user" and open_calls and not row.get("_error"):
            problems.append(f"row {i}: tool calls {sorted(open_calls)} have no result")
            open_calls = set()
        if role == "assistant":
            ids = {c.get("id") for c in row.get("tool_calls") or [] if isinstance(c, dict)}
            open_calls |= ids
            declared |= ids
        elif role == "tool":
            call = row.get("tool_call_id")
            if call not in declared:
                problems.append(f"row {i}: result for unknown call {call}")
            open_calls.discard(call)
    if open_calls:
        problems.append(f"end: tool calls {sorted(open_calls)} have no result")
    return problems


class Run:
    """One seeded run on one server and one session (``steps`` steps, restarts included)."""

    def __init__(self, srv: ServerProc, fake, seed: int):
        self.srv, self.fake = srv, fake
        self.rng = random.Random(seed)
        self.seed = seed
        self.model = Model()
        self.sid = srv.post_json("/api/session/new", {})["session"]["session_id"]
        self.step_no = 0
        self.log: list[str] = []
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    # ------------------------------------------------------------------ steps

    def choose(self) -> str:
        names = list(WEIGHTS)
        return self.rng.choices(names, weights=[WEIGHTS[n] for n in names])[0]

    def step(self) -> None:
        self.step_no += 1
        action = self.choose()
        before = on_disk(self.srv, self.sid)["messages"]
        self.fake.reset()
        self.log.append(f"{self.step_no}: {action}")
        started = time.monotonic()
        detail = getattr(self, f"_do_{action}", None)
        note = detail() if detail else self._turn(action)
        self.counts[action] += 1
        self.seconds[action] += time.monotonic() - started
        self.log[-1] += f" {note}" if note else ""
        self.verify(before, edited=action in EDITS and note != "nothing")

    def _text(self) -> str:
        return f"u{self.step_no} {self.rng.choice(['plan', 'ask', 'tell', 'count'])} words"

    def _turn(self, kind: str, text: str | None = None) -> str:
        text = text or self._text()
        tag = f"s{self.step_no}"
        context = self.model.context()
        if kind == "killed":
            tokens = self.rng.choice([0, 2])
            requests = kill_mid_turn(self.srv, self.fake, self.sid, text, tag, tokens)
            outcome = expected_killed(text, tag, tokens)
        else:
            events = drive(self.srv, self.fake, self.sid, kind, text, tag)
            _check(events and events[-1][1] == "done", f"{kind}: the stream did not end with done")
            errors = named(events, "error")
            failed = kind in ("provider_401", "provider_500", "tool_then_500")
            _check(bool(errors) == failed, f"{kind}: error events {errors}")
            outcome = expected(kind, text, tag)
            requests = self.fake.chat_requests()
        self.check_request(requests, context, text)
        self.model.removed.discard(text)
        self.model.turns.append(Turn(text, outcome.transcript, outcome.model))
        return text

    def _do_undo(self) -> str:
        answer = self.srv.post_json("/api/session/undo", {"session_id": self.sid})
        if not self.model.turns:
            _check("error" in answer, f"undo of an empty session answered {answer}")
            return "nothing"
        self.model.cut(len(self.model.turns) - 1)
        return ""

    def _do_retry(self) -> str:
        answer = self.srv.post_json("/api/session/retry", {"session_id": self.sid})
        if not self.model.turns:
            _check("error" in answer, f"retry of an empty session answered {answer}")
            return "nothing"
        text = self.model.turns[-1].user
        _check(answer.get("last_user_text") == text, f"retry returned {answer.get('last_user_text')!r}")
        self.model.cut(len(self.model.turns) - 1)
        self.verify_transcript()
        kind = self.rng.choices(KINDS, weights=[WEIGHTS[k] for k in KINDS])[0]
        self.fake.reset()
        return f"resent as {kind}: {self._turn(kind, text)}"

    def _do_truncate(self) -> str:
        keep_turns = self.rng.randint(0, len(self.model.turns))
        keep = sum(len(t.transcript) for t in self.model.turns[:keep_turns])
        self.srv.post_json("/api/session/truncate", {"session_id": self.sid, "keep_count": keep})
        self.model.cut(keep_turns)
        return f"keep {keep}"

    def _do_clear(self) -> str:
        self.srv.post_json("/api/session/clear", {"session_id": self.sid})
        self.model.cut(0)
        self.model.exact_from, self.model.undo = None, []
        return ""

    def _do_compress(self) -> str:
        status, answer = self.srv.json("POST", "/api/session/compress", {"session_id": self.sid})
        _check(status in (200, 400), f"compress answered {status}: {answer}")
        if status == 200 and answer.get("changed"):
            self.model.undo = [self.model.exact_from]
            self.model.exact_from = len(self.model.turns)
            return "changed"
        return "unchanged" if status == 200 else "refused"

    def _do_uncompress(self) -> str:
        status, answer = self.srv.json("POST", "/api/session/uncompress", {"session_id": self.sid})
        _check(status in (200, 409), f"uncompress answered {status}: {answer}")
        if status == 200:
            _check(bool(self.model.undo), "uncompress succeeded with no compression to undo")
            previous = self.model.undo.pop()
            self.model.exact_from = None if previous is None else min(previous, len(self.model.turns))
            return "undone"
        _check(not self.model.undo, f"uncompress refused with a compression to undo: {answer}")
        return "refused"

    def _do_restart(self) -> str:
        self.srv.stop()
        self.srv.start()
        return ""

    # ------------------------------------------------------------------ checks

    def check_request(self, requests: list[dict], context: list[tuple], text: str) -> None:
        sent = [m for m in turn_request(requests, text)["body"]["messages"] if m.get("role") != "system"]
        got = [project(m) for m in sent]
        want = [*context, ("user", text)]
        if self.model.exact_from is None:
            _check(got == want, f"the model was sent\n  {got}\nnot\n  {want}")
            return
        since = [row for turn in self.model.turns[self.model.exact_from :] for row in turn.model]
        tail = [*since, ("user", text)]
        _check(got[-len(tail) :] == tail, f"the compressed request does not end with\n  {tail}\nbut\n  {got}")
        live = {t.user for t in self.model.turns} | {text}
        for m in sent:
            body = m.get("content") if isinstance(m.get("content"), str) else str(m.get("content"))
            _check(
                not any(r in body for r in self.model.removed - live),
                f"a removed message came back: {body!r}",
            )
            if m.get("role") == "user" and MARKER not in body:
                _check(
                    body.strip() in live, f"the model was sent a user message it was never given: {body!r}"
                )

    def verify_transcript(self) -> list[dict]:
        rows = on_disk(self.srv, self.sid)["messages"]
        got, want = [project(m) for m in rows], self.model.transcript()
        _check(got == want, f"the file holds\n  {got}\nnot\n  {want}")
        return rows

    def verify(self, before: list[dict], edited: bool) -> None:
        rows = self.verify_transcript()
        problems = tool_pairing_problems(rows)
        _check(not problems, f"tool calls and results: {problems}")
        texts = {m.get("content") for m in rows if m.get("role") == "user"}
        _check(
            not (texts & self.model.removed), f"removed messages sprang back: {texts & self.model.removed}"
        )
        if not edited:
            _check(rows[: len(before)] == before, "a step that edits nothing changed earlier rows")
        data = self.srv.get_json(f"/api/session?session_id={self.sid}&msg_limit=3")["session"]
        _check(data["total_messages"] == len(rows), f"the server counts {data['total_messages']} rows")
        _check(
            not data["active_stream_id"] and not data["pending_user_message"],
            "a settled turn is still pending",
        )


def run_steps(srv: ServerProc, fake, seed: int, steps: int) -> dict:
    """Run ``steps`` steps; returns the counts. A violation raises with the seed and the step log."""
    run = Run(srv, fake, seed)
    started = time.monotonic()
    try:
        for _ in range(steps):
            run.step()
    except Exception as exc:
        tail = "\n".join(run.log[-25:])
        raise Violation(f"seed {seed}, step {run.step_no}: {exc}\nlast steps:\n{tail}") from exc
    seconds = {f"seconds.{name}": round(value, 1) for name, value in run.seconds.items()}
    return {"steps": run.step_no, "seconds": round(time.monotonic() - started, 1), **run.counts, **seconds}
