"""HTML to readable text for fetch_webpage: nh3 cleans, html.parser lays the text out.

nh3 (the ammonia/html5ever sanitiser, already a dependency) parses the page as a browser
would and keeps only the structural tags below, dropping scripts, styles, forms and the
like with their content; the standard library's HTMLParser then walks that clean HTML
and writes text: headings as `#` lines, list items as `- `, paragraphs and rows on their
own lines, links as `text (url)`, preformatted text as is, whitespace elsewhere collapsed.

Example:
    page_text("<h1>Hi</h1><p>See <a href='/x'>this</a>.</p>")
    # PageText(title='', text='# Hi\\n\\nSee this (/x).')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

import nh3

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCKS = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside",
     "blockquote", "figure", "figcaption", "table", "tr", "ul", "ol", "dl", "dt", "dd",
     "hr", "details", "summary", "address", "body"}
)  # fmt: skip
KEEP = frozenset({*BLOCKS, *HEADINGS, "li", "br", "pre", "a", "td", "th", "title"})
DROP_WITH_CONTENT = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object",
     "canvas", "select", "textarea", "button", "head"}
)  # fmt: skip
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_KEPT_SPACE = "\x01"  # a space of preformatted text (control characters never reach here)


@dataclass(frozen=True)
class PageText:
    """A page's title and its readable text."""

    title: str
    text: str


class _Layout(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] = []
        self.in_title = False
        self.pre = 0
        self.links: list[str | None] = []

    def newline(self, count: int = 1) -> None:
        self.out.append("\n" * count)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in HEADINGS:
            self.newline(2)
            self.out.append("#" * HEADINGS[tag] + " ")
        elif tag == "li":
            self.newline()
            self.out.append("- ")
        elif tag == "br":
            self.newline()
        elif tag == "pre":
            self.newline(2)
            self.pre += 1
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag == "a":
            self.links.append(dict(attrs).get("href"))
        elif tag in BLOCKS:
            self.newline(2 if tag in ("p", "blockquote", "table") else 1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            self.newline(2)
        elif tag == "a" and self.links:
            href = self.links.pop()
            if href and not href.startswith(("#", "javascript:")):
                self.out.append(f" ({href})")
        elif tag in HEADINGS or tag in BLOCKS:
            self.newline(2 if tag in HEADINGS or tag == "p" else 1)

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif self.pre:  # its spaces survive the line trimming below as _KEPT_SPACE
            self.out.append(data.replace(" ", _KEPT_SPACE).replace("\t", _KEPT_SPACE * 4))
        else:
            self.out.append(_SPACES.sub(" ", data))


def page_text(html: str) -> PageText:
    """The title and readable text of an HTML document (see the module docstring)."""
    clean = nh3.clean(
        _CONTROL.sub("", html),
        tags=set(KEEP),
        clean_content_tags=set(DROP_WITH_CONTENT),
        attributes={"a": {"href"}},
        link_rel=None,
        strip_comments=True,
    )
    layout = _Layout()
    layout.feed(clean)
    layout.close()
    lines = (line.strip(" ") for line in "".join(layout.out).split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).replace(_KEPT_SPACE, " ").strip()
    return PageText(title=_SPACES.sub(" ", "".join(layout.title)).strip(), text=text)
