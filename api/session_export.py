"""Session export (HTTP-free): the session file as JSON, a Markdown transcript, a standalone HTML page.

The HTML page carries its own CSS and the server-rendered, sanitized message HTML (``api.render``), and
a Content-Security-Policy meta tag so that, opened from disk, it can load nothing and run nothing.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import re
from typing import Any

from api import models
from api.errors import BadRequest, NotFound
from api.session_admin import agent_session, load_session
from api.session_fields import message_text, message_timestamp

FORMATS = {
    "json": "application/json; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
}
TOOL_TEXT_MAX = 20_000
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
    return text if len(text) <= TOOL_TEXT_MAX else text[:TOOL_TEXT_MAX] + f"\n… ({len(text) - TOOL_TEXT_MAX} more characters)"


def _tool_calls(msg: dict) -> list[tuple[str, str]]:
    """(name, arguments text) of each tool call an assistant message declares."""
    out = []
    calls = msg.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        name = fn.get("name") if isinstance(fn.get("name"), str) else "tool"
        args = fn.get("arguments", "")
        out.append((name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, indent=2, default=str)))
    return out


def _role_label(msg: dict) -> str:
    role = msg.get("role")
    if role == "tool":
        name = msg.get("name")
        return f"Tool result ({name})" if isinstance(name, str) and name else "Tool result"
    return str(role).capitalize() if isinstance(role, str) and role else "Message"


def _export_source(sid: str) -> dict:
    """The session file payload (Talaria session) or the read-only agent session."""
    try:
        return load_session(sid).to_payload()
    except NotFound:
        agent = agent_session(sid)
        if agent is None:
            raise
        return agent


def to_markdown(payload: dict) -> str:
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
        when = _when(message_timestamp(msg))
        lines.append(f"## {_role_label(msg)}" + (f" · {when}" if when else ""))
        lines.append("")
        text = message_text(msg)
        if msg.get("role") == "tool":
            if text:
                lines += [_fence(_clip(text)), ""]
        elif text.strip():
            lines += [text.strip(), ""]
        for name, args in _tool_calls(msg):
            lines += [f"**Tool call: {name}**", "", _fence(_clip(args), "json"), ""]
    return "\n".join(lines).rstrip() + "\n"


def _message_html(msg: dict) -> str:
    from api.render import render_markdown

    role = msg.get("role")
    css_role = role if role in ("user", "assistant", "system", "tool") else "other"
    when = _when(message_timestamp(msg))
    header = html.escape(_role_label(msg) + (f" · {when}" if when else ""))
    text = message_text(msg)
    if role == "tool":
        body = f"<details><summary>Output</summary><pre>{html.escape(_clip(text))}</pre></details>" if text else ""
    else:
        body = render_markdown(text) if text.strip() else ""
    for name, args in _tool_calls(msg):
        body += f"<details><summary>Tool call: {html.escape(name)}</summary><pre>{html.escape(_clip(args))}</pre></details>"
    return f'<article class="{css_role}"><header>{header}</header><div class="body">{body}</div></article>'


def to_html(payload: dict) -> str:
    from api.render import pygments_css

    title = html.escape(str(payload.get("title") or "Untitled"))
    meta = " · ".join(
        html.escape(str(v)) for v in (payload.get("model"), _when(payload.get("created_at")), payload.get("session_id")) if v
    )
    articles = "\n".join(_message_html(m) for m in payload.get("messages") or [] if isinstance(m, dict))
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{title}</title>\n<style>{PAGE_CSS}{pygments_css()}</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{title}</h1>\n<p class=\"meta\">{meta}</p>\n{articles}\n</main>\n</body>\n</html>\n"
    )


def export_session(sid: str, fmt: Any) -> tuple[bytes, str, str]:
    """``(body, content_type, filename)`` of a session in ``json``, ``md`` or ``html``."""
    if fmt not in FORMATS:
        raise BadRequest("format must be json, md or html")
    payload = _export_source(sid)
    if fmt == "json":
        body = models.dumps_session_json(payload)
    elif fmt == "md":
        body = to_markdown(payload).encode("utf-8", "replace")
    else:
        body = to_html(payload).encode("utf-8", "replace")
    return body, FORMATS[fmt], f"talaria-{sid}.{fmt}"
