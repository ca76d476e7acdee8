"""Agent-mode tasks become OpenTelemetry spans (opencrab.telemetry.work.AgentModeTasks),
exported to a real OTLP/HTTP receiver: a real runner over real git and tmux, the scripted
`other` sub-agent, one task that fails and one that never runs."""

from __future__ import annotations

from pathlib import Path

from opencrab.agentmode.tmux import TmuxServer
from opencrab.agentmode.validation import PlannedTask
from opencrab.config import Settings
from opencrab.config.telemetry import TelemetrySection
from opencrab.store import Database
from opencrab.telemetry import export_target
from opencrab.telemetry.export import TelemetrySdk
from opencrab.telemetry.work import AgentModeTasks, WorkSpans, trace_for
from tests.agentmode.runner_support import make_repo, make_runner, make_session, write_scripts
from tests.fakes.otlp_receiver import OtlpReceiver, attributes


async def test_tasks_are_spans_with_their_outcome(
    settings: Settings, db: Database, tmp_path: Path, tmux_server: TmuxServer
) -> None:
    repo = make_repo(tmp_path / "repo")
    runner = make_runner(settings, db, tmp_path, tmux_server)
    plan = [
        PlannedTask("task-001", "base", "write a"),
        PlannedTask("task-002", "broken", "fail", ("task-001",)),
        PlannedTask("task-003", "never", "after the broken one", ("task-002",)),
    ]
    session_id = make_session(runner.service, repo, plan)
    command = write_scripts(
        tmp_path / "scripts",
        {
            "task-001": [{"write": "a.txt", "content": "a"}],
            "task-002": [{"print": "broken"}, {"exit": 3}],
        },
    )
    with OtlpReceiver() as receiver:
        target = export_target(TelemetrySection(endpoint=receiver.url), {})
        assert target is not None
        sdk = TelemetrySdk.open(target)
        tasks = AgentModeTasks(WorkSpans(sdk), runner)
        runner.listeners.append(tasks.on_change)
        await runner.start(session_id, "other", command)
        await runner.wait(session_id)
        assert tasks.open == {}  # every task that ran has ended
        tasks.on_change(session_id, None)  # a later save of the whole session: nothing new
        sdk.shutdown()
        spans = {span.name: span for span in receiver.spans()}

    assert set(spans) == {"agent_mode.task base", "agent_mode.task broken"}
    base, broken = spans["agent_mode.task base"], spans["agent_mode.task broken"]
    trace = trace_for(session_id).to_bytes(16, "big")
    assert base.trace_id == broken.trace_id == trace  # one trace per agent-mode session
    base_attrs, broken_attrs = attributes(base.attributes), attributes(broken.attributes)
    assert base_attrs["opencrab.agent_mode.task.id"] == "task-001"
    assert base_attrs["opencrab.agent_mode.task.session_id"] == session_id
    assert base_attrs["opencrab.agent_mode.task.status"] == "Completed"
    assert "error.type" not in base_attrs
    assert broken_attrs["opencrab.agent_mode.task.status"] == "Failed"
    assert broken_attrs["error.type"] == "failed"
    assert broken.status.message == "the sub-agent exited with status 3"
    assert base.end_time_unix_nano <= broken.start_time_unix_nano  # in dependency order
