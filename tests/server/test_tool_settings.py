"""The seed tools over REST: `tools` rows with their schemas, and the per-agent switches."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from opencrab.core.tools import tool_id
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent

SEED_TOOLS = {  # seed 002 "Initial Data": name -> its properties' types
    "read_file": {"path": "string"},
    "write_file": {"path": "string", "content": "string"},
    "execute_command": {"command": "string"},
    "search_code": {"pattern": "string", "path": "string"},
    "http_request": {"url": "string", "method": "string"},
    "fetch_webpage": {"url": "string"},
}
OFF = {"executeCommand": False, "httpRequest": False, "fetchWebpage": False, "approvals": {}}


def test_the_seed_tools_are_listed_with_their_schemas(client: TestClient) -> None:
    listed = {t["name"]: t for t in client.get("/api/tools").json()}
    for name, properties in SEED_TOOLS.items():
        tool = listed[name]
        assert tool["id"] == tool_id(name)
        assert tool["description"]
        assert tool["schema"]["type"] == "object"
        for prop, kind in properties.items():
            assert tool["schema"]["properties"][prop]["type"] == kind
        assert client.get(f"/api/tools/{tool['id']}").json()["schema"] == tool["schema"]


def test_tool_settings_are_off_until_switched_on(client: TestClient) -> None:
    agent = new_agent(client)
    url = f"/api/agents/{agent['id']}/tool-settings"
    assert client.get(url).json() == OFF
    switched = client.put(url, json={"executeCommand": True, "fetch_webpage": True})
    assert switched.status_code == 200, switched.text
    assert switched.json() == {**OFF, "executeCommand": True, "fetchWebpage": True}
    by_name = client.get("/api/agents/aki/tool-settings").json()
    assert by_name == switched.json()
    replaced = client.put(url, json={"httpRequest": True})  # a PUT replaces: the rest off
    assert replaced.json() == {**OFF, "httpRequest": True}


def test_tool_settings_refuse_bad_input(client: TestClient) -> None:
    agent = new_agent(client)
    url = f"/api/agents/{agent['id']}/tool-settings"
    client.put(url, json={"httpRequest": True})
    message = error_of(client.put(url, json={"shell": True}), 400, "validation_error")
    assert "shell" in message
    error_of(client.put(url, json={"httpRequest": "maybe"}), 400, "validation_error")
    assert client.get(url).json() == {**OFF, "httpRequest": True}  # nothing lost
    error_of(client.get("/api/agents/nobody/tool-settings"), 404, "not_found")


def test_a_granted_and_switched_on_command_runs_in_a_turn(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = new_agent(client, toolIds=[tool_id("execute_command")])
    session_id = client.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    command = calls(("execute_command", {"command": "echo made > out.txt"}))
    scripted.then(command, speak("ok"), command, speak("ok"))
    first = client.post(f"/api/sessions/{session_id}/messages", json={"content": "go"}).json()
    refused = first["turn"]["actions"][0]
    assert refused["name"] == "execute_command"
    assert refused["success"] is False  # granted, but not switched on

    client.put(f"/api/agents/{agent['id']}/tool-settings", json={"executeCommand": True})
    second = client.post(f"/api/sessions/{session_id}/messages", json={"content": "go"}).json()
    ran = second["turn"]["actions"][0]
    assert (ran["name"], ran["success"]) == ("execute_command", True)
    made = list(data_dir.glob(f"agents/{agent['id']}/workspace/out.txt"))
    assert [p.read_text() for p in made] == ["made\n"]


def test_an_ungranted_seed_tool_is_never_run(
    client: TestClient, scripted: ScriptedProvider, data_dir: Path
) -> None:
    agent = new_agent(client)
    client.put(f"/api/agents/{agent['id']}/tool-settings", json={"executeCommand": True})
    session_id = client.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    scripted.then(calls(("execute_command", {"command": "echo made > out.txt"})), speak("ok"))
    turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "go"}).json()
    assert turn["turn"]["actions"][0]["success"] is False
    offered = {t.name for t in scripted.requests[0].tools or []}
    assert "execute_command" not in offered
    assert not list(data_dir.glob("agents/*/workspace/out.txt"))


def test_a_tool_is_granted_switched_and_held_by_name(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent = new_agent(client)
    url = f"/api/agents/{agent['id']}/tools/execute_command"
    put = client.put(url, json={"granted": True, "enabled": True, "approval": "always"})
    assert put.status_code == 200, put.text
    assert put.json() == {
        **put.json(),
        "name": "execute_command",
        "toolId": tool_id("execute_command"),
        "granted": True,
        "enabled": True,
        "approval": "always",
    }
    assert client.get(f"/api/agents/{agent['id']}").json()["toolIds"] == [
        tool_id("execute_command")
    ]
    settings = client.get(f"/api/agents/{agent['id']}/tool-settings").json()
    assert (settings["executeCommand"], settings["approvals"]) == (
        True,
        {"execute_command": "always"},
    )
    listed = {t["name"]: t for t in client.get("/api/agents/aki/tools").json()}
    assert set(SEED_TOOLS) <= set(listed)
    assert listed["read_file"]["granted"] is False
    assert listed["read_file"]["enabled"] is None  # no switch
    assert listed["execute_command"]["approval"] == "always"

    kept = client.put(url, json={"approval": "never"}).json()  # the rest is kept
    assert (kept["granted"], kept["enabled"], kept["approval"]) == (True, True, "never")
    revoked = client.put(url, json={"granted": False}).json()
    assert revoked["granted"] is False
    assert client.get(f"/api/agents/{agent['id']}").json()["toolIds"] == []


def test_a_bad_tool_name_is_refused_naming_it_and_nothing_changes(client: TestClient) -> None:
    agent = new_agent(client, toolIds=[tool_id("read_file")])
    base = f"/api/agents/{agent['id']}/tools"
    message = error_of(client.put(f"{base}/no_such_tool", json={"granted": True}), 404, "not_found")
    assert "no_such_tool" in message
    error_of(
        client.put(f"{base}/read_file", json={"approval": "sometimes"}), 400, "validation_error"
    )
    message = error_of(
        client.put(f"{base}/read_file", json={"enabled": True}), 400, "validation_error"
    )
    assert "read_file has no switch" in message
    error_of(client.put("/api/agents/nobody/tools/read_file", json={}), 404, "not_found")
    assert client.get(f"/api/agents/{agent['id']}").json()["toolIds"] == [tool_id("read_file")]
