"""`opencrab llm chat|models|health|metrics|prices|price` against a fake OpenAI server and
the embedded model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.llm.router import offline_hint
from opencrab.store import Database
from opencrab.store.tables import import_sessions, llm_usage_metrics
from tests.fakes.corpora import CODEX_CORPUS as CORPUS
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import chunk, completion
from tests.fakes.ports import closed_port

CHAT = "/v1/chat/completions"
runner = CliRunner()
app = build_app()


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def no_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ollama and llama.cpp point at a closed port, whatever runs on this machine."""
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OLLAMA__BASE_URL", url)
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__LLAMACPP__BASE_URL", url)


@pytest.fixture
def openai_fake(fake_llm_server: FakeLlmServer, monkeypatch: pytest.MonkeyPatch) -> FakeLlmServer:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENCRAB_LLM__PROVIDERS__OPENAI__BASE_URL", fake_llm_server.url + "/v1")
    return fake_llm_server


def test_chat_json_records_cost_and_metrics(openai_fake: FakeLlmServer) -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 400},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    openai_fake.reply(CHAT, Reply(json=completion({"content": "Bonjour"}, usage=usage)))

    code, out, err = run("llm", "chat", "--model", "smart", "--json", "Say hello in French")

    assert code == 0, err
    doc = json.loads(out)
    assert doc["text"] == "Bonjour"
    assert doc["toolCalls"] == []
    assert doc["finishReason"] == "stop"
    assert (doc["provider"], doc["model"]) == ("openai", "gpt-5-mini-2025-08-07")
    assert doc["usage"] == {
        "input_tokens": 1000,
        "output_tokens": 200,
        "total_tokens": 1200,
        "cache_read_tokens": 400,
        "cache_write_tokens": 0,
        "reasoning_tokens": 50,
    }
    # smart = openai/gpt-5.2 at $1.75 in ($0.175 cached) / $14.00 out per million tokens
    assert doc["costUsd"] == pytest.approx(600 * 1.75e-6 + 400 * 0.175e-6 + 200 * 14e-6)
    assert isinstance(doc["latencyMs"], int)
    assert doc["metricsId"]
    sent = openai_fake.requests_to(CHAT)[-1].json
    assert sent["model"] == "gpt-5.2"
    assert sent["messages"] == [{"role": "user", "content": "Say hello in French"}]

    code, out, err = run("llm", "metrics", "--json", "--period", "day")
    assert code == 0, err
    [group] = json.loads(out)["groups"]
    assert group["key"] == "gpt-5.2"
    assert (group["calls"], group["errors"]) == (1, 0)
    assert (group["inputTokens"], group["outputTokens"]) == (1000, 200)
    assert group["costUsd"] == pytest.approx(doc["costUsd"])


def test_chat_streams_to_the_terminal(openai_fake: FakeLlmServer) -> None:
    usage = {"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}
    events: list[Any] = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo!"}),
        chunk({}, finish="stop"),
        chunk(None, usage=usage),
        "[DONE]",
    ]
    openai_fake.reply(CHAT, Reply(sse=events))

    code, out, err = run("llm", "chat", "--stream", "--purpose", "analysis", "Hi")

    assert code == 0, err
    assert out == "Hello!\n"
    sent = openai_fake.requests_to(CHAT)[-1].json
    assert sent["stream"] is True
    assert sent["model"] == "gpt-5-mini"  # [llm.models] analysis

    code, out, _ = run("llm", "metrics", "--json", "--group-by", "purpose")
    [group] = json.loads(out)["groups"]
    assert (group["key"], group["calls"], group["outputTokens"]) == ("analysis", 1, 3)
    assert group["avgTtftMs"] is not None


def test_chat_reads_the_prompt_from_stdin(openai_fake: FakeLlmServer) -> None:
    openai_fake.reply(CHAT, Reply(json=completion({"content": "4"})))
    code, out, err = run("llm", "chat", "--system", "Answer with a number.", "-", input="2+2?")
    assert code == 0, err
    assert out.strip() == "4"
    assert openai_fake.requests_to(CHAT)[-1].json["messages"] == [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "2+2?"},
    ]


def test_plain_output_is_not_wrapped(openai_fake: FakeLlmServer) -> None:
    long = " ".join(["crab"] * 60)
    openai_fake.reply(CHAT, Reply(json=completion({"content": long})))
    code, out, err = run("llm", "chat", "Say crab sixty times")
    assert code == 0, err
    assert out == long + "\n"


def test_auth_failure_is_reported_and_recorded(openai_fake: FakeLlmServer) -> None:
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    openai_fake.reply(CHAT, Reply(status=401, json=body))

    code, out, err = run("llm", "chat", "--model", "openai/gpt-5.2", "Hi")

    assert code == 1
    assert "Incorrect API key provided" in err
    assert "openai" in err
    assert len(openai_fake.requests_to(CHAT)) == 1  # a 401 is not retried elsewhere
    code, out, _ = run("llm", "metrics", "--json")
    [group] = json.loads(out)["groups"]
    assert (group["calls"], group["errors"]) == (1, 1)


def test_bad_options_are_usage_errors() -> None:
    code, _, err = run("llm", "chat", "--purpose", "dreaming", "Hi")
    assert code == 2
    assert "dreaming" in err
    code, _, err = run("llm", "metrics", "--group-by", "colour")
    assert code == 2
    assert "colour" in err
    code, _, err = run("llm", "metrics", "--period", "fortnight")
    assert code == 1
    assert "fortnight" in err


def test_models_and_health(openai_fake: FakeLlmServer) -> None:
    listed = [{"id": "gpt-5.2", "object": "model", "created": 1, "owned_by": "openai"}]
    openai_fake.reply("/v1/models", Reply(json={"object": "list", "data": listed}))

    code, out, err = run("llm", "models", "--json")
    assert code == 0, err
    rows = {row["provider"]: row for row in json.loads(out)}
    assert rows["openai"]["id"] == "gpt-5.2"
    assert rows["anthropic"] == {"provider": "anthropic", "error": "not configured"}
    assert rows["embedded"]["id"] == "smollm2-135m-instruct"
    assert "error" in rows["ollama"]  # the closed port

    code, out, err = run("llm", "health", "--json")
    assert code == 0, err
    health = {row["provider"]: row for row in json.loads(out)}
    assert health["openai"]["configured"]
    assert health["openai"]["healthy"]
    assert not health["anthropic"]["configured"]
    assert health["ollama"]["configured"]
    assert not health["ollama"]["healthy"]
    assert health["embedded"]["healthy"]


def test_with_no_provider_the_embedded_model_answers() -> None:
    code, out, err = run("llm", "chat", "--json", "--max-tokens", "8", "What is a crab?")

    assert code == 0, err
    assert " ".join(err.split()) == f"note: {offline_hint()}"  # once, [llm.providers.*] intact
    doc = json.loads(out)
    assert (doc["provider"], doc["model"]) == ("embedded", "smollm2-135m-instruct")
    assert doc["text"].strip()
    assert 0 < doc["usage"]["output_tokens"] <= 8
    assert doc["costUsd"] == 0.0
    code, out, _ = run("llm", "metrics", "--json", "--group-by", "provider")
    [group] = json.loads(out)["groups"]
    assert (group["key"], group["calls"], group["errors"]) == ("embedded", 1, 0)


def test_prices_a_new_price_and_repricing_imported_calls(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out, err = run("llm", "prices", "--data-dir", data, "--json")
    assert code == 0, err
    seeded = {(p["provider"], p["model"]): p for p in json.loads(out)["prices"]}
    assert seeded["openai", "gpt-5.2"]["cacheReadPricePer1m"] == 0.175
    assert seeded["anthropic", "claude-opus-4.6"]["cacheWritePricePer1m"] == 6.25
    assert seeded["ollama", "*"]["inputPricePer1m"] == 0.0
    # the corpus model has no price: its calls cost nothing, and the import says so
    code, out, err = run("import", "codex", str(CORPUS), "--data-dir", data)
    assert code == 0, err
    assert "opencrab llm price openai gpt-5.3-codex --input" in err
    code, out, err = run(
        "llm", "price", "openai", "gpt-5.3-codex", "--input", "2", "--output", "16",
        "--cache-read", "0.2", "--reprice", "--data-dir", data, "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["price"]["cacheReadPricePer1m"] == 0.2
    assert result["price"]["cacheWritePricePer1m"] is None
    metrics = json.loads(run("llm", "metrics", "--period", "all", "--data-dir", data, "--json")[1])
    (group,) = metrics["groups"]
    assert group["key"] == "gpt-5.3-codex"
    assert result["repriced"] == group["calls"] > 0
    db = Database(f"sqlite:///{tmp_path / 'data' / 'opencrab.db'}")
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                sa.func.sum(llm_usage_metrics.c.input_tokens),
                sa.func.sum(llm_usage_metrics.c.cache_read_tokens),
                sa.func.sum(llm_usage_metrics.c.output_tokens),
                sa.func.count(sa.distinct(llm_usage_metrics.c.cost_source)),
            )
        ).one()
        sessions = conn.execute(sa.select(sa.func.sum(import_sessions.c.cost_usd))).scalar_one()
    db.close()
    fresh_in, cached, out_tokens, sources = rows[0] - rows[1], rows[1], rows[2], rows[3]
    expected = (fresh_in * 2 + cached * 0.2 + out_tokens * 16) / 1e6
    assert group["costUsd"] == pytest.approx(expected)
    assert sources == 1  # all "pricing" now
    assert sessions == pytest.approx(expected)  # the import sessions' totals follow
    # the table shows it; bad prices are refused and change nothing
    code, out, _ = run("llm", "prices", "--data-dir", data)
    assert code == 0
    assert "gpt-5.3-codex" in out
    for bad, named in (("-1", "input price"), ("nan", "input price"), ("1e9", "input price")):
        code, out, err = run(
            "llm", "price", "openai", "gpt-5.3-codex", "--input", bad, "--output", "1",
            "--data-dir", data,
        )  # fmt: skip
        assert code != 0
        assert named in err
    code, _, err = run(
        "llm", "price", "openai", "x" * 201, "--input", "1", "--output", "1", "--data-dir", data
    )
    assert code != 0
    assert "model must be 1 to 200 characters" in err
    after = {(p["provider"], p["model"]): p for p in json.loads(
        run("llm", "prices", "--data-dir", data, "--json")[1]
    )["prices"]}  # fmt: skip
    assert after["openai", "gpt-5.3-codex"]["inputPricePer1m"] == 2.0


def test_the_help_lists_the_real_purposes_and_groups() -> None:
    from opencrab.cli import llm as llm_cli
    from opencrab.config.models import PURPOSES
    from opencrab.llm.metrics import GROUPS

    assert llm_cli.PURPOSE_NAMES == PURPOSES
    assert llm_cli.GROUP_NAMES == GROUPS
