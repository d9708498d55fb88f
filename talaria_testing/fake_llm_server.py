"""The in-process fake LLM: a scriptable OpenAI-compatible server on 127.0.0.1 (``FakeLLM``).

Replies come from a queue; an empty queue answers with an echo of the last user message. The
compaction summarizer's request (its prompt asks for a checkpoint summary) is answered from a separate
summary queue or a default summary. Import it from ``talaria_testing.fake_llm``, which re-exports it
next to the agent configuration and the out-of-process wrapper.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODEL = "fake-model"
DEFAULT_CONTEXT_LENGTH = 131072
DEFAULT_SUMMARY = (
    "## Active Task\nNone.\n\n## Goal\nFake summary of the earlier conversation.\n\n"
    "## Critical Context\nThe fake LLM wrote this summary."
)
# The summarizer prompt of hermes-agent 0.19 opens with the first phrase; the others cover rewordings.
SUMMARY_MARKERS = ("You are a summarization agent", "TURNS TO SUMMARIZE:", "PREVIOUS SUMMARY:")
_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
_PING_INTERVAL = 0.2


@dataclass
class Reply:
    """One scripted response. ``status`` set means an error response instead of a completion."""

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"name", "arguments": dict|str, "id"?}
    reasoning: str = ""
    status: int | None = None
    error: str = "boom"
    delay: float = 0.0  # seconds before the response starts
    token_delay: float = 0.0  # seconds between streamed tokens
    hang_after: int | None = None  # stream this many tokens, then block until release() or disconnect
    finish_reason: str | None = None
    usage: dict | None = None
    for_user: str | None = (
        None  # answer only a request whose last user message is this text (others get the default)
    )

    @classmethod
    def coerce(cls, item: Reply | str | dict) -> Reply:
        if isinstance(item, Reply):
            return item
        if isinstance(item, str):
            return cls(text=item)
        if isinstance(item, dict):
            known = {k: v for k, v in item.items() if k in cls.__dataclass_fields__}
            return cls(**known)
        raise TypeError(f"cannot script {type(item).__name__}")

    def to_dict(self) -> dict:
        return asdict(self)


def split_tokens(text: str) -> list[str]:
    """Word-by-word pieces that join back to ``text`` exactly (whitespace stays with the previous word)."""
    return [piece for piece in re.split(r"(?<=\s)(?=\S)", text) if piece]


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def is_summary_request(body: Any) -> bool:
    """True for hermes-agent's compaction summarizer call (a prompt asking for a checkpoint summary)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return False
    return any(
        isinstance(m, dict) and any(mark in message_text(m.get("content")) for mark in SUMMARY_MARKERS)
        for m in messages
    )


def socket_owner(local_port: int) -> int | None:
    """The process holding the TCP socket bound to 127.0.0.1:``local_port`` (a client of this server)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == local_port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
    return None


TITLE_MARKER = "Generate a short, descriptive title"


def is_title_request(body: Any) -> bool:
    """True for hermes-agent's session-title call (its title_generator's system prompt)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return False
    return messages[0].get("role") == "system" and message_text(messages[0].get("content")).startswith(
        TITLE_MARKER
    )


def title_reply(body: dict) -> Reply:
    """``Title: About <the first words of the user's message>`` (the agent strips the prefix)."""
    text = last_user_text(body) or ""
    first = text.split("\n", 1)[0].removeprefix("User:").split()
    return Reply(text="Title: About " + " ".join(first[:4]))


def last_user_text(body: dict) -> str | None:
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return message_text(users[-1].get("content")) if users else None


def echo_reply(body: dict) -> Reply:
    return Reply(text=f"echo: {last_user_text(body) or ''}")


def _tool_call_list(reply: Reply) -> list[dict]:
    calls = []
    for i, call in enumerate(reply.tool_calls):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return calls


def _usage(body: dict, reply: Reply) -> dict:
    if reply.usage:
        return dict(reply.usage)
    prompt = max(1, len(json.dumps(body.get("messages") or [], ensure_ascii=False)) // 4)
    completion = max(1, (len(reply.text) + sum(len(json.dumps(c)) for c in reply.tool_calls)) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class FakeLLM:
    """The server: a reply queue, a summary queue, a request log, a hang/release gate."""

    def __init__(
        self,
        *,
        port: int = 0,
        context_length: int = DEFAULT_CONTEXT_LENGTH,
        model: str = DEFAULT_MODEL,
        default_reply: Callable[[dict], Reply | str] = echo_reply,
        default_summary: str = DEFAULT_SUMMARY,
        hang_timeout: float = 60.0,
        extra_models: tuple[str, ...] = (),
        vision_models: tuple[str, ...] = (),
    ):
        self.context_length = context_length
        self.model = model
        self.extra_models = tuple(extra_models)  # listed by /v1/models after ``model``
        # Set: the server also answers as LM Studio does (/api/v1/models), declaring these reasoning levels.
        self.reasoning_options: tuple[str, ...] = ()
        # Declared able to see images the way a local Ollama does (``/api/tags``, ``/api/show``
        # capabilities), which the agent reads; with none the fake answers neither.
        self.vision_models = tuple(vision_models)
        self.default_reply = default_reply
        self.default_summary = default_summary
        self.hang_timeout = hang_timeout
        # Set: each request's log entry names the process that sent it (``caller_pid``), found by the
        # client's port; tests that check which process calls the model switch it on (a scan of /proc).
        self.record_callers = False
        self._lock = threading.Condition()
        self._replies: deque[Reply] = deque()
        self._summaries: deque[Reply] = deque()
        self._log: list[dict] = []
        self._release_generation = 0
        self._hanging = 0
        self._seq = 0
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> FakeLLM:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------
    def script(self, *items: Reply | str | dict) -> None:
        with self._lock:
            self._replies.extend(Reply.coerce(i) for i in items)

    def script_summary(self, *items: Reply | str | dict) -> None:
        with self._lock:
            self._summaries.extend(Reply.coerce(i) for i in items)

    def reset(self) -> None:
        """Empty both queues and the request log (and free any hung response)."""
        with self._lock:
            self._replies.clear()
            self._summaries.clear()
            self._log.clear()
        self.release()

    @contextlib.contextmanager
    def fresh(self) -> Iterator[FakeLLM]:
        """The fake for one test: emptied before it, and whatever it left hanging released after it."""
        self.reset()
        try:
            yield self
        finally:
            self.release()

    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def release(self) -> None:
        """Let every response currently blocked by ``hang_after`` continue."""
        with self._lock:
            self._release_generation += 1
            self._lock.notify_all()

    def wait_for_hang(self, timeout: float = 30.0) -> bool:
        """Block until some response is hanging (the client has its first tokens); the default deadline allows
        for a first turn that starts its worker on a loaded machine."""
        with self._lock:
            return self._lock.wait_for(lambda: self._hanging > 0, timeout)

    # -- the request log ---------------------------------------------------------------------
    def requests(self, path: str | None = None, kind: str | None = None) -> list[dict]:
        with self._lock:
            return [
                dict(r)
                for r in self._log
                if (path is None or r["path"] == path) and (kind is None or r["kind"] == kind)
            ]

    def chat_requests(self) -> list[dict]:
        return self.requests(kind="chat")

    def summary_requests(self) -> list[dict]:
        return self.requests(kind="summary")

    def state(self) -> dict:
        with self._lock:
            return {
                "queued": len(self._replies),
                "queued_summaries": len(self._summaries),
                "hanging": self._hanging,
                "request_count": len(self._log),
            }

    # -- used by the handler -----------------------------------------------------------------
    def _record(
        self, method: str, path: str, headers: dict, body: Any, client_port: int | None = None
    ) -> dict:
        if path == "/v1/chat/completions" and method == "POST" and not isinstance(body, dict):
            # A body that never arrived whole: its sender died mid-request (a server a test just stopped), so
            # it is no request of the test now running.
            kind = "broken"
        elif path == "/v1/chat/completions" and method == "POST":
            kind = "summary" if is_summary_request(body) else "title" if is_title_request(body) else "chat"
        elif path.startswith("/v1/models"):
            kind = "models"
        else:
            kind = "other"
        entry = {
            "method": method,
            "path": path,
            "headers": headers,
            "body": body,
            "kind": kind,
            "time": time.time(),
        }
        if self.record_callers and client_port is not None:
            entry["caller_pid"] = socket_owner(client_port)
        with self._lock:
            self._log.append(entry)
        return entry

    def _next_reply(self, kind: str, body: dict) -> Reply:
        if kind == "title":
            return title_reply(body)  # never takes a scripted reply meant for a turn
        with self._lock:
            queue = self._summaries if kind == "summary" else self._replies
            if queue and queue[0].for_user in (None, last_user_text(body)):
                return queue.popleft()
        if kind == "summary":
            return Reply(text=self.default_summary)
        return Reply.coerce(self.default_reply(body))

    def _next_id(self) -> str:
        with self._lock:
            self._seq += 1
            return f"chatcmpl-fake-{self._seq}"

    def _hang(self, still_connected: Callable[[], bool]) -> None:
        with self._lock:
            generation = self._release_generation
            self._hanging += 1
            self._lock.notify_all()
        deadline = time.monotonic() + self.hang_timeout
        try:
            while time.monotonic() < deadline:
                with self._lock:
                    if self._lock.wait_for(lambda: self._release_generation != generation, _PING_INTERVAL):
                        return
                if not still_connected():
                    return
        finally:
            with self._lock:
                self._hanging -= 1

    def _apply_control(self, path: str, body: Any) -> tuple[int, dict]:
        if path == "/_control/script":
            if isinstance(body, list):
                body = {"replies": body}
            if not isinstance(body, dict):
                return 400, {"error": "expected a list or {replies, summaries, reset}"}
            if body.get("reset"):
                self.reset()
            self.script(*(body.get("replies") or []))
            self.script_summary(*(body.get("summaries") or []))
            return 200, self.state()
        if path == "/_control/release":
            self.release()
            return 200, self.state()
        if path == "/_control/reset":
            self.reset()
            return 200, self.state()
        if path == "/_control/config" and isinstance(body, dict):
            self.context_length = int(body.get("context_length", self.context_length))
            self.model = str(body.get("model", self.model))
            self.extra_models = tuple(str(m) for m in body.get("extra_models", self.extra_models))
            return 200, {"context_length": self.context_length, "model": self.model}
        return 404, {"error": "unknown control path"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 makes bursts of connections wait for SYN retries


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeLLM/1"

    def log_message(self, format, *args):  # silence the default stderr access log
        pass

    @property
    def fake(self) -> FakeLLM:
        return self.server.fake  # type: ignore[attr-defined]

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/_control/requests":
            return self._send_json(200, {"requests": self.fake.requests()})
        if path == "/_control/state":
            return self._send_json(200, self.fake.state())
        self.fake._record("GET", path, dict(self.headers.items()), None, self.client_address[1])
        fake = self.fake
        card = {
            "id": fake.model,
            "object": "model",
            "owned_by": "fake",
            "context_length": fake.context_length,
        }
        if path == "/v1/models":
            cards = [card] + [{**card, "id": name} for name in fake.extra_models]
            return self._send_json(200, {"object": "list", "data": cards})
        if path == "/api/v1/models" and fake.reasoning_options:
            reasoning = {"allowed_options": list(fake.reasoning_options)}
            lm_card = {"key": fake.model, "type": "llm", "capabilities": {"reasoning": reasoning}}
            return self._send_json(200, {"models": [lm_card]})
        if path.startswith("/v1/models/"):
            return self._send_json(200, {**card, "id": path[len("/v1/models/") :]})
        if path == "/api/tags" and fake.vision_models:
            names = [fake.model, *fake.extra_models]
            return self._send_json(200, {"models": [{"name": name, "model": name} for name in names]})
        self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def _show(self, body: Any) -> None:
        """Ollama's ``/api/show``: the model's capabilities (``vision`` for the declared ones)."""
        name = body.get("name") or body.get("model") if isinstance(body, dict) else None
        vision = isinstance(name, str) and name in self.fake.vision_models
        self._send_json(200, {"capabilities": ["completion", "tools"] + (["vision"] if vision else [])})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        body = self._read_body()
        if path.startswith("/_control/"):
            status, payload = self.fake._apply_control(path, body)
            return self._send_json(status, payload)
        entry = self.fake._record("POST", path, dict(self.headers.items()), body, self.client_address[1])
        if path == "/api/show" and self.fake.vision_models:
            return self._show(body)
        if path != "/v1/chat/completions" or not isinstance(body, dict):
            return self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
        reply = self.fake._next_reply(entry["kind"], body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status:
            kind = _ERROR_TYPES.get(
                reply.status, "server_error" if reply.status >= 500 else "invalid_request_error"
            )
            err = {"message": reply.error, "type": kind, "code": reply.status}
            return self._send_json(reply.status, {"error": err})
        with contextlib.suppress(OSError):  # the client went away (an interrupted turn)
            if body.get("stream"):
                self._stream(body, reply)
            else:
                self._send_json(200, self._completion(body, reply))

    def _completion(self, body: dict, reply: Reply) -> dict:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = _tool_call_list(reply)
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return {
            "id": self.fake._next_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.fake.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(body, reply),
        }

    def _stream(self, body: dict, reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        chunk_id, created, model = (
            self.fake._next_id(),
            int(time.time()),
            body.get("model") or self.fake.model,
        )

        def emit(delta: dict | None, finish: str | None = None, usage: dict | None = None) -> None:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
            }
            if usage is not None:
                chunk["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        emit({"role": "assistant", "content": ""})
        pieces = [("reasoning_content", p) for p in split_tokens(reply.reasoning)]
        pieces += [("content", p) for p in split_tokens(reply.text)]
        for i, (key, piece) in enumerate(pieces):
            if reply.hang_after is not None and i == reply.hang_after:
                self.fake._hang(self._still_connected)
            if i and reply.token_delay:
                time.sleep(reply.token_delay)
            emit({key: piece})
        if reply.hang_after is not None and reply.hang_after >= len(pieces):
            self.fake._hang(self._still_connected)
        for index, call in enumerate(_tool_call_list(reply)):
            name = call["function"]["name"]
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            emit({"tool_calls": [head]})
            args = call["function"]["arguments"]
            for start in range(0, len(args), 16):
                emit({"tool_calls": [{"index": index, "function": {"arguments": args[start : start + 16]}}]})
        emit({}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            emit(None, usage=_usage(body, reply))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _still_connected(self) -> bool:
        # An SSE comment line is ignored by clients; writing it is how a dropped client shows up.
        try:
            self.wfile.write(b": ping\n\n")
            self.wfile.flush()
            return True
        except OSError:
            return False
