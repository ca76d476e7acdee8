"""The workspace browser: tree, previews, editing, uploads, downloads, deletes, the quota."""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab

HOSTILE = "メモ #1 ?50% 下書き.txt"  # Japanese, spaces, '#', '?' and '%' in one name


def url(path: str) -> str:
    return "/".join(quote(part, safe="") for part in path.split("/"))


def put(api: httpx.Client, agent: dict[str, Any], path: str, data: bytes | str) -> None:
    body = data.encode("utf-8") if isinstance(data, str) else data
    response = api.put(f"/api/agents/{agent['id']}/workspace/{url(path)}", content=body)
    assert response.status_code in (200, 201), response.text


def stored(api: httpx.Client, agent: dict[str, Any], path: str) -> httpx.Response:
    return api.get(f"/api/agents/{agent['id']}/workspace/{url(path)}")


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG image (orange pixels)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xc2\x41\x0c" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def open_workspace(page: Page, agent: dict[str, Any], path: str = "", **query: str) -> None:
    params = ({"path": path} if path else {}) | query
    search = "&".join(f"{k}={quote(v, safe='/')}" for k, v in params.items())
    address = f"/agents/{quote(agent['name'])}/workspace" + ("?" + search if search else "")
    response = page.goto(address)
    assert response is not None


@pytest.fixture(scope="module")
def small(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    """A second server whose agents' workspaces hold 1 MB ([agent] max_workspace_size_mb)."""
    env = {"OPENCRAB_AGENT__MAX_WORKSPACE_SIZE_MB": "1"}
    data = tmp_path_factory.mktemp("small") / "data"
    with ServedOpenCrab(data, llm=_llm_server_session, env=env) as server:
        yield server


@pytest.fixture
def small_api(small: ServedOpenCrab) -> Iterator[httpx.Client]:
    with small.client(timeout=30) as client:
        yield client


@pytest.fixture
def small_page(browser: Browser, small: ServedOpenCrab) -> Iterator[Watched]:
    context = browser.new_context(
        base_url=small.url, viewport={"width": 1280, "height": 900}, timezone_id="Asia/Tokyo"
    )
    small.sign_in(context)
    watched = Watched(context.new_page(), small.url)
    try:
        yield watched
        watched.check()
    finally:
        context.close()


def test_tree_and_a_text_preview_render(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "ワーク", language="ja")
    text = "今日の予定\n- 会議は十時から\n- 資料を読む\n"
    put(api, agent, f"メモ/{HOSTILE}", text)
    put(api, agent, "code/hello.py", "def hello():\n    return 'こんにちは'\n")
    put(api, agent, "code/deep/inner.txt", "奥のファイル")
    put(api, agent, "readme.txt", "top")
    p = page.page
    open_workspace(p, agent)
    tree = p.get_by_role("navigation", name="Files")
    expect(tree.get_by_role("link", name="メモ")).to_be_visible()
    expect(tree.get_by_role("link", name="readme.txt")).to_be_visible()
    # a closed folder opens in place: its entries come from the tree fragment
    toggle = tree.get_by_role("button", name="Files in code")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(tree.get_by_role("link", name="hello.py")).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    tree.get_by_role("button", name="Files in deep").click()  # and a folder in it
    expect(tree.get_by_role("link", name="inner.txt")).to_be_visible()
    shoot(p, "workspace-tree")
    toggle.click()
    expect(tree.get_by_role("link", name="hello.py")).to_be_hidden()
    tree.get_by_role("link", name="メモ").click()
    expect(p.get_by_role("heading", name="メモ", exact=True)).to_be_visible()
    view = p.locator("#ws-view")
    view.get_by_role("link", name=HOSTILE, exact=True).click()  # the name survives encoding
    expect(p.get_by_role("heading", name=HOSTILE)).to_be_visible()
    source = p.locator(".ws-source")
    expect(source).to_have_text(text)
    expect(p.locator(".ws-gutter")).to_have_text("1\n2\n3")
    expect(tree.get_by_role("link", name=HOSTILE)).to_have_attribute("aria-current", "page")
    shoot(p, "workspace-text")
    # line numbers off: the gutter goes and long lines wrap; the choice is remembered
    p.get_by_label("Line numbers").uncheck()
    expect(p.locator(".ws-gutter")).to_be_hidden()
    p.reload()
    expect(p.get_by_label("Line numbers")).not_to_be_checked()
    expect(p.locator(".ws-gutter")).to_be_hidden()
    p.get_by_label("Line numbers").check()
    open_workspace(p, agent, "code/hello.py")
    expect(p.locator(".ws-source .hljs-keyword").first).to_have_text("def")


def test_the_page_reads_without_javascript(api: httpx.Client) -> None:
    agent = make_agent(api, "読むだけ")
    put(api, agent, "docs/手順 #2.md", "# 手順\n\n1. 開く\n")
    page = api.get(f"/agents/{quote(agent['name'])}/workspace", params={"path": "docs/手順 #2.md"})
    assert page.status_code == 200
    assert "<h3>手順</h3>" in page.text  # rendered on the server
    assert 'href="/agents/%E8%AA%AD%E3%82%80%E3%81%A0%E3%81%91/workspace?path=docs"' in page.text
    folder = api.get(f"/agents/{quote(agent['name'])}/workspace", params={"path": "docs"})
    assert "手順 #2.md" in folder.text
    assert "?path=docs/%E6%89%8B%E9%A0%86%20%232.md" in folder.text


def test_markdown_is_rendered_safely(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "マークダウン", language="ja")
    put(api, agent, "画像/猫 #1.png", png(48, 32))
    markdown = (
        "# 見出し\n\n本文です。**強調**と`コード`。\n\n"
        "<script>alert('script ran')</script>\n\n"
        '<img src="x" onerror="alert(\'onerror ran\')">\n\n'
        "[危ないリンク](javascript:alert('link ran')) と [隣のファイル](../画像/猫%20%231.png)\n\n"
        "![猫](../画像/猫%20%231.png) ![外部](https://evil.example/track.png)\n\n"
        "| 列 | 値 |\n|:--|--:|\n| 一 | 1 |\n\n```python\nprint('やあ')\n```\n"
    )
    put(api, agent, "ノート/説明.md", markdown)
    dialogs: list[str] = []
    page.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    p = page.page
    open_workspace(p, agent, "ノート/説明.md")
    body = p.locator("[data-ws-markdown]")
    expect(body.get_by_role("heading", name="見出し")).to_be_visible()
    expect(body.locator("strong")).to_have_text("強調")
    expect(body.locator("table td").first).to_have_text("一")
    expect(body.locator("pre code .hljs-built_in")).to_have_text("print")
    expect(body).to_contain_text("<script>alert('script ran')</script>")  # shown as text
    assert p.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    assert body.locator("script, [onerror], [onload], iframe, object").count() == 0
    links = "[...document.querySelectorAll('a')].map(a => a.href)"
    assert not [href for href in p.evaluate(links) if href.startswith("javascript")]
    expect(body.get_by_role("link", name="隣のファイル")).to_have_attribute(
        "href", re.compile(r"\?path=%E7%94%BB%E5%83%8F/%E7%8C%AB%20%231\.png$")
    )
    cat = body.get_by_role("img", name="猫")
    expect(cat).to_have_attribute("src", re.compile(rf"^/api/agents/{agent['id']}/workspace/"))
    expect(cat).to_have_js_property("naturalWidth", 48)  # loaded
    assert body.locator("img[alt='外部']").count() == 0  # never loaded from another host:
    expect(body.get_by_role("link", name="外部")).to_have_attribute(  # only linked
        "href", "https://evil.example/track.png"
    )
    shoot(p, "workspace-markdown")
    p.get_by_role("link", name="Source").click()
    expect(p.locator(".ws-source")).to_contain_text("<script>alert('script ran')</script>")
    assert dialogs == []


def test_an_image_previews(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "画像係")
    image = png(160, 100)
    put(api, agent, "写真/夕焼け #2.png", image)
    served = stored(api, agent, "写真/夕焼け #2.png")
    assert served.headers["content-type"] == "image/png"
    assert served.content == image
    p = page.page
    open_workspace(p, agent, "写真/夕焼け #2.png")
    img = p.get_by_role("img", name="夕焼け #2.png")
    expect(img).to_be_visible()
    expect(img).to_have_js_property("naturalWidth", 160)  # loaded
    shoot(p, "workspace-image")
    # an SVG is an image too: shown by <img>, where its script never runs
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="32">'
        '<script>alert("svg ran")</script><rect width="64" height="32" fill="teal"/></svg>'
    )
    put(api, agent, "写真/図 %1.svg", svg)
    assert stored(api, agent, "写真/図 %1.svg").headers["content-type"] == "image/svg+xml"
    dialogs: list[str] = []
    p.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_workspace(p, agent, "写真")
    p.get_by_role("navigation", name="Files").get_by_role("link", name="図 %1.svg").click()
    expect(p.locator(".ws-image img")).to_have_js_property("naturalWidth", 64)
    assert dialogs == []


def test_a_skill_file_is_highlighted_and_checked(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "スキル持ち", language="ja")
    skill = (
        "---\nname: 挨拶\ndescription: 丁寧に挨拶する\nversion: 2\nactions: [speak]\n---\n"
        "# 挨拶のしかた\n\n相手の名前を呼んでから話す。\n"
    )
    put(api, agent, "skills/挨拶.skill.md", skill)
    put(api, agent, "skills/壊れた.skill.md", "---\nname: 壊れた\nversion: [\n---\n本文\n")
    p = page.page
    open_workspace(p, agent, "skills/挨拶.skill.md")
    expect(p.get_by_text("Skill file", exact=True)).to_be_visible()
    expect(p.get_by_role("link", name="Source")).to_have_attribute("aria-current", "page")
    expect(p.locator(".ws-source [data-lang=yaml] .hljs-attr").first).to_have_text("name:")
    expect(p.locator(".ws-source [data-lang=markdown] .hljs-section").first).to_have_text(
        "# 挨拶のしかた"
    )
    expect(p.locator(".ws-source")).to_have_text(skill)
    shoot(p, "workspace-skill")
    p.get_by_role("link", name="Rendered").click()
    expect(p.locator(".ws-frontmatter")).to_contain_text("description: 丁寧に挨拶する")
    rendered = p.locator("[data-ws-markdown]")
    expect(rendered.get_by_role("heading", name="挨拶のしかた")).to_be_visible()
    open_workspace(p, agent, "skills/壊れた.skill.md")
    expect(p.get_by_role("alert")).to_contain_text("壊れた.skill.md:3: invalid YAML")


def test_edit_and_save_then_read_back_over_rest(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "編集者", language="ja")
    put(api, agent, f"下書き/{HOSTILE}", "古い本文\n")
    p = page.page
    open_workspace(p, agent, f"下書き/{HOSTILE}")
    p.get_by_role("link", name="Edit").click()
    editor = p.get_by_label(f"Contents of {HOSTILE}")
    expect(editor).to_have_value("古い本文\n")
    new_text = "新しい本文です。\n二行目 #タグ 100%\n"
    editor.fill(new_text)
    p.get_by_role("button", name="Save").click()
    expect(p.locator("#toast")).to_contain_text("Saved")
    assert stored(api, agent, f"下書き/{HOSTILE}").content == new_text.encode("utf-8")
    editor.fill("Ctrl+S でも保存\n")
    with p.expect_response(lambda r: r.request.method == "PUT") as saved:
        editor.press("Control+s")
    assert saved.value.status == 200
    assert stored(api, agent, f"下書き/{HOSTILE}").text == "Ctrl+S でも保存\n"
    shoot(p, "workspace-editor")
    p.get_by_role("link", name="Done").click()
    expect(p.locator(".ws-source")).to_have_text("Ctrl+S でも保存\n")
    # a file with CRLF line ends keeps them
    put(api, agent, "下書き/windows.txt", "一行目\r\n二行目\r\n")
    open_workspace(p, agent, "下書き/windows.txt", edit="true")
    p.get_by_label("Contents of windows.txt").fill("一行目\n直した二行目\n")
    p.get_by_role("button", name="Save").click()
    expect(p.locator("#toast")).to_contain_text("Saved, 31 B.")
    assert stored(api, agent, "下書き/windows.txt").text == "一行目\r\n直した二行目\r\n"
    # a new file, from the folder's "New file"
    open_workspace(p, agent, "下書き")
    p.get_by_label("New file name").fill("下書き/新規 メモ.md")
    p.get_by_role("button", name="New file").click()
    expect(p.get_by_role("heading", name="New file 新規 メモ.md")).to_be_visible()
    p.get_by_label("Contents of 新規 メモ.md").fill("# 新しいメモ\n")
    p.get_by_role("button", name="Create").click()
    expect(p.get_by_role("heading", name="Editing 新規 メモ.md")).to_be_visible()
    assert stored(api, agent, "下書き/新規 メモ.md").text == "# 新しいメモ\n"


def test_a_save_the_api_refuses_shows_its_message(
    small_page: Watched, small_api: httpx.Client
) -> None:
    agent = make_agent(small_api, "小さな部屋", language="ja")
    put(small_api, agent, "大きい.bin", b"\x01" * (700 * 1024))
    put(small_api, agent, "メモ.txt", "短い\n")
    p = small_page.page
    open_workspace(p, agent, "メモ.txt", edit="true")
    small_page.allow("413")
    p.get_by_label("Contents of メモ.txt").fill("長い" * 70_000)
    p.get_by_role("button", name="Save").click()
    expect(p.get_by_role("alert")).to_contain_text("over its quota of 1048576 bytes")
    assert stored(small_api, agent, "メモ.txt").text == "短い\n"  # nothing lost


def test_upload_with_the_picker_then_download_round_trips(
    page: Watched, api: httpx.Client, tmp_path: Path
) -> None:
    agent = make_agent(api, "運び屋", language="ja")
    put(api, agent, "受け取り/既存.txt", "ある\n")
    data = os.urandom(300_000) + b"\x00\x00\x00" + os.urandom(1000)
    name = "データ #1 ?50% 圧縮.bin"
    p = page.page
    open_workspace(p, agent, "受け取り")
    expect(p.get_by_role("heading", name="Upload to 受け取り")).to_be_visible()
    p.locator("#ws-files").set_input_files(
        [
            {"name": name, "mimeType": "application/octet-stream", "buffer": data},
            {"name": "説明.txt", "mimeType": "text/plain", "buffer": "添付の説明".encode()},
        ]
    )
    uploads = p.locator("[data-ws-uploads]")
    expect(uploads.locator("li.ok")).to_have_count(2)
    expect(uploads).to_contain_text("uploaded, 294 KB")
    assert stored(api, agent, f"受け取り/{name}").content == data
    row = p.locator(".ws-table tr", has_text=name)
    expect(row).to_be_visible()  # the table was fetched again
    expect(p.locator("#ws-usage")).to_contain_text("294 KB of 100 MB")
    shoot(p, "workspace-uploaded")
    with p.expect_download() as info:
        row.get_by_role("link", name=f"Download {name}").click()
    download = info.value
    # the exact name arrives (RFC 5987 filename*); Chromium turns the '?' a file system
    # may not hold into '_' when it saves
    assert download.suggested_filename == name.replace("?", "_")
    target = tmp_path / "downloaded.bin"
    download.save_as(target)
    assert target.read_bytes() == data
    # and from the file's own page
    row.get_by_role("link", name=name, exact=True).click()
    expect(p.get_by_text("This is a binary file")).to_be_visible()
    with p.expect_download() as again:
        p.get_by_role("link", name="Download", exact=True).click()
    again.value.save_as(tmp_path / "again.bin")
    assert (tmp_path / "again.bin").read_bytes() == data


DROP = """
async ([name, bytes]) => {
  const transfer = new DataTransfer();
  transfer.items.add(new File([new Uint8Array(bytes)], name));
  const zone = document.querySelector(".ws-main");
  for (const type of ["dragenter", "dragover", "drop"]) {
    const init = { bubbles: true, cancelable: true, dataTransfer: transfer };
    zone.dispatchEvent(new DragEvent(type, init));
  }
}
"""


def test_drag_and_drop_uploads_to_the_current_folder(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "落とし物", language="ja")
    put(api, agent, "箱/中身.txt", "中身\n")
    data = bytes(range(256)) * 40 + b"\x00" * 10
    p = page.page
    open_workspace(p, agent, "箱/中身.txt")  # a file's page: its folder is the target
    expect(p.get_by_role("heading", name="Upload to 箱")).to_be_visible()
    p.evaluate(DROP, ["落とした #3.bin", list(data)])
    expect(p.locator("[data-ws-uploads] li.ok")).to_have_count(1)
    assert stored(api, agent, "箱/落とした #3.bin").content == data
    tree = p.get_by_role("navigation", name="Files")
    expect(tree.get_by_role("link", name="落とした #3.bin")).to_be_visible()


def test_delete_asks_first(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "片付け")
    put(api, agent, "ごみ/古い.txt", "古い\n")
    put(api, agent, "ごみ/残す.txt", "残す\n")
    p = page.page
    open_workspace(p, agent, "ごみ/古い.txt")
    p.once("dialog", lambda dialog: dialog.dismiss())
    p.get_by_role("button", name="Delete").click()
    expect(p.get_by_role("heading", name="古い.txt")).to_be_visible()
    assert stored(api, agent, "ごみ/古い.txt").status_code == 200  # declined: still there
    asked: list[str] = []
    p.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    p.get_by_role("button", name="Delete").click()
    expect(p.get_by_role("heading", name="ごみ", exact=True)).to_be_visible()
    assert asked == ["Delete ごみ/古い.txt?"]
    assert stored(api, agent, "ごみ/古い.txt").status_code == 404
    expect(p.locator(".ws-table")).not_to_contain_text("古い.txt")
    # a folder, from its parent's table
    open_workspace(p, agent)
    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Delete ごみ").click()
    expect(p.get_by_text("This folder is empty.")).to_be_visible()
    assert api.get(f"/api/agents/{agent['id']}/workspace").json()["entries"] == []


def test_usage_against_the_quota_and_a_refused_upload(
    small_page: Watched, small_api: httpx.Client
) -> None:
    agent = make_agent(small_api, "満杯", language="ja")
    put(small_api, agent, "資料/大きな表.bin", b"\x02" * (600 * 1024))
    p = small_page.page
    open_workspace(p, agent, "資料")
    usage = p.locator("#ws-usage")
    expect(usage).to_contain_text("600 KB of 1.0 MB (59%)")
    expect(usage).to_contain_text("1 file of at most 10,000")
    assert p.locator("#ws-meter").get_attribute("value") == str(600 * 1024)
    assert p.locator("#ws-meter").get_attribute("max") == str(1024 * 1024)
    small_page.allow("413")
    too_big = b"\x03" * (500 * 1024)
    p.locator("#ws-files").set_input_files(
        [{"name": "入らない.bin", "mimeType": "application/octet-stream", "buffer": too_big}]
    )
    alert = p.locator("[data-ws-upload-error]")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("入らない.bin: writing 512000 more bytes")
    expect(alert).to_contain_text("over its quota of 1048576 bytes")
    expect(p.locator("[data-ws-uploads] li.failed")).to_have_count(1)
    assert stored(small_api, agent, "資料/入らない.bin").status_code == 404
    shoot(p, "workspace-quota")


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("../../etc/passwd", 400, "contains '..'; paths cannot leave your workspace"),
        ("箱/../../外", 400, "contains '..'"),
        ("/etc/passwd", 400, "is absolute"),
        ("ない/ファイル.txt", 404, "no file or folder 'ない/ファイル.txt' in your workspace"),
    ],
)
def test_a_bad_path_shows_the_apis_error(
    page: Watched, api: httpx.Client, path: str, status: int, message: str
) -> None:
    agent = make_agent(api, f"門番{status}{len(path)}")
    put(api, agent, "箱/中.txt", "中\n")
    page.allow("/workspace?path=")  # the error status it asks for
    p = page.page
    response = p.goto(f"/agents/{quote(agent['name'])}/workspace?path={quote(path, safe='')}")
    assert response is not None
    assert response.status == status
    expect(p.get_by_role("alert")).to_contain_text(message)
    expect(p.get_by_role("navigation", name="Files").get_by_role("link", name="箱")).to_be_visible()
    api_error = api.get(f"/api/agents/{agent['id']}/workspace", params={"path": path})
    if status == 400:
        assert api_error.json()["message"] in p.get_by_role("alert").inner_text()


def test_the_code_colours_follow_the_theme_button(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "配色", language="ja")
    put(api, agent, "code/hello.py", "print('こんにちは')\n")
    p = page.page
    p.emulate_media(color_scheme="light")
    open_workspace(p, agent, "code/hello.py")
    light = p.locator('link[data-hljs-theme="light"]')
    dark = p.locator('link[data-hljs-theme="dark"]')
    expect(light).to_have_attribute("media", "all")
    expect(dark).to_have_attribute("media", "not all")
    p.get_by_role("button", name="Switch between light and dark theme").click()
    expect(dark).to_have_attribute("media", "all")
    expect(light).to_have_attribute("media", "not all")
