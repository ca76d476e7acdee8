"""Learning and memory actions (seed 001 self-learning skill).

learn_from_experience, learn_from_peer, reflect_and_learn, search_my_history,
summarize_and_save, create_my_skill. Acquired skills go to the `skills` table with their
source (experience, peer, reflection); reflect_and_learn asks the analysis model to find
the lesson in the agent's recent logs. create_my_skill may name only actions the agent may
already call (core/permissions.py); anything else is refused before anything is stored.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.core.memory import SessionLog
from opencrab.core.permissions import check_learned_actions
from opencrab.errors import LlmError
from opencrab.llm.router import CallInfo
from opencrab.llm.types import ChatRequest, Message
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.prompts import prompts

TEXT = {"type": "string", "maxLength": 8000}
NAME = {"type": "string", "minLength": 1, "maxLength": 100}
REFLECTION_LOGS = 40


def _schema(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


def _skill_result(ctx: ActionContext, skill_id: str, name: str, message: str) -> ActionResult:
    """The acquired skill, with `message` (a prompts key) in the agent's language."""
    text = prompts(ctx.agent.language)[message]
    return ActionResult.ok(
        {"skill_id": skill_id, "skill_name": name, "message": text},
        SideEffect(type="skill_acquired", skill_id=skill_id),
    )


class LearnFromExperience(Action):
    name = "learn_from_experience"
    description = "Turn a success or failure into a reusable skill."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["experience", "outcome", "lesson"],
        experience={**TEXT, "minLength": 1, "description": "What happened."},
        outcome={"type": "string", "enum": ["success", "failure", "partial"]},
        lesson={**TEXT, "minLength": 1, "description": "What you learned."},
        skill_name={**NAME, "description": "A name for the skill."},
        situation_pattern={**TEXT, "description": "When the skill applies."},
        guidance={**TEXT, "description": "What to do in that situation."},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        name = args.get("skill_name") or _name_from(args["lesson"])
        skill = ctx.skills.acquire(
            name=name,
            description=args["lesson"],
            guidance=args.get("guidance") or args["lesson"],
            situation_pattern=args.get("situation_pattern", ""),
            source="experience",
            source_context=f"[{args['outcome']}] {args['experience']}",
        )
        return _skill_result(ctx, skill.id, skill.name, "learned_from_experience")


class LearnFromPeer(Action):
    name = "learn_from_peer"
    description = "Learn a skill from another participant's effective behaviour."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["peer_name", "observation", "lesson"],
        peer_id={"type": "string", "maxLength": 64},
        peer_name=NAME,
        observation={**TEXT, "minLength": 1, "description": "What the peer did."},
        lesson={**TEXT, "minLength": 1, "description": "The lesson, in your own words."},
        skill_name=NAME,
        situation_pattern=TEXT,
        guidance=TEXT,
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        name = args.get("skill_name") or _name_from(args["lesson"])
        peer = args["peer_name"] + (f" ({args['peer_id']})" if args.get("peer_id") else "")
        skill = ctx.skills.acquire(
            name=name,
            description=args["lesson"],
            guidance=args.get("guidance") or args["lesson"],
            situation_pattern=args.get("situation_pattern", ""),
            source="peer",
            source_context=f"{peer}: {args['observation']}",
        )
        return _skill_result(ctx, skill.id, skill.name, "learned_from_peer")


class ReflectAndLearn(Action):
    name = "reflect_and_learn"
    description = (
        "Look back over your recent logs and extract a lesson as a skill (uses the analysis model)."
    )
    parameters: ClassVar[dict[str, Any]] = _schema(
        [],
        session_id={"type": "string", "maxLength": 64},
        focus={**TEXT, "description": "What to reflect on (optional)."},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        if ctx.router is None:
            return ActionResult.fail("reflection needs a model and none is available")
        session_id = args.get("session_id")
        logs = (
            ctx.memory.session_logs(session_id, limit=REFLECTION_LOGS)
            if session_id
            else ctx.memory.recent_logs(limit=REFLECTION_LOGS)
        )
        if not logs:
            return ActionResult.ok({"learned": False, "reason": "no logs to reflect on yet"})
        transcript = "\n".join(f"[{log.log_type}] {log.content[:500]}" for log in logs)
        texts = prompts(ctx.agent.language)
        focus = args.get("focus") or texts["reflect_default_focus"]
        request = ChatRequest(
            model=ctx.model_for("analysis"),
            messages=[
                Message.system(texts["reflect_system"]),
                Message.user(texts.render("reflect_user", focus=focus, log=transcript)),
            ],
            max_tokens=400,
        )
        info = CallInfo(
            purpose="analysis",
            task_type="reflection",
            agent_id=ctx.agent_id,
            session_id=ctx.session_id,
        )
        try:
            reply = await ctx.router.chat(request, info)
        except LlmError as exc:
            return ActionResult.fail(f"reflection failed: {exc}")
        lesson = _json_object(reply.text)
        if lesson is None:
            return ActionResult.ok(
                {"learned": False, "reason": "the model gave no usable lesson", "raw": reply.text}
            )
        name = lesson.get("skill_name")
        if not isinstance(name, str) or not name.strip():
            return ActionResult.ok({"learned": False, "reason": "nothing new to learn"})
        description = str(lesson.get("description") or name)
        skill = ctx.skills.acquire(
            name=name.strip()[:100],
            description=description,
            guidance=str(lesson.get("guidance") or description),
            situation_pattern=str(lesson.get("situation_pattern") or ""),
            source="reflection",
            source_context=f"reflection over {len(logs)} log entries; focus: {focus}",
        )
        result = _skill_result(ctx, skill.id, skill.name, "learned_from_reflection")
        result.data["learned"] = True
        return result


class SearchMyHistory(Action):
    name = "search_my_history"
    description = (
        "Search your own past conversations and actions; each hit has its time. A query "
        "naming a time (last Tuesday, yesterday, 先週の火曜日, 3日前) looks in that span."
    )
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["query"],
        query={"type": "string", "minLength": 1, "maxLength": 500},
        limit={"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        session_id={"type": "string", "maxLength": 64},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await run_blocking(
            ctx.memory.search_detail,
            args["query"],
            limit=args.get("limit", 10),
            session_id=args.get("session_id"),
        )
        data: dict[str, Any] = {
            "query": args["query"],
            "count": len(found.hits),
            "search": found.note,  # hybrid (both legs) or lexical only, and why
            # each with created_at and the legs that found it
            "results": [r.model_dump(mode="json") for r in found.hits],
        }
        if found.window is not None:  # "last Tuesday", 昨日: the span searched first
            data["window"] = found.window.as_json()
        return ActionResult.ok(data)


class SummarizeAndSave(Action):
    name = "summarize_and_save"
    description = "Save a summary you wrote to a file in your workspace."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["content", "filename"],
        content={"type": "string", "minLength": 1, "maxLength": 200_000},
        filename={"type": "string", "minLength": 1, "maxLength": 1024},
        summary_type={"type": "string", "enum": ["session", "topic", "search", "daily", "other"]},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        kind = args.get("summary_type", "other")
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        text = f"<!-- summary: {kind}, {stamp} -->\n{args['content'].rstrip()}\n"
        written = await run_blocking(ctx.workspace.write, args["filename"], text)
        if ctx.session_id:
            ctx.memory.append_session_log(
                SessionLog(
                    session_id=ctx.session_id,
                    log_type="system",
                    content=f"summary saved to {args['filename']}: {args['content'][:300]}",
                    speaker_id=ctx.agent_id,
                    metadata={"summary_type": kind, "path": args["filename"]},
                )
            )
        return ActionResult.ok(
            {"path": args["filename"], "bytes": written, "summary_type": kind},
            SideEffect(type="file_written", path=args["filename"]),
        )


class CreateMySkill(Action):
    name = "create_my_skill"
    description = (
        "Write what you learned as your own skill: stored with your skills and saved as "
        "skills/<name>.skill.md in your workspace. 自作スキルの作成"
    )
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["name", "description", "guidance"],
        name=NAME,
        description={**TEXT, "minLength": 1},
        situation_pattern=TEXT,
        guidance={**TEXT, "minLength": 1},
        actions={"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 50},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        check_learned_actions(args.get("actions", []), ctx.agent, ctx.skills, ctx.registry)
        skill = ctx.skills.acquire(
            name=args["name"],
            description=args["description"],
            guidance=args["guidance"],
            situation_pattern=args.get("situation_pattern", ""),
            source="reflection",
            source_context="created by the agent (create_my_skill)",
            actions=args.get("actions", []),
        )
        path = f"skills/{_slug(args['name'])}.skill.md"
        await run_blocking(ctx.workspace.write, path, _skill_file(args, ctx))
        result = _skill_result(ctx, skill.id, skill.name, "created_own_skill")
        result.data["path"] = path
        result.side_effects.append(SideEffect(type="file_written", path=path))
        return result


def _name_from(lesson: str) -> str:
    first = lesson.strip().splitlines()[0] if lesson.strip() else "lesson"
    return first[:60]


def _slug(name: str) -> str:
    slug = re.sub(r"[^\w-]+", "-", name.strip().lower(), flags=re.UNICODE).strip("-")
    return slug[:80] or "skill"


def _skill_file(args: dict[str, Any], ctx: ActionContext) -> str:
    """A skill file of `args`, its section headings in the agent's language."""
    texts = prompts(ctx.agent.language)
    actions = "".join(f"\n  - {a}" for a in args.get("actions", []))
    front = (
        f"---\nname: {json.dumps(args['name'], ensure_ascii=False)}\n"
        f"description: {json.dumps(args['description'], ensure_ascii=False)}\n"
        f"version: 1\nactions:{actions or ' []'}\n---\n"
    )
    body = f"\n# {args['name']}\n\n"
    if args.get("situation_pattern"):
        body += f"{texts['skill_file_situation']}\n{args['situation_pattern']}\n\n"
    return front + body + f"{texts['skill_file_guidance']}\n{args['guidance']}\n"


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (fenced or bare), else None."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


@hookimpl
def register_actions(register: Any) -> None:
    for action in (
        LearnFromExperience(),
        LearnFromPeer(),
        ReflectAndLearn(),
        SearchMyHistory(),
        SummarizeAndSave(),
        CreateMySkill(),
    ):
        register(action)
