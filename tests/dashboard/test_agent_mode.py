"""Agent mode's pages in Chromium against a real `opencrab up` whose runner drives the
scripted `other` sub-agent in real tmux (a private socket) and real git: plan from the
page, review, start, the DAG graph, live task states over the WebSocket, a question
answered in the page, pane output, results, diffs, disk use, cleanup.

`OPENCRAB_DOCS_SCREENSHOTS=1` also writes README's docs/screenshots/agent-mode.png, with
the repository at `OPENCRAB_DOCS_REPO` when set (a path that does not exist yet, such as
/home/aki/projects/shop, so the picture shows a path a user would have)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from playwright.sync_api import expect

from tests.agentmode.runner_support import SCRIPTED, make_repo
from tests.dashboard.conftest import CHAT
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.served import ServedOpenCrab

ROOT = Path(__file__).parents[2]
# read at import: each test's data_dir fixture clears the OPENCRAB_* variables
DOCS_SHOTS = bool(os.environ.get("OPENCRAB_DOCS_SCREENSHOTS"))
DOCS_REPO = Path(os.environ["OPENCRAB_DOCS_REPO"]) if os.environ.get("OPENCRAB_DOCS_REPO") else None
PLAN = {
    "tasks": [
        {"id": "task-001", "name": "データモデルを設計する", "description": "設計を書く"},
        {"id": "task-002", "name": "登録画面を実装する", "description": "実装する",
         "dependencies": ["task-001"]},
        {"id": "task-003", "name": "テストを書く", "description": "テストする",
         "dependencies": ["task-001"], "worktree_strategy": "Shared"},
    ]
}  # fmt: skip
QUESTION = "design.md を作成しますか？"


@pytest.fixture(scope="module")
def socket_name() -> Iterator[str]:
    """The served runner's private tmux socket; its server is ended after the module."""
    name = f"oc-dash-{uuid4().hex[:8]}"
    yield name
    # (Playwright runs an event loop in this thread: tmux is told directly)
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
    _llm_server_session: FakeLlmServer,
    socket_name: str,
) -> Iterator[ServedOpenCrab]:
    """`opencrab up` with a private HOME (its ~/.gwt/sessions) and tmux socket."""
    root = tmp_path_factory.mktemp("served-agent-mode")
    (root / "home").mkdir()
    env = {"HOME": str(root / "home"), "OPENCRAB_AGENT_MODE__TMUX_SOCKET": socket_name}
    with ServedOpenCrab(root / "data", llm=_llm_server_session, env=env) as server:
        yield server


def scripts(folder: Path, answer_file: Path) -> list[str]:
    """The scripted sub-agents of PLAN's tasks; the `other` command that runs them."""
    asking = {"hook_event_name": "Notification", "notification_type": "permission_prompt",
              "message": QUESTION}  # fmt: skip
    stop = {"hook_event_name": "Stop", "last_assistant_message": "設計を design.md に書きました。"}
    steps: dict[str, list[dict[str, Any]]] = {
        "task-001": [
            {"print": "設計を始めます"},
            {"signal": asking},
            {"ask": QUESTION, "answer_to": str(answer_file)},
            {"write": "design.md", "content": "# 設計\n\nユーザーは名前を持つ。\n"},
            {"signal": stop},
            {"sleep": 600},
        ],
        "task-002": [{"print": "実装中"}, {"write": "register.py", "content": "print('登録')\n"}],
        "task-003": [{"write": "test_register.py", "content": "def test(): pass\n"}],
    }
    folder.mkdir(parents=True)
    for task_id, task_steps in steps.items():
        (folder / f"{task_id}.json").write_text(json.dumps(task_steps), encoding="utf-8")
    return [sys.executable, str(SCRIPTED), str(folder)]


def graph(page: Watched) -> dict[str, Any]:
    """The DAG chart's nodes (id -> shown state) and edges, read from ECharts' option."""
    option: dict[str, Any] = page.page.evaluate(
        """() => {
          const chart = echarts.getInstanceByDom(document.getElementById('am-dag'));
          const s = chart.getOption().series[0];
          return {nodes: Object.fromEntries(s.data.map((d) => [d.id, d.status])),
                  links: s.links.map((l) => [l.source, l.target])};
        }"""
    )
    return option


def test_plan_start_watch_answer_and_clean_up_in_the_page(
    page: Watched, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": json.dumps(PLAN, ensure_ascii=False)}))
    )
    repo = make_repo(DOCS_REPO if DOCS_SHOTS and DOCS_REPO else tmp_path / "repo")
    answer_file = tmp_path / "answer.txt"
    command = scripts(tmp_path / "scripts", answer_file)
    p = page.page

    p.goto("/agent-mode")
    expect(p.get_by_text("No agent-mode session yet")).to_be_visible()
    p.get_by_label("Repository").fill(str(repo))
    p.get_by_label("Request").fill("ユーザー登録機能を作る")
    p.get_by_role("button", name="Plan").click()
    p.wait_for_url("**/agent-mode/*-*")
    expect(p.get_by_role("heading", name="Review the plan")).to_be_visible()
    expect(p.locator("h1")).to_have_text("ユーザー登録機能を作る")
    nodes = graph(page)
    assert nodes["nodes"] == dict.fromkeys(("task-001", "task-002", "task-003"), "Pending")
    assert sorted(nodes["links"]) == [["task-001", "task-002"], ["task-001", "task-003"]]
    expect(p.locator('[data-task-row="task-002"]')).to_contain_text("登録画面を実装する")
    shoot(p, "agent-mode-review")
    plan = p.get_by_role("textbox", name="Tasks")
    assert "データモデルを設計する" in plan.input_value()  # readable, not \u escapes
    plan.fill(plan.input_value().replace("テストする", "テストを書いて実行する"))
    p.get_by_role("button", name="Save the plan").click()
    described = p.locator('[data-task="task-003"] .am-description')
    expect(described).to_have_text("テストを書いて実行する")

    p.get_by_label("Coding CLI").select_option("other")
    p.get_by_label("Command").fill("\n".join(command))
    p.get_by_role("button", name="Start").click()
    expect(p.locator("[data-am-session]")).to_have_attribute("data-started", "yes")
    p.evaluate("window.__samePage = true")  # from here on the page is never reloaded

    first = p.locator('[data-task="task-001"]')
    expect(first.locator("[data-question-text]")).to_have_text(QUESTION, timeout=60_000)
    expect(first.locator("[data-output]")).to_contain_text("設計を始めます")
    expect(p.locator('[data-task-row="task-001"] [data-cell="waiting"]')).to_be_visible()
    assert graph(page)["nodes"]["task-001"] == "WaitingInput"
    assert graph(page)["nodes"]["task-002"] == "Pending"
    shoot(p, "agent-mode-waiting")
    docs = ROOT / "docs" / "screenshots"
    if DOCS_SHOTS:  # the README's screenshot (1280x900)
        p.set_viewport_size({"width": 1280, "height": 900})
        p.screenshot(path=str(docs / "agent-mode.png"))

    first.get_by_label("Answer for task-001").fill("はい、お願いします")
    first.get_by_role("button", name="Send the answer").click()
    root = p.locator("[data-am-session]")
    expect(root).to_have_attribute("data-status", "Completed", timeout=60_000)
    for task_id in ("task-001", "task-002", "task-003"):
        row = p.locator(f'[data-task-row="{task_id}"] [data-cell="status"]')
        expect(row).to_have_text("Completed")
    expect(first.locator("[data-question]")).to_be_hidden()
    assert answer_file.read_text(encoding="utf-8") == "はい、お願いします"
    expect(first.locator("[data-result-text]")).to_have_text("設計を design.md に書きました。")
    expect(first.locator("[data-stat]")).to_contain_text("design.md", timeout=30_000)
    expect(first.locator("[data-delivery]")).to_contain_text("local branch")
    first.locator("[data-diff] summary").click()
    expect(first.locator("[data-patch]")).to_contain_text("+ユーザーは名前を持つ。")
    second = p.locator('[data-task="task-002"]')
    expect(second.locator("[data-stat]")).to_contain_text("register.py", timeout=30_000)
    expect(second.locator("[data-output]")).to_contain_text("実装中")
    expect(p.locator("[data-disk-session]")).not_to_have_text("0 B")
    expect(p.locator("[data-disk-list] li")).to_have_count(2)  # task-003 shares task-001's
    assert set(graph(page)["nodes"].values()) == {"Completed"}
    assert p.evaluate("window.__samePage") is True

    # clicking a node selects its task
    x, y = p.evaluate(
        """() => {
          const chart = echarts.getInstanceByDom(document.getElementById('am-dag'));
          const node = chart.getOption().series[0].data.find((d) => d.id === 'task-003');
          return chart.convertToPixel({seriesIndex: 0}, node.value);
        }"""
    )
    p.locator("#am-dag").click(position={"x": x, "y": y})
    expect(p.locator('[data-task="task-003"]')).to_have_class("panel am-task selected")
    p.mouse.move(0, 0)  # (the hovered node would dim the others)
    p.evaluate("window.scrollTo(0, 0)")
    shoot(p, "agent-mode-session")

    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Clean up").click()
    report = p.locator("[data-cleanup-report]")
    expect(report).to_contain_text("kept (unmerged, unpushed work)")
    expect(report).to_contain_text("agent/task-001")

    p.set_viewport_size({"width": 1024, "height": 800})
    # (the chart follows its box's new width when the browser reports the resize)
    fits = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    p.wait_for_function(fits)  # fails the test when the page stays wider than 1024 px

    p.goto("/agent-mode")
    listed = p.locator("table.am-sessions tbody tr")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text("ユーザー登録機能を作る")
    expect(listed).to_contain_text("Completed")
    expect(listed).to_contain_text("3 completed")
    shoot(p, "agent-mode-list")


def test_pause_resume_and_cancel_from_the_page(
    page: Watched, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    one = {"tasks": [{"id": "task-001", "name": "長い作業", "description": "待つ"}]}
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": json.dumps(one, ensure_ascii=False)}))
    )
    repo = make_repo(tmp_path / "repo")
    folder = tmp_path / "scripts"
    folder.mkdir()
    steps = [{"print": "ずっと作業中"}, {"sleep": 600}]
    (folder / "task-001.json").write_text(json.dumps(steps), encoding="utf-8")
    p = page.page
    p.goto("/agent-mode")
    p.locator("details.am-new summary").click()
    p.get_by_label("Repository").fill(str(repo))
    p.get_by_label("Request").fill("長い作業をする")
    p.get_by_role("button", name="Plan").click()
    p.wait_for_url("**/agent-mode/*-*")
    p.get_by_label("Coding CLI").select_option("other")
    p.get_by_label("Command").fill("\n".join([sys.executable, str(SCRIPTED), str(folder)]))
    p.get_by_role("button", name="Start").click()
    task = p.locator('[data-task="task-001"]')
    expect(task.locator("[data-output]")).to_contain_text("ずっと作業中", timeout=60_000)

    root = p.locator("[data-am-session]")
    p.get_by_role("button", name="Pause").click()
    expect(root).to_have_attribute("data-status", "Paused")
    expect(p.get_by_role("button", name="Pause")).to_be_hidden()
    p.get_by_role("button", name="Resume").click()
    expect(root).to_have_attribute("data-status", "Active")
    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Cancel").click()
    expect(root).to_have_attribute("data-status", "Failed")
    expect(p.locator('[data-task-row="task-001"] [data-cell="status"]')).to_have_text("Cancelled")
    expect(p.get_by_role("button", name="Cancel")).to_be_hidden()


def test_cancel_shows_cancelled_without_the_answer_box_and_cleanup_refreshes_disk_use(
    page: Watched, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    """Cancel while a task waits for an answer: the session reads Cancelled (not Failed),
    the question and its answer box go; Clean up then empties the disk list in place."""
    one = {"tasks": [{"id": "task-001", "name": "質問する作業", "description": "聞く"}]}
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": json.dumps(one, ensure_ascii=False)}))
    )
    repo = make_repo(tmp_path / "repo")
    folder = tmp_path / "scripts"
    folder.mkdir()
    asking = {"hook_event_name": "Notification", "notification_type": "permission_prompt",
              "message": QUESTION}  # fmt: skip
    steps = [{"print": "作業中"}, {"signal": asking}, {"sleep": 600}]
    (folder / "task-001.json").write_text(json.dumps(steps), encoding="utf-8")
    p = page.page
    p.goto("/agent-mode")
    p.locator("details.am-new").evaluate("d => { d.open = true; }")  # open, sessions or not
    p.get_by_label("Repository").fill(str(repo))
    p.get_by_label("Request").fill("質問してから作業する")
    p.get_by_role("button", name="Plan").click()
    p.wait_for_url("**/agent-mode/*-*")
    p.get_by_label("Coding CLI").select_option("other")
    p.get_by_label("Command").fill("\n".join([sys.executable, str(SCRIPTED), str(folder)]))
    p.get_by_role("button", name="Start").click()
    task = p.locator('[data-task="task-001"]')
    expect(task.locator("[data-question-text]")).to_have_text(QUESTION, timeout=60_000)
    expect(p.locator("[data-disk-list] li")).to_have_count(1, timeout=30_000)
    p.evaluate("window.__samePage = true")

    root = p.locator("[data-am-session]")
    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Cancel").click()
    expect(root.locator("[data-session-status]")).to_have_text("Cancelled")
    expect(p.locator('[data-task-row="task-001"] [data-cell="status"]')).to_have_text("Cancelled")
    expect(task.locator("[data-question]")).to_be_hidden()
    expect(p.get_by_label("Answer for task-001")).to_be_hidden()
    expect(p.get_by_role("button", name="Resume")).to_be_hidden()  # nothing left to run
    shoot(p, "agent-mode-cancelled")

    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Clean up").click()
    expect(p.locator("[data-cleanup-report]")).to_contain_text("1 worktree(s) removed")
    expect(p.locator("[data-disk-list] li")).to_have_count(0)
    expect(p.locator("[data-disk] .empty")).to_be_visible()
    expect(p.locator("[data-disk-session]")).to_have_text("0 B")
    assert p.evaluate("window.__samePage") is True
    shoot(p, "agent-mode-cleaned")

    p.reload()  # rendered by the server: the same
    expect(root.locator("[data-session-status]")).to_have_text("Cancelled")
    expect(task.locator("[data-question]")).to_be_hidden()
    expect(p.locator("[data-disk] .empty")).to_be_visible()
    p.goto("/agent-mode")
    listed = p.locator("table.am-sessions tbody tr", has_text="質問してから作業する")
    expect(listed.locator(".am-status")).to_have_text("Cancelled")
    shoot(p, "agent-mode-list-cancelled")


def test_starting_a_cli_whose_provider_has_no_key_says_where_to_set_it(
    page: Watched, fake_llm_server: FakeLlmServer, tmp_path: Path
) -> None:
    one = {"tasks": [{"id": "task-001", "name": "ログイン画面を作る", "description": "作る"}]}
    fake_llm_server.reply(
        CHAT, Reply(json=completion({"content": json.dumps(one, ensure_ascii=False)}))
    )
    repo = make_repo(tmp_path / "repo")
    p = page.page
    p.goto("/agent-mode")
    if not p.get_by_label("Repository").is_visible():  # sessions listed: the form is folded
        p.locator("details.am-new summary").click()
    p.get_by_label("Repository").fill(str(repo))
    p.get_by_label("Request").fill("ログイン画面を作る")
    p.get_by_role("button", name="Plan").click()
    p.wait_for_url("**/agent-mode/*-*")
    page.allow("400")  # the refusal below
    p.get_by_label("Coding CLI").select_option("claude")
    p.get_by_role("button", name="Start").click()

    refused = p.locator("form[data-api$='/start']")
    expect(refused).to_contain_text("ClaudeCode needs an API key for anthropic")
    expect(refused).to_contain_text("dashboard's LLM page")
    expect(p.locator("[data-am-session]")).to_have_attribute("data-started", "no")
    shoot(p, "agent-mode-no-key")
