"""Speaking actions (seed 001 dispatcher "共通アクション" and the autonomous skill).

send_speech, send_noreact, declare_done, update_impression, generate_inner_voice, and
broadcast_guidance for facilitators. Speech is not sent from here: the engine records
the turn's speech (message event, speech log, session message) and the gateway
delivers it; these actions put it in the turn state.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.actions.workspace import object_schema
from opencrab.core.memory import SessionLog
from opencrab.plugins import hookimpl
from opencrab.store.repositories import sessions as repo

MAX_SPEECH_CHARS = 8_000


def _text(description: str, *, max_length: int = MAX_SPEECH_CHARS) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description}


class SendSpeech(Action):
    name = "send_speech"
    description = "Say something to the conversation (ends your turn)."
    parameters: ClassVar[dict[str, Any]] = object_schema(["content"], content=_text("What to say."))
    ends_turn = True

    store_only = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        content = args["content"].strip()
        if not content:
            return ActionResult.fail("content is empty: say something or call send_noreact")
        return ActionResult.ok({"sent": True, "characters": len(content)}, _speak(ctx, content))


class BroadcastGuidance(Action):
    name = "broadcast_guidance"
    description = (
        "Facilitators only: guide every participant, e.g. open a new phase (ends your turn)."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["content"],
        content=_text("The guidance for all participants."),
        phase={"type": "string", "maxLength": 32, "description": "The phase it opens."},
    )
    ends_turn = True

    store_only = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        content = args["content"].strip()
        if not content:
            return ActionResult.fail("content is empty")
        phase = args.get("phase")
        if phase and ctx.session_id:
            session_id = ctx.session_id
            ctx.write(lambda conn: repo.set_phase(conn, session_id, phase))
        return ActionResult.ok({"sent": True, "phase": phase}, _speak(ctx, content))


class SendNoreact(Action):
    name = "send_noreact"
    description = "Stay silent this time (ends your turn without speaking)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": 1000}},
        "additionalProperties": False,
    }
    ends_turn = True

    store_only = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        ctx.turn.no_react = True
        return ActionResult.ok({"silent": True, "reason": args.get("reason", "")})


class DeclareDone(Action):
    name = "declare_done"
    description = (
        "Declare that you have nothing more to add; the discussion ends when every "
        "participant has declared done (ends your turn)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": 1000}},
        "additionalProperties": False,
    }
    ends_turn = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        ctx.turn.done = True
        done_count = None
        if ctx.session_id:
            done_count = _declare_done(ctx)
        return ActionResult.ok(
            {"done": True, "done_count": done_count, "reason": args.get("reason", "")},
            SideEffect(type="done"),
        )


class UpdateImpression(Action):
    name = "update_impression"
    description = "Record your impression of another participant (kept per session)."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["target_id", "target_name"],
        target_id={"type": "string", "minLength": 1, "maxLength": 64},
        target_name={"type": "string", "minLength": 1, "maxLength": 200},
        personality={"type": "string", "maxLength": 2000},
        communication_style={"type": "string", "maxLength": 2000},
        recent_behavior={"type": "string", "maxLength": 2000},
        agreement={
            "type": "string",
            "maxLength": 200,
            "description": "How far you agree: 賛成, 中立, 反対, …",
        },
        notes={"type": "string", "maxLength": 4000},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        if not ctx.session_id:
            return ActionResult.fail("impressions are kept per session; there is none")
        impression = ctx.memory.update_impression(
            ctx.session_id,
            args["target_id"],
            args["target_name"],
            personality=args.get("personality"),
            communication_style=args.get("communication_style"),
            recent_behavior=args.get("recent_behavior"),
            agreement=args.get("agreement"),
            notes=args.get("notes"),
            turn=ctx.turn.turn_number or None,
        )
        return ActionResult.ok(impression.model_dump(mode="json"))


class GenerateInnerVoice(Action):
    name = "generate_inner_voice"
    description = "Think to yourself; the thought is logged as inner voice, nobody hears it."
    parameters: ClassVar[dict[str, Any]] = object_schema(["content"], content=_text("The thought."))

    store_only = True

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        content = args["content"].strip()
        ctx.turn.inner_voice.append(content)
        if ctx.session_id:
            thought = SessionLog(
                session_id=ctx.session_id,
                log_type="inner_voice",
                content=content,
                speaker_id=ctx.agent_id,
                turn_number=ctx.turn.turn_number or None,
            )
            ctx.log(thought)
        return ActionResult.ok({"recorded": True})


def _speak(ctx: ActionContext, content: str) -> SideEffect:
    """Put `content` in the turn's speech and remember when the agent last spoke in the
    session (for the heartbeat's checks); the side effect saying it was sent."""
    ctx.turn.speeches.append(content)
    if ctx.session_id:
        now = datetime.now(UTC)
        agent_id, session_id = ctx.agent_id, ctx.session_id
        ctx.write(lambda conn: repo.mark_speech(conn, agent_id, session_id, now))
    return SideEffect(type="message_sent", channel=ctx.session_id or "direct", content=content)


def _declare_done(ctx: ActionContext) -> int:
    assert ctx.session_id is not None
    return repo.declare_done(ctx.db, ctx.agent_id, ctx.session_id)


@hookimpl
def register_actions(register: Any) -> None:
    for action in (
        SendSpeech(),
        SendNoreact(),
        DeclareDone(),
        UpdateImpression(),
        GenerateInnerVoice(),
        BroadcastGuidance(),
    ):
        register(action)
