"""Markdown to safe HTML, for the dashboard's previews.

markdown-it-py renders CommonMark (plus tables and strikethrough) with raw HTML turned
off, so a `<script>` or an `<img onerror=...>` in a file is shown as text, never passed
through, and links with a `javascript:` URL stay text. nh3 then cleans the result
against an allow-list all the same: no event handlers, no `style` beyond a table
cell's `text-align`, URLs only `http`, `https`, `mailto` or relative, classes only a
code block's `language-*`.

A caller decides where relative URLs lead with `resolve(url, is_image)`: it returns the
URL to use, or None to drop it. Images are shown only from this server: one from
another host (the pages' CSP would refuse it anyway), or one nothing resolves, is shown
as its alt text, linked when it is on another host. Headings can be shifted down (`heading_offset`)
so a document's `#` fits under the page's own headings.

Example:
    render_markdown("# Hi\\n<script>x</script>")
    # '<h1>Hi</h1>\\n<p>&lt;script&gt;x&lt;/script&gt;</p>\\n'
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

Resolver = Callable[[str, bool], str | None]
"""(a relative URL, whether an image asks for it) -> the URL to use, or None to drop it."""

SCHEMES = frozenset({"http", "https", "mailto"})
ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "code": {"class"},
    "th": {"style", "colspan", "rowspan", "scope"},
    "td": {"style", "colspan", "rowspan"},
}


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )


_MD = _parser()


def render_markdown(
    text: str, *, resolve: Resolver | None = None, heading_offset: int = 0
) -> Markup:
    """`text` as sanitised HTML; see the module docstring."""
    tokens = _MD.parse(text)
    for token in tokens:
        if heading_offset and token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + heading_offset, 6)}"
        if token.type == "inline" and token.children:
            token.children = _point(token.children, resolve)
    html = _MD.renderer.render(tokens, _MD.options, {})

    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute == "class":
            return value if tag == "code" and value.startswith("language-") else None
        if tag == "img" and attribute == "src":  # only from this server (set by _point)
            return value if value.startswith("/") and not value.startswith("//") else None
        return value

    cleaned = nh3.clean(
        html,
        attributes=ATTRIBUTES,
        attribute_filter=keep,
        url_schemes=set(SCHEMES),
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
    return Markup(cleaned)  # noqa: S704 - cleaned by nh3 against the allow-list above


def _point(children: list[Token], resolve: Resolver | None) -> list[Token]:
    """Links and images of one line, their URLs resolved; an image that cannot be shown
    becomes its alt text (a link to it when it is on another host)."""
    out: list[Token] = []
    for token in children:
        if token.type == "link_open":
            href = _url(str(token.attrGet("href") or ""), False, resolve)
            if href is None:
                token.attrs.pop("href", None)
            else:
                token.attrSet("href", href)
        if token.type != "image":
            out.append(token)
            continue
        original = str(token.attrGet("src") or "")
        src = _url(original, True, resolve)
        if src is not None:
            token.attrSet("src", src)
            out.append(token)
            continue
        alt = token.children or [Token("text", "", 0, content=original)]
        if urlsplit(original).scheme in ("http", "https"):
            link = Token("link_open", "a", 1, attrs={"href": original})
            out += [link, *alt, Token("link_close", "a", -1)]
        else:
            out += alt
    return out


def _url(value: str, is_image: bool, resolve: Resolver | None) -> str | None:
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:  # absolute, or another host ("//host/x")
        if is_image:
            return None  # never loaded from elsewhere
        return value if parts.scheme in SCHEMES or not parts.scheme else None
    if value.startswith("#") and not is_image:
        return value
    if resolve is None:
        return None if is_image else value
    return resolve(value, is_image)
