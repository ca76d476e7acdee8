"""Markdown previews: rendered, then cleaned; nothing a file says can run in the page."""

from __future__ import annotations

from opencrab.dashboard.markdown import render_markdown


def to(prefix: str) -> object:
    return lambda url, is_image: f"/{prefix}/{url}"


def test_raw_html_is_shown_as_text_never_passed_through() -> None:
    html = render_markdown(
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n<b onclick=x>b</b>"
    )
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<b" not in html


def test_javascript_and_data_urls_never_become_links_or_images() -> None:
    html = render_markdown(
        "[a](javascript:alert(1)) [b](JAVASCRIPT:alert(1)) [c](vbscript:x) "
        "![d](data:image/png;base64,AAAA) <javascript:alert(3)>"
    )
    assert "href" not in html
    assert "<img" not in html
    assert "d" in html  # the image's alt text is kept


def test_relative_links_and_images_go_where_the_caller_says() -> None:
    seen: list[tuple[str, bool]] = []

    def resolve(url: str, is_image: bool) -> str | None:
        seen.append((url, is_image))
        return None if "escape" in url else f"/files/{url}"

    html = render_markdown(
        "[次](次の%20ページ.md#節) ![図](図.png) ![外](../escape.png) [上](#top)", resolve=resolve
    )
    assert 'href="/files/%E6%AC%A1%E3%81%AE%20%E3%83%9A%E3%83%BC%E3%82%B8.md#%E7%AF%80"' in html
    assert '<img src="/files/%E5%9B%B3.png" alt="図">' in html
    assert 'href="#top"' in html
    assert "外" in html
    assert html.count("<img") == 1  # the one nothing resolves is its alt text
    assert ("../escape.png", True) in seen


def test_images_from_another_host_are_linked_not_loaded() -> None:
    html = render_markdown("![追跡](https://tracker.example/p.gif) ![x](//cdn.example/y.png)")
    assert "<img" not in html
    assert (
        '<a href="https://tracker.example/p.gif" rel="noopener noreferrer nofollow">追跡</a>'
        in html
    )
    assert "x" in html


def test_links_to_other_sites_open_without_a_referrer() -> None:
    html = render_markdown("[OpenCrab](https://example.org/docs) [mail](mailto:a@example.org)")
    assert '<a href="https://example.org/docs" rel="noopener noreferrer nofollow">' in html
    assert 'href="mailto:a@example.org"' in html


def test_headings_shift_down_and_code_keeps_only_its_language() -> None:
    html = render_markdown("# 一\n\n###### 六\n\n```python\nx = 1\n```\n", heading_offset=2)
    assert "<h3>一</h3>" in html
    assert "<h6>六</h6>" in html  # never past h6
    assert '<code class="language-python">x = 1\n</code>' in html


def test_tables_keep_their_alignment_and_nothing_else_of_style() -> None:
    html = render_markdown("| a | b |\n|:--|--:|\n| 1 | 2 |\n")
    assert '<th style="text-align:left">a</th>' in html
    assert '<td style="text-align:right">2</td>' in html
