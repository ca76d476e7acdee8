"""Skills sent and read as skill files over REST: errors at their line, version history."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.server.conftest import error_of, new_agent

SKILL = """---
name: 要約のコツ
description: 長い議論を短く要約する
situation_pattern: 議論が長くなった時
actions:
  - send_speech
---

# 要約の手順

1. 決定事項を先に書く。
2. 未決事項を分ける。
"""


def line_error(response: Any, line: int) -> str:
    """The message of a 400 invalid_skill_file at `line`, after checking its shape."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert body == {"error": "invalid_skill_file", "message": body["message"], "line": line}
    assert body["message"].startswith(f"line {line}: ")
    return str(body["message"])


def test_a_skill_added_as_markdown_is_read_back_as_fields_and_markdown(
    client: TestClient,
) -> None:
    base = f"/api/agents/{new_agent(client)['id']}/skills"
    added = client.post(base, json={"markdown": SKILL, "source": "research"})
    assert added.status_code == 201, added.text
    skill = added.json()
    assert (skill["name"], skill["description"], skill["situationPattern"]) == (
        "要約のコツ",
        "長い議論を短く要約する",
        "議論が長くなった時",
    )
    assert (skill["actions"], skill["source"], skill["version"]) == (
        ["send_speech"],
        "research",
        1,
    )
    assert skill["guidance"] == "# 要約の手順\n\n1. 決定事項を先に書く。\n2. 未決事項を分ける。"
    assert skill["recentScores"] == []
    again = client.get(f"{base}/{skill['id']}").json()
    assert again == skill
    # its markdown goes back in unchanged: an edit of nothing but the guidance
    edited_text = skill["markdown"].replace("未決事項を分ける", "未決事項は別に書く")
    edited = client.put(f"{base}/{skill['id']}", json={"markdown": edited_text})
    assert edited.status_code == 200, edited.text
    assert edited.json()["version"] == 2
    assert edited.json()["guidance"].endswith("2. 未決事項は別に書く。")
    assert edited.json()["situationPattern"] == "議論が長くなった時"
    listed = {s["name"]: s for s in client.get(base).json()}
    assert listed["要約のコツ"]["markdown"] == edited.json()["markdown"]


def test_mistakes_in_markdown_are_reported_at_their_line(client: TestClient) -> None:
    base = f"/api/agents/{new_agent(client)['id']}/skills"
    unclosed = SKILL.replace("description: 長い", 'description: "長い')
    assert "never closed" in line_error(client.post(base, json={"markdown": unclosed}), 3)
    unknown_key = SKILL.replace("actions:", "colour: red\nactions:")
    message = line_error(client.post(base, json={"markdown": unknown_key}), 5)
    assert message == "line 5: unknown frontmatter key 'colour'"
    # an action the agent cannot call is refused at the action's own line
    no_such = SKILL.replace("  - send_speech", "  - send_speech\n  - launch_rockets")
    assert "launch_rockets (no such action)" in line_error(
        client.post(base, json={"markdown": no_such}), 7
    )
    client.post(f"{base}/workspace-management/toggle", json={"active": False})
    switched_off = SKILL.replace("  - send_speech", "  - send_speech\n  - ws_write")
    message = line_error(client.post(base, json={"markdown": switched_off}), 7)
    assert "ws_write ('workspace-management', which is switched off)" in message
    empty_body = SKILL.split("# 要約")[0]
    assert "is empty" in line_error(client.post(base, json={"markdown": empty_body}), 8)
    assert [s for s in client.get(base).json() if s["source"] != "standard"] == []


def test_markdown_and_fields_are_not_mixed_and_fields_still_need_their_parts(
    client: TestClient,
) -> None:
    base = f"/api/agents/{new_agent(client)['id']}/skills"
    both = client.post(base, json={"markdown": SKILL, "guidance": "other"})
    assert "not both (also given: guidance)" in error_of(both, 400, "validation_error")
    missing = client.post(base, json={"name": "x", "description": "d"})
    assert error_of(missing, 400, "validation_error").startswith("guidance: required")
    nothing = client.post(base, json={})
    assert error_of(nothing, 400, "validation_error").startswith("name: required")


def test_editing_as_markdown_keeps_the_name_and_refuses_a_stale_version(
    client: TestClient,
) -> None:
    base = f"/api/agents/{new_agent(client)['id']}/skills"
    skill = client.post(base, json={"markdown": SKILL}).json()
    renamed = skill["markdown"].replace("要約のコツ", "別の名前")
    assert "the name cannot change" in line_error(
        client.put(f"{base}/{skill['id']}", json={"markdown": renamed}), 2
    )
    # the agent refines the skill while the operator edits version 1
    client.post(base, json={"name": "要約のコツ", "description": "d2", "guidance": "g2"})
    stale = skill["markdown"].replace("決定事項を先に", "決定事項を最初に")
    assert "version: 1" in stale
    conflict = client.put(f"{base}/{skill['id']}", json={"markdown": stale})
    message = error_of(conflict, 409, "conflict")
    assert "changed since version 1 was read" in message
    assert client.get(f"{base}/{skill['id']}").json()["guidance"] == "g2"
    # without a version line the edit applies to whatever is current
    unversioned = stale.replace("version: 1\n", "")
    assert (
        client.put(f"{base}/{skill['id']}", json={"markdown": unversioned}).json()["version"] == 3
    )
    standard = client.get(f"{base}/autonomous").json()
    refused = client.put(f"{base}/autonomous", json={"markdown": standard["markdown"]})
    assert "standard skill" in error_of(refused, 409, "conflict")


def test_version_history_over_rest(client: TestClient) -> None:
    base = f"/api/agents/{new_agent(client)['id']}/skills"
    skill = client.post(
        base, json={"markdown": SKILL, "source": "peer", "sourceContext": "Bob の要約"}
    ).json()
    client.put(f"{base}/{skill['id']}", json={"guidance": "三行で要約する。"})
    versions = client.get(f"{base}/{skill['id']}/versions")
    assert versions.status_code == 200, versions.text
    body = versions.json()
    assert [(v["version"], v["change"]) for v in body] == [(2, "edited"), (1, "created")]
    assert body[1]["sourceContext"] == "Bob の要約"
    assert body[1]["guidance"].startswith("# 要約の手順")
    assert body[0]["markdown"].endswith("三行で要約する。\n")
    assert set(body[0]) >= {"createdAt", "situationPattern", "actions", "source"}
    standard = client.get(f"{base}/autonomous/versions").json()
    assert [(v["version"], v["change"]) for v in standard] == [(1, "created")]
    error_of(client.get(f"{base}/nope/versions"), 404, "not_found")
