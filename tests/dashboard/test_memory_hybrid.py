"""The memory page's hybrid search in Chromium against a real `opencrab up` whose
background indexer embeds (issue 35): the embedding's progress under the form, a
Japanese question answered by meaning, each hit's legs, the search's mode line."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from opencrab.core.embedding import PACKAGED_NAME
from tests.dashboard.conftest import make_agent
from tests.dashboard.test_memory import chat, memory_url, said, search
from tests.fakes.browser import Watched, shoot
from tests.fakes.corpora import FIXTURES
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab


@pytest.fixture(scope="module")
def served_embedding(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    roots = json.dumps([str(tmp_path_factory.getbasetemp()), str(FIXTURES)])
    with ServedOpenCrab(
        tmp_path_factory.mktemp("served-embedding") / "data",
        llm=_llm_server_session,
        env={"OPENCRAB_IMPORTS__ROOTS": roots, "OPENCRAB_AGENT__MEMORY_EMBEDDING": "true"},
    ) as server:
        yield server


def test_a_japanese_question_finds_the_answer_by_meaning(
    browser: Browser, served_embedding: ServedOpenCrab, fake_llm_server: FakeLlmServer
) -> None:
    served = served_embedding
    with served.client(timeout=30) as api:
        agent = make_agent(api, "ミナ", language="ja")
        chat(
            api,
            fake_llm_server,
            "ミナ",
            ("ユーザーの猫の名前はタマ", [said("覚えておきます。")]),
            ("金曜日にサーバーをデプロイした", [said("お疲れさまでした。")]),
        )
        deadline = time.monotonic() + 300  # the packaged model on a busy 2-core machine
        while True:
            shown = api.get(f"/api/agents/{agent['id']}/memory/index").json()
            if shown["total"] and shown["embedded"] == shown["total"]:
                break
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)

    context = browser.new_context(
        base_url=served.url, viewport={"width": 1280, "height": 900}, locale="en-US"
    )
    served.sign_in(context)
    watched = Watched(context.new_page(), served.url)
    p = watched.page
    p.goto(memory_url("ミナ"))
    expect(p.locator(".index-progress")).to_have_text(
        f"Meaning search: embedded {shown['total']} of {shown['total']} with {PACKAGED_NAME}."
    )
    search(p, "ユーザーのペットは？")
    first = p.locator(".hit").first
    expect(first.locator(".hit-text")).to_have_text("ユーザーの猫の名前はタマ")
    expect(first.locator(".badge.leg")).to_have_text(["vector"])
    expect(p.locator(".search-mode")).to_contain_text("hybrid: lexical + vector")
    shoot(p, "memory-hybrid")

    search(p, "タマ")  # a word of the line: both legs
    first = p.locator(".hit").first
    expect(first.locator(".hit-text")).to_have_text("ユーザーの猫の名前はタマ")
    expect(first.locator(".badge.leg")).to_have_text(["lexical", "vector"])
    expect(first.locator("mark")).to_have_text("タマ")
    watched.check()
    context.close()
