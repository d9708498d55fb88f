"""Markdown rendering: hostile input stays inert, code is highlighted, tables and messages render."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.services.render import (
    ALLOWED_TAGS,
    HIGHLIGHT_MAX_CHARS,
    MARKDOWN_MAX_BRACKETS,
    MARKDOWN_MAX_CHARS,
    MATHML_ATTRIBUTES,
    MATHML_TAGS,
    pygments_css,
    render_cache_info,
    render_markdown,
    render_message,
    sanitize_html,
)

SAFE_SCHEMES = ("http://", "https://", "mailto:")
CLASS_TAGS = {"code", "span", "pre", "div", "li", "ul"}
EXPECTED_ATTRIBUTES = {
    "a": {"href", "title", "rel", "target"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
    **{tag: {"class"} for tag in CLASS_TAGS},
    "img": {"alt", "title", "data-media"},
    "input": {"type", "checked", "disabled", "class"},
    **{tag: set(MATHML_ATTRIBUTES) for tag in MATHML_TAGS},
}


class _Collector(HTMLParser):
    """Parses rendered HTML into (tag, attrs) pairs and the visible text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector


def assert_inert(html: str) -> _Collector:
    doc = parse(html)
    for tag, attrs in doc.elements:
        assert tag in ALLOWED_TAGS, (tag, html)
        assert set(attrs) <= EXPECTED_ATTRIBUTES.get(tag, set()), (tag, attrs, html)
        for name, value in attrs.items():
            assert not name.lower().startswith("on"), (tag, name, html)
            assert name.lower() != "style", (tag, html)
            if name == "href":
                assert (value or "").lower().startswith(SAFE_SCHEMES), (value, html)
            if name == "class":
                assert tag in CLASS_TAGS | {"input"}, (tag, html)
            if name == "type":
                assert value == "checkbox", (tag, html)
            if name == "rel":
                assert value == "noopener noreferrer nofollow"
            if name == "target":
                assert value == "_blank"
    assert "<script" not in html.lower()
    return doc


HOSTILE = [
    "<script>alert(1)</script>",
    "before <script>alert(1)</script> after",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](&#x6A;&#x61;vascript:alert(1))",
    "[click](java&#x09;script:alert(1))",
    "[click](%6Aavascript:alert(1))",
    "[click]( javascript:alert(1) )",
    "<javascript:alert(1)>",
    "[click][ref]\n\n[ref]: javascript:alert(1)",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "[click](file:///etc/passwd)",
    "[click](data:image/png;base64,iVBORw0KGgo=)",
    "![x](data:image/png;base64,iVBORw0KGgo=)",
    "![x](javascript:alert(1))",
    "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    '![<img src=x onerror=alert(1)>](https://example.com/a.png "t\\" onload=\\"x")',
    '[a](https://example.com "title\\" onclick=\\"alert(1)")',
    "<img src=x onerror=alert(1)>",
    "<a href='#' onclick='alert(1)'>x</a>",
    "<div onmouseover=alert(1)>hover</div>",
    "<div>\n<script>alert(1)</script>\n</div>",
    "inline <b onclick=alert(1)>bold</b> html",
    "<iframe src='https://evil.example'></iframe>",
    "<style>body { display: none }</style>",
    "<svg><script>alert(1)</script></svg>",
    "<svg onload=alert(1)>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<form action='https://evil.example'><input name=x><button>go</button></form>",
    "<object data='x.swf'></object><embed src='x.swf'>",
    "<meta http-equiv=refresh content='0;url=https://evil.example'>",
    "<base href='https://evil.example/'>",
    "<!-- <script>alert(1)</script> -->",
    '```"><script>alert(1)</script>\nx\n```',
    "```python onclick=alert(1)\nprint(1)\n```",
    "```html\n<script>alert(1)</script>\n```",
    "    <script>alert(1)</script>",
    "`<script>alert(1)</script>`",
    "| a | b |\n|---|---|\n| <script>alert(1)</script> | [x](javascript:alert(1)) |",
    "> <iframe src=x>\n> [q](JAVASCRIPT:alert(1))",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_markdown_renders_inert(text):
    assert_inert(render_markdown(text))


RAW_HTML = [
    '<p onclick="alert(1)" style="color:red">x</p><img src="https://example.com/x.png" onerror="alert(1)">',
    '<a href="javascript:alert(1)" onmouseover="x">a</a><a href="data:image/png;base64,AA">b</a>',
    '<a href="vbscript:x">a</a><a href="/relative">b</a><a href="https://ok.example" target="_top" rel="opener">c</a>',
    "<iframe src=https://evil.example></iframe><frame><object data=x><embed src=x><form><input><button>",
    "<style>*{}</style><script>alert(1)</script><svg><script>alert(1)</script><circle onload=x /></svg>",
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math><base href=//evil.example><meta charset=x><link rel=stylesheet href=x>",
    '<span class="k" id="x" data-x="1">k</span><table class="t"><tr><td style="x" align="left">1</td></tr></table>',
]


@pytest.mark.parametrize("html", RAW_HTML)
def test_sanitizer_alone_strips_what_the_allow_list_does_not_name(html):
    assert_inert(sanitize_html(html))


@pytest.mark.parametrize("tag", sorted(ALLOWED_TAGS))
def test_every_allowed_tag_loses_attributes_it_does_not_need(tag):
    attrs = 'id="i" onclick="x" onerror="x" style="color:red" class="c" href="javascript:x" src="x" name="n" data-x="1"'
    assert_inert(sanitize_html(f"<{tag} {attrs}>x</{tag}>"))


def test_sanitizer_keeps_allowed_markup():
    doc = assert_inert(
        sanitize_html(
            '<pre class="highlight"><code class="language-py"><span class="k">x</span></code></pre>'
        )
    )
    assert doc.elements == [
        ("pre", {"class": "highlight"}),
        ("code", {"class": "language-py"}),
        ("span", {"class": "k"}),
    ]


def test_raw_html_is_shown_as_text_not_markup():
    doc = assert_inert(render_markdown("hello <script>alert(1)</script> <b>x</b>"))
    shown = "".join(doc.text)
    assert "<script>alert(1)</script>" in shown
    assert "<b>x</b>" in shown
    assert [tag for tag, _ in doc.elements] == ["p"]


def test_scripted_link_keeps_no_href():
    for text in ("[click](javascript:alert(1))", "[click](JaVaScRiPt:alert(1))", "[c](data:text/html,x)"):
        doc = assert_inert(render_markdown(text))
        assert all("href" not in attrs for _, attrs in doc.elements), text


def test_safe_links_are_kept_with_rel_and_new_tab():
    doc = assert_inert(render_markdown("[site](https://example.com/a?b=1) and [mail](mailto:a@b.example)"))
    links = [attrs for tag, attrs in doc.elements if tag == "a"]
    assert [link["href"] for link in links] == ["https://example.com/a?b=1", "mailto:a@b.example"]
    assert all(link["rel"] == "noopener noreferrer nofollow" and link["target"] == "_blank" for link in links)


def test_relative_links_lose_their_href():
    doc = assert_inert(render_markdown("[a](/api/session/delete) [b](../x) [c](#top)"))
    assert all("href" not in attrs for _, attrs in doc.elements)


def test_images_become_links_and_never_load():
    doc = assert_inert(render_markdown('![a cat](https://example.com/cat.png "Cat")'))
    assert [tag for tag, _ in doc.elements] == ["p", "a"]
    link = doc.elements[1][1]
    assert link["href"] == "https://example.com/cat.png"
    assert link["title"] == "Cat"
    assert "a cat" in "".join(doc.text)


def test_fenced_code_is_highlighted_with_pygments_spans():
    html = render_markdown("```python\ndef f(x):\n    return x + 1\n```")
    doc = assert_inert(html)
    assert doc.elements[0] == ("pre", {"class": "highlight"})
    assert doc.elements[1] == ("code", {"class": "language-python"})
    span_classes = {attrs.get("class") for tag, attrs in doc.elements if tag == "span"}
    assert "k" in span_classes  # keyword
    assert "nf" in span_classes  # function name
    assert "def f(x):\n    return x + 1" in "".join(doc.text)


def test_unknown_language_is_escaped_plain_text():
    doc = assert_inert(render_markdown("```no-such-lang\n<b>bold?</b> & more\n```"))
    assert [tag for tag, _ in doc.elements] == ["pre", "code"]
    assert "<b>bold?</b> & more" in "".join(doc.text)


def test_oversized_code_block_is_not_highlighted():
    body = "x = 1\n" * (HIGHLIGHT_MAX_CHARS // 6 + 10)
    doc = assert_inert(render_markdown(f"```python\n{body}```"))
    assert [tag for tag, _ in doc.elements] == ["pre", "code"]
    assert "".join(doc.text).count("x = 1") == body.count("x = 1")


@pytest.mark.parametrize(
    "text",
    [
        "word " * 250_000,
        "[" * 1_100_000,
        "![" * 550_000,
        ">" * 1_100_000,
        "<script>" * 140_000,
        "| a |\n|---|\n" + "| x |\n" * 200_000,
    ],
    ids=["words", "brackets", "images", "quotes", "scripts", "table-rows"],
)
def test_megabyte_input_is_shown_whole_as_escaped_plain_text(text):
    assert len(text) > MARKDOWN_MAX_CHARS
    doc = assert_inert(render_markdown(text))
    assert doc.elements == [("pre", {"class": "plain-text"}), ("code", {})]
    assert "".join(doc.text) == text + "\n"  # the newline after </pre>


def test_text_at_the_markdown_limit_still_renders_markdown():
    text = "**bold** " + "a" * (MARKDOWN_MAX_CHARS - 9)
    assert len(text) == MARKDOWN_MAX_CHARS
    doc = assert_inert(render_markdown(text))
    assert [tag for tag, _ in doc.elements] == ["p", "strong"]


def test_bracket_flood_is_shown_as_plain_text():
    text = "[" * (MARKDOWN_MAX_BRACKETS + 1)
    assert len(text) < MARKDOWN_MAX_CHARS
    doc = assert_inert(render_markdown(text))
    assert doc.elements == [("pre", {"class": "plain-text"}), ("code", {})]


def test_lone_surrogates_do_not_break_rendering():
    doc = assert_inert(render_markdown("a \ud800 **b**"))
    assert [tag for tag, _ in doc.elements] == ["p", "strong"]
    big = assert_inert(render_markdown("\udfff" * (MARKDOWN_MAX_CHARS + 1)))
    assert big.elements[0] == ("pre", {"class": "plain-text"})


def test_tables_render_with_alignment_but_no_style():
    doc = assert_inert(render_markdown("| left | mid | right |\n|:--|:-:|--:|\n| 1 | 2 | 3 |"))
    tags = [tag for tag, _ in doc.elements]
    assert tags[:3] == ["table", "thead", "tr"]
    assert tags.count("th") == 3 and tags.count("td") == 3
    aligns = [attrs.get("align") for tag, attrs in doc.elements if tag == "td"]
    assert aligns == ["left", "center", "right"]


def test_strikethrough_and_emphasis_render():
    doc = assert_inert(render_markdown("~~gone~~ **bold** *it*"))
    assert [tag for tag, _ in doc.elements] == ["p", "s", "strong", "em"]


def test_repeated_text_comes_from_the_cache():
    text = "cache me: **please**"
    before = render_cache_info()["hits"]
    first = render_markdown(text)
    assert render_markdown(text) is first
    assert render_cache_info()["hits"] == before + 1


def test_cache_stays_within_its_entry_and_character_bounds(monkeypatch):
    import api.services.render as render

    small = render._RenderCache(max_entries=3, max_chars=1_000)
    monkeypatch.setattr(render, "_CACHE", small)
    for i in range(10):
        render_markdown(f"entry {i}")
    assert render_cache_info()["entries"] == 3
    render_markdown("y" * 600)
    info = render_cache_info()
    assert info["chars"] <= 1_000
    render_markdown("z" * 2_000)  # larger than the whole budget: rendered, not kept
    assert render_cache_info()["chars"] == info["chars"]


def test_render_message_handles_string_and_text_parts():
    assert render_message({"role": "user", "content": "*hi*"}) == {"html": "<p><em>hi</em></p>\n"}
    parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": "first"},
            {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
            {"type": "input_text", "text": "second"},
        ],
    }
    assert render_message(parts) == {"html": "<p>first</p>\n<p>second</p>\n"}


def test_render_message_returns_none_without_text():
    assert render_message({"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}) is None
    assert render_message({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}) is None
    assert render_message({"role": "user"}) is None
    assert render_message({"role": "user", "content": {"text": "not a list"}}) is None
    assert render_message("not a dict") is None


def test_pygments_css_has_light_rules_and_dark_media_block():
    css = pygments_css()
    light, _, dark = css.partition("@media (prefers-color-scheme: dark)")
    assert ".highlight .k " in light
    assert ".highlight .k " in dark
    assert "#272822" in dark  # monokai background
    assert "#272822" not in light


_FRAGMENTS = st.sampled_from(
    [
        "<script>", "</script>", "<img src=x onerror=alert(1)>", "javascript:", "JaVaScRiPt:", "&#106;",
        "[", "]", "(", ")", "![", "<", ">", "`", "```", "\n", " onclick=", '"', "'", "<svg onload=x>",
        "<iframe>", "<style>", "data:text/html,", "|", "---", "*", "_", "~~", "&", "#", "\\",
        "https://example.com", "<a href=", "```python\n", "```x\" onload=\"y\n",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=20)), max_size=40).map("".join))
def test_arbitrary_text_never_renders_script_or_handlers(text):
    html = render_markdown(text)
    assert isinstance(html, str)
    assert_inert(html)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_unicode_text_renders_without_raising(text):
    assert_inert(render_markdown(text))


def test_math_becomes_mathml_and_bad_latex_stays_readable():
    html = render_markdown("Inline $x^2$ and\n\n$$\\frac{a}{b}$$\n\nand $\\frac{$ broken")
    doc = assert_inert(html)
    tags = [tag for tag, _ in doc.elements]
    assert tags.count("math") == 2 and "mfrac" in tags and "msup" in tags
    assert "$" not in "".join(doc.text[:2])


def test_task_lists_render_as_disabled_checkboxes():
    doc = assert_inert(render_markdown("- [x] written\n- [ ] tested"))
    boxes = [attrs for tag, attrs in doc.elements if tag == "input"]
    assert len(boxes) == 2
    assert all(b["type"] == "checkbox" and "disabled" in b for b in boxes)
    assert "checked" in boxes[0] and "checked" not in boxes[1]


def test_bare_urls_become_safe_links():
    doc = assert_inert(render_markdown("see https://example.com/docs now"))
    assert (
        "a",
        {"href": "https://example.com/docs", "target": "_blank", "rel": "noopener noreferrer nofollow"},
    ) in doc.elements


def test_a_relative_image_names_its_workspace_file_and_loads_nothing_by_itself():
    doc = assert_inert(render_markdown('![chart](out/chart.png "The chart")'))
    assert doc.elements[-1] == ("img", {"data-media": "out/chart.png", "alt": "chart", "title": "The chart"})


@pytest.mark.parametrize(
    "src", ["https://evil.example/x.png?q=secret", "/etc/passwd", "//evil.example/x.png"]
)
def test_remote_and_absolute_images_stay_links_by_default(src):
    doc = assert_inert(render_markdown(f"![x]({src})"))
    assert not any(tag == "img" for tag, _ in doc.elements)


def test_the_remote_images_setting_lets_https_images_load(monkeypatch):
    from api.store import config

    monkeypatch.setitem(config.SETTINGS_VALUES, "remote_images", True)
    html = render_markdown("![x](https://example.com/a.png) ![y](http://example.com/b.png)")
    assert '<img src="https://example.com/a.png" alt="x">' in html
    assert '<img src="http:' not in html
    monkeypatch.setitem(config.SETTINGS_VALUES, "remote_images", False)
    assert "<img src" not in render_markdown("![x](https://example.com/a.png) ![y](http://example.com/b.png)")


def test_single_line_breaks_are_kept_so_a_haiku_keeps_its_three_lines():
    """A three-line haiku rendered as one line: CommonMark joins single line breaks unless ``breaks`` is on."""
    html = render_markdown("An old silent pond\nA frog jumps into the pond\nSplash! Silence again")
    assert html == "<p>An old silent pond<br>\nA frog jumps into the pond<br>\nSplash! Silence again</p>\n"
    assert render_markdown("one\n\ntwo") == "<p>one</p>\n<p>two</p>\n"


def test_line_breaks_leave_code_lists_tables_and_math_as_they_were():
    code = render_markdown("```python\nx = 1\ny = 2\n```")
    assert "<br" not in code and '<span class="n">y</span>' in code
    assert "<br" not in render_markdown("    indented\n    code")
    assert render_markdown("- one\n- two") == "<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n"
    assert render_markdown("- one\n  more") == "<ul>\n<li>one<br>\nmore</li>\n</ul>\n"
    table = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |")
    assert "<br" not in table and table.count("<tr>") == 3
    math = render_markdown("$$\nx^2\n$$")
    assert "<br" not in math and "<math" in math
    assert render_markdown("`a\nb`") == "<p><code>a b</code></p>\n"
