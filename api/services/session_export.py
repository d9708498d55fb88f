"""Session export and import (HTTP-free).

Export: the session file as JSON, a Markdown transcript, or a standalone HTML page. Import: an exported
(or saved ``GET /api/session``) JSON object becomes a NEW session under a fresh safe id, keeping only a
typed subset of its fields; paths, ids and live-turn state are dropped, so nothing in the file can steer a
write outside the session folder.

The HTML page carries its own CSS and the server-rendered, sanitized message HTML (``api.services.render``), and
a Content-Security-Policy meta tag so that, opened from disk, it can load nothing and run nothing.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re
import time
from typing import Any

import orjson

from api.agent.agent_sessions import agent_session
from api.rules import jsonio
from api.rules.errors import BadRequest, NotFound, PayloadTooLarge
from api.rules.messages import message_time
from api.rules.sanitize import scrub_surrogates
from api.rules.session_fields import message_text, new_session_id
from api.services import workspace as _workspace
from api.services.render import pygments_css, render_markdown
from api.services.session_catalogue import TITLE_MAX
from api.store import models, session_edit
from api.store.session_lookup import load_session

FORMATS = {
    "json": "application/json; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
}
TOOL_TEXT_MAX = 20_000
SHORT_VALUE_MAX = 120  # a longer string argument or result field gets a block of its own
IMPORT_MAX_MESSAGES = 100_000
_BACKTICKS = re.compile(r"`+")

PAGE_CSS = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fbfbfa; --muted: #6b6b70; --card: #ffffff; --line: #e3e3e0; --accent: #5b4bdb; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8ea; --bg: #161618; --muted: #9a9aa2; --card: #1f1f23; --line: #303036; --accent: #a79bff; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 16px/1.6 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 52rem; margin: 0 auto; padding: 2rem 1.25rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
.meta { color: var(--muted); font-size: .875rem; margin: 0 0 2rem; }
article { background: var(--card); border: 1px solid var(--line); border-radius: .75rem; padding: .75rem 1rem; margin: 0 0 1rem; }
article.user { border-left: 3px solid var(--accent); }
article > header { color: var(--muted); font-size: .8rem; font-weight: 600; text-transform: uppercase; letter-spacing: .04em; margin-bottom: .25rem; }
article .body > :first-child { margin-top: 0; } article .body > :last-child { margin-bottom: 0; }
pre { overflow-x: auto; padding: .75rem; border-radius: .5rem; background: rgba(127,127,127,.1); font-size: .875rem; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
details { margin: .5rem 0; } summary { cursor: pointer; color: var(--muted); font-size: .875rem; }
table { border-collapse: collapse; } th, td { border: 1px solid var(--line); padding: .25rem .5rem; }
a { color: var(--accent); }
"""
PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _when(ts: Any) -> str:
    try:
        return _dt.datetime.fromtimestamp(float(ts), tz=_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _clip(text: str) -> str:
    return (
        text
        if len(text) <= TOOL_TEXT_MAX
        else text[:TOOL_TEXT_MAX] + f"\n… ({len(text) - TOOL_TEXT_MAX} more characters)"
    )


def _inline_code(text: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _readable_tool_text(text: str) -> list[str]:
    """A tool call's arguments or a tool's result as Markdown a person reads: a JSON object field by field
    (short values inline, text with lines as its own block, nested data as indented JSON), else a block."""
    try:
        data = json.loads(text)
    except ValueError:
        return [_fence(_clip(text)), ""]
    if not isinstance(data, dict) or not data:
        return [_fence(_clip(json.dumps(data, ensure_ascii=False, indent=2)), "json"), ""]
    lines: list[str] = []
    for key, value in data.items():
        if isinstance(value, str) and ("\n" in value or len(value) > SHORT_VALUE_MAX):
            lines += [f"- {key}:", "", _fence(_clip(value)), ""]
        elif isinstance(value, (dict, list)) and value:
            lines += [
                f"- {key}:",
                "",
                _fence(_clip(json.dumps(value, ensure_ascii=False, indent=2)), "json"),
                "",
            ]
        else:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"- {key}: {_inline_code(shown)}")
    return [*lines, ""] if lines[-1] else lines


def _tool_calls(msg: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, arguments text) of each tool call an assistant message declares."""
    out = []
    calls = msg.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        fn: dict[str, Any] = function if isinstance(function, dict) else call
        found = fn.get("name")
        name = found if isinstance(found, str) else "tool"
        args = fn.get("arguments", "")
        out.append(
            (
                name,
                args
                if isinstance(args, str)
                else json.dumps(args, ensure_ascii=False, indent=2, default=str),
            )
        )
    return out


def _role_label(msg: dict[str, Any]) -> str:
    role = msg.get("role")
    if role == "tool":
        name = msg.get("name")
        return f"Tool result ({name})" if isinstance(name, str) and name else "Tool result"
    return str(role).capitalize() if isinstance(role, str) and role else "Message"


def _export_source(sid: str, store: models.Store | None) -> dict[str, Any]:
    """The session file payload (Talaria session) or the read-only agent session."""
    try:
        return load_session(sid, store=store).to_payload()
    except NotFound:
        agent = agent_session(sid, store=store)
        if agent is None:
            raise
        return agent


def to_markdown(payload: dict[str, Any]) -> str:
    title = str(payload.get("title") or "Untitled")
    lines = [f"# {title}", ""]
    for label, value in (
        ("Session", payload.get("session_id")),
        ("Model", payload.get("model")),
        ("Created", _when(payload.get("created_at"))),
    ):
        if value:
            lines.append(f"- {label}: {value}")
    lines += ["", "---", ""]
    for msg in payload.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        when = _when(message_time(msg))
        lines.append(f"## {_role_label(msg)}" + (f" · {when}" if when else ""))
        lines.append("")
        text = message_text(msg)
        if msg.get("role") == "tool":
            if text:
                lines += _readable_tool_text(text)
        elif text.strip():
            lines += [text.strip(), ""]
        for name, args in _tool_calls(msg):
            lines += [f"**Tool call: {name}**", ""]
            if args.strip():
                lines += _readable_tool_text(args)
    return "\n".join(lines).rstrip() + "\n"


def _message_html(msg: dict[str, Any]) -> str:
    role = msg.get("role")
    css_role = role if role in ("user", "assistant", "system", "tool") else "other"
    when = _when(message_time(msg))
    header = html.escape(_role_label(msg) + (f" · {when}" if when else ""))
    text = message_text(msg)
    if role == "tool":
        body = (
            f"<details><summary>Output</summary><pre>{html.escape(_clip(text))}</pre></details>"
            if text
            else ""
        )
    else:
        body = render_markdown(text) if text.strip() else ""
    for name, args in _tool_calls(msg):
        body += f"<details><summary>Tool call: {html.escape(name)}</summary><pre>{html.escape(_clip(args))}</pre></details>"
    return f'<article class="{css_role}"><header>{header}</header><div class="body">{body}</div></article>'


def to_html(payload: dict[str, Any]) -> str:
    title = html.escape(str(payload.get("title") or "Untitled"))
    meta = " · ".join(
        html.escape(str(v))
        for v in (payload.get("model"), _when(payload.get("created_at")), payload.get("session_id"))
        if v
    )
    articles = "\n".join(_message_html(m) for m in payload.get("messages") or [] if isinstance(m, dict))
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{title}</title>\n<style>{PAGE_CSS}{pygments_css()}</style>\n</head>\n<body>\n<main>\n"
        f'<h1>{title}</h1>\n<p class="meta">{meta}</p>\n{articles}\n</main>\n</body>\n</html>\n'
    )


def export_session(sid: str, fmt: Any, *, store: models.Store | None = None) -> tuple[bytes, str, str]:
    """``(body, content_type, filename)`` of a session in ``json``, ``md`` or ``html``."""
    if fmt not in FORMATS:
        raise BadRequest("format must be json, md or html")
    payload = _export_source(sid, store)
    if fmt == "json":
        body = jsonio.dumps_document(payload)
    elif fmt == "md":
        body = to_markdown(payload).encode("utf-8", "replace")
    else:
        body = to_html(payload).encode("utf-8", "replace")
    return body, FORMATS[fmt], f"talaria-{sid}.{fmt}"


# ---------------------------------------------------------------------- import

_IMPORT_STR = {
    "title": TITLE_MAX, "model": TITLE_MAX, "model_provider": 100, "personality": TITLE_MAX, "profile": TITLE_MAX,
    "compression_anchor_summary": 20_000, "compression_anchor_mode": 40, "compression_generation": 64,
    "clear_generation": 64, "intentional_shrink_generation": 64,
}  # fmt: skip
_IMPORT_INT = (
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "context_length",
    "threshold_tokens", "last_prompt_tokens", "compression_anchor_visible_idx",
)  # fmt: skip
_IMPORT_FLOAT = ("created_at", "updated_at", "truncation_watermark", "truncation_boundary", "estimated_cost")
_IMPORT_BOOL = ("pinned", "archived", "manual_title", "llm_title_generated")
# Keys the GET answer adds to each message; an imported GET answer is stored without them.
_DISPLAY_KEYS = ("html", "_idx")


def _valid_messages(value: Any, field: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BadRequest(f"Import must be a JSON object with a '{field}' list")
    if len(value) > IMPORT_MAX_MESSAGES:
        raise PayloadTooLarge(f"Too many messages to import (at most {IMPORT_MAX_MESSAGES})")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"{field}[{i}] must be an object with a string 'role'")
        out.append({k: v for k, v in msg.items() if k not in _DISPLAY_KEYS})
    return out


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def import_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The safe, typed subset of an imported session; paths, ids and live-turn state are dropped."""
    clean: dict[str, Any] = {"messages": _valid_messages(data.get("messages"), "messages")}
    for name, limit in _IMPORT_STR.items():
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            clean[name] = " ".join(value.split())[:limit] if name == "title" else value[:limit]
    for name in _IMPORT_INT:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53:
            clean[name] = value
    for name in _IMPORT_FLOAT:
        value = _finite(data.get(name))
        if value is not None:
            clean[name] = value
    for name in _IMPORT_BOOL:
        if isinstance(data.get(name), bool):
            clean[name] = data[name]
    key = data.get("compression_anchor_message_key")
    if isinstance(key, dict) and len(orjson.dumps(key, default=str)) < 4096:
        clean["compression_anchor_message_key"] = key
    calls = data.get("tool_calls")
    if isinstance(calls, list) and all(isinstance(c, dict) for c in calls):
        clean["tool_calls"] = calls
    context = data.get("context_messages")
    if isinstance(context, list) and context:
        clean["context_messages"] = _valid_messages(context, "context_messages")
    clean.setdefault("title", "Imported session")
    return clean


def import_session(data: Any, *, store: models.Store | None = None) -> dict[str, Any]:
    """Store an exported session under a NEW safe id in the session folder; returns its row."""
    if not isinstance(data, dict):
        raise BadRequest("Import must be a JSON object")
    if "messages" not in data and isinstance(data.get("session"), dict):
        data = data["session"]  # a saved GET /api/session answer
    fields = import_fields(scrub_surrogates(data))
    now = time.time()
    fields.setdefault("created_at", now)
    fields.setdefault("updated_at", now)
    session = models.Session(session_id=new_session_id(), workspace=_workspace.default(), **fields)
    session_edit.create(session, touch_updated_at=False, store=store)
    return session.compact()
