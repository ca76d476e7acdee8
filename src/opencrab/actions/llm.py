"""LLM selection and meta-analysis actions (seed 001 llm-selection and llm-meta-analysis).

select_llm, get_available_models, get_current_llm_config, evaluate_response,
analyze_llm_usage, optimize_model_selection, get_llm_metrics, compare_models. The
figures come from the agent's own `llm_usage_metrics` rows (opencrab.llm.analysis).
"""

from __future__ import annotations

from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.config.models import ModelRef
from opencrab.core.agent import AgentStore
from opencrab.core.llm_config import effective_model, session_overrides, set_session_override
from opencrab.llm.analysis import (
    GOALS,
    GROUPINGS,
    PERIODS,
    analyze_usage,
    load_calls,
    optimize,
    since_for,
    stats_of,
)
from opencrab.llm.pricing import ModelPrice, PriceBook
from opencrab.plugins import hookimpl
from opencrab.prompts import prompts
from opencrab.store.repositories import metrics as metrics_repo

SELECTABLE_PURPOSES = ["thinking", "conversation", "analysis", "tool_calling", "creative"]
PERIOD = {"type": "string", "enum": [*PERIODS, "all"]}


def _schema(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


def _ref(ref: ModelRef | None) -> str | None:
    return None if ref is None else f"{ref.provider}/{ref.model}"


def _prices(ctx: ActionContext) -> PriceBook:
    with ctx.db.read() as conn:
        return PriceBook.load(conn)


async def _flush_metrics(ctx: ActionContext) -> None:
    """Store queued metrics rows first, so the turn's own calls are counted."""
    if ctx.router is not None and ctx.router.metrics is not None:
        await ctx.router.metrics.flush()


_PRICE_FIELDS = (
    "input_price_per_1m",
    "output_price_per_1m",
    "cache_read_price_per_1m",
    "cache_write_price_per_1m",
    "context_window",
)


def _price_fields(price: ModelPrice | None) -> dict[str, Any]:
    """A model's rates ($ per 1M tokens) and context window; all None without a price."""
    return {name: None if price is None else getattr(price, name) for name in _PRICE_FIELDS}


def _whitelist(ctx: ActionContext) -> list[str]:
    config = ctx.agent.llm_config
    return list(config.selectable_models or ctx.settings.llm.self_selection.allowed_aliases)


class SelectLlm(Action):
    """Choose the model for a purpose. Conversation, analysis and tool_calling pick the
    model of those calls; thinking and creative, chosen for this turn or this session,
    make the turn's own calls use that model (core/llm_config.turn_purpose); a permanent
    thinking model is the one agent mode plans with; a permanent creative one is refused
    (no call would use it)."""

    name = "select_llm"
    description = "Choose the model for a purpose by alias (fast, smart, reasoning, local, …)."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["purpose", "model_alias", "reason"],
        purpose={"type": "string", "enum": SELECTABLE_PURPOSES},
        model_alias={"type": "string", "minLength": 1, "maxLength": 100},
        reason={"type": "string", "minLength": 1, "maxLength": 2000},
        duration={"type": "string", "enum": ["this_turn", "this_session", "permanent"]},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        purpose, alias = args["purpose"], args["model_alias"]
        duration = args.get("duration", "this_turn")
        if not (
            ctx.agent.llm_config.allow_self_selection and ctx.settings.llm.self_selection.enabled
        ):
            return ActionResult.fail("self-selection of models is switched off for this agent")
        allowed = _whitelist(ctx)
        if alias not in allowed:
            return ActionResult.fail(
                prompts(ctx.agent.language).render(
                    "select_llm_not_allowed",
                    alias=repr(alias),
                    allowed=", ".join(allowed) or "empty",
                )
            )
        target = ctx.settings.llm.aliases.get(alias)
        if target is None:
            return ActionResult.fail(f"alias {alias!r} is not defined in [llm.aliases]")
        ref = f"{target.provider}/{target.model}"
        if purpose == "tool_calling" and ctx.router is not None:
            provider = ctx.router.providers.get(target.provider)
            if provider is not None and not provider.supports_function_calling():
                return ActionResult.fail(f"{ref} cannot call tools; pick another model")
        if purpose == "creative" and duration == "permanent":
            return ActionResult.fail(
                "no call uses a permanent creative model: creative work is chosen for now; "
                "use duration this_turn or this_session, and this turn's (or session's) "
                "calls use it"
            )
        if duration == "this_turn":
            ctx.turn.llm_overrides.pop(purpose, None)  # the latest choice is the last one
            ctx.turn.llm_overrides[purpose] = ref
        elif duration == "this_session":
            if not ctx.session_id:
                return ActionResult.fail("there is no session; use this_turn or permanent")
            set_session_override(ctx.db, ctx.session_id, ctx.agent_id, purpose, ref)
        else:
            config = ctx.agent.llm_config.model_copy(deep=True)
            setattr(config.models, purpose, ModelRef(provider=target.provider, model=target.model))
            AgentStore(ctx.db, ctx.settings).save_llm_config(ctx.agent_id, config)
            ctx.agent.llm_config = config
        return ActionResult.ok(
            {
                "selected": alias,
                "model": ref,
                "purpose": purpose,
                "reason": args["reason"],
                "duration": duration,
            },
            SideEffect(type="llm_switched", purpose=purpose, model=ref),
        )


class GetAvailableModels(Action):
    name = "get_available_models"
    description = "The model aliases you may select, with provider, model and price."
    parameters: ClassVar[dict[str, Any]] = _schema([])

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        prices = _prices(ctx)
        models = []
        for alias in _whitelist(ctx):
            target = ctx.settings.llm.aliases.get(alias)
            if target is None:
                continue
            price = prices.find(target.provider, target.model)
            provider = ctx.router.providers.get(target.provider) if ctx.router else None
            models.append(
                {
                    "alias": alias,
                    "provider": target.provider,
                    "model": target.model,
                    **_price_fields(price),
                    "available": provider is not None and provider.is_configured(),
                }
            )
        return ActionResult.ok({"models": models})


class GetCurrentLlmConfig(Action):
    name = "get_current_llm_config"
    description = "Your LLM configuration and what is in force for each purpose right now."
    parameters: ClassVar[dict[str, Any]] = _schema([])

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        config = ctx.agent.llm_config
        session = session_overrides(ctx.db, ctx.session_id, ctx.agent_id) if ctx.session_id else {}
        effective = {
            purpose: _ref(effective_model(config, purpose, ctx.turn.llm_overrides, session))
            for purpose in SELECTABLE_PURPOSES
        }
        return ActionResult.ok(
            {
                "config": config.model_dump(mode="json"),
                "this_turn": dict(ctx.turn.llm_overrides),
                "this_session": session,
                "effective": effective,
                "default": _ref(config.default_ref())
                or (str(ctx.router.default) if ctx.router is not None else None),
            }
        )


class EvaluateResponse(Action):
    name = "evaluate_response"
    description = "Rate an LLM answer of yours (default: the latest) for the meta-analysis."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["quality_score", "task_success", "evaluation"],
        metrics_id={"type": "string", "maxLength": 64},
        quality_score={"type": "number", "minimum": 0.0, "maximum": 1.0},
        task_success={"type": "boolean"},
        evaluation={"type": "string", "minLength": 1, "maxLength": 4000},
        would_use_again={"type": "boolean"},
        better_model_suggestion={"type": "string", "maxLength": 200},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await _flush_metrics(ctx)
        metrics_id = args.get("metrics_id") or ctx.turn.last_metrics_id
        if not metrics_id:
            return ActionResult.fail("no LLM call to evaluate yet; pass metrics_id")
        with ctx.db.write() as conn:
            done = metrics_repo.evaluate(
                conn,
                metrics_id,
                ctx.agent_id,
                quality_score=args["quality_score"],
                task_success=args["task_success"],
                self_evaluation=args["evaluation"],
                would_use_again=args.get("would_use_again"),
                better_model_suggestion=args.get("better_model_suggestion"),
            )
        if not done:
            return ActionResult.fail(f"no LLM call {metrics_id} of yours to evaluate")
        return ActionResult.ok({"metrics_id": metrics_id, "recorded": True})


class AnalyzeLlmUsage(Action):
    name = "analyze_llm_usage"
    description = "Analyse your own LLM usage: cost, quality, latency, recommendations."
    parameters: ClassVar[dict[str, Any]] = _schema(
        [],
        period=PERIOD,
        group_by={"type": "string", "enum": list(GROUPINGS)},
        focus={
            "type": "string",
            "enum": ["cost", "quality", "latency", "efficiency", "cost_efficiency", "all"],
        },
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await _flush_metrics(ctx)
        analysis = analyze_usage(
            ctx.db,
            ctx.agent_id,
            period=args.get("period", "last_week"),
            group_by=args.get("group_by", "model"),
        )
        focus = args.get("focus", "all")
        return ActionResult.ok(analysis.as_json("efficiency" if "efficiency" in focus else focus))


class OptimizeModelSelection(Action):
    name = "optimize_model_selection"
    description = "Suggest (and optionally apply) the best model per purpose from your history."
    parameters: ClassVar[dict[str, Any]] = _schema(
        [],
        optimization_goal={"type": "string", "enum": list(GOALS)},
        budget_limit_usd={"type": "number", "exclusiveMinimum": 0},
        min_quality_threshold={"type": "number", "minimum": 0, "maximum": 1},
        apply_immediately={"type": "boolean"},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await _flush_metrics(ctx)
        config = ctx.agent.llm_config
        current = {p: _ref(getattr(config.models, p)) for p in SELECTABLE_PURPOSES}
        result = optimize(
            ctx.db,
            ctx.agent_id,
            current,
            goal=args.get("optimization_goal", "balance"),
            budget_limit_usd=args.get("budget_limit_usd"),
            min_quality=args.get("min_quality_threshold", 0.7),
        )
        suggested = config.model_copy(deep=True)
        for purpose, change in result.by_purpose().items():
            if purpose in SELECTABLE_PURPOSES or purpose == "embedding":
                provider, model = change.suggested_model.split("/", 1)
                setattr(suggested.models, purpose, ModelRef(provider=provider, model=model))
        applied = False
        if args.get("apply_immediately") and result.by_task:
            AgentStore(ctx.db, ctx.settings).save_llm_config(ctx.agent_id, suggested)
            ctx.agent.llm_config = suggested
            applied = True
        data: dict[str, Any] = {
            "current_config": config.model_dump(mode="json"),
            "optimized_config": suggested.model_dump(mode="json"),
            "expected_savings": result.expected_cost_reduction,
            "expected_quality_change": result.expected_quality_change,
            "task_specific_recommendations": {k: v.as_json() for k, v in result.by_task.items()},
            "calls_considered": result.calls_considered,
            "applied": applied,
        }
        if result.calls_considered == 0:
            data["note"] = "no LLM calls in the last month: nothing to optimise yet"
        effects = [
            SideEffect(type="llm_switched", purpose=p, model=c.suggested_model)
            for p, c in result.by_purpose().items()
            if applied
        ]
        return ActionResult.ok(data, *effects)


class GetLlmMetrics(Action):
    name = "get_llm_metrics"
    description = "Your raw LLM call statistics for a period, grouped."
    parameters: ClassVar[dict[str, Any]] = _schema(
        [], period=PERIOD, group_by={"type": "string", "enum": list(GROUPINGS)}
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await _flush_metrics(ctx)
        period = args.get("period", "last_day")
        group_by = args.get("group_by", "model")
        calls = load_calls(ctx.db, ctx.agent_id, since=since_for(period))
        groups: dict[str, list[Any]] = {}
        for call in calls:
            key = call.ref if group_by == "model" else getattr(call, group_by)
            groups.setdefault(str(key) if key is not None else "(none)", []).append(call)
        return ActionResult.ok(
            {
                "period": period,
                "group_by": group_by,
                "total": stats_of(calls).as_json(),
                "groups": {k: stats_of(v).as_json() for k, v in sorted(groups.items())},
            }
        )


class CompareModels(Action):
    name = "compare_models"
    description = "Compare models (aliases or provider/model) on your history and on price."
    parameters: ClassVar[dict[str, Any]] = _schema(
        ["models"],
        models={
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "minItems": 2,
            "maxItems": 10,
        },
        period=PERIOD,
        purpose={"type": "string", "maxLength": 32},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await _flush_metrics(ctx)
        period = args.get("period", "last_month")
        calls = load_calls(ctx.db, ctx.agent_id, since=since_for(period))
        if args.get("purpose"):
            calls = [c for c in calls if c.purpose == args["purpose"]]
        prices = _prices(ctx)
        rows = []
        for name in args["models"]:
            alias = ctx.settings.llm.aliases.get(name)
            ref = f"{alias.provider}/{alias.model}" if alias else name
            if "/" not in ref:
                return ActionResult.fail(f"{name!r} is neither an alias nor provider/model")
            provider, model = ref.split("/", 1)
            price = prices.find(provider, model)
            mine = [c for c in calls if c.ref == ref]
            rows.append(
                {
                    "model": ref,
                    "alias": name if alias else None,
                    "history": stats_of(mine).as_json(),
                    **_price_fields(price),
                }
            )
        return ActionResult.ok({"period": period, "models": rows})


@hookimpl
def register_actions(register: Any) -> None:
    for action in (
        SelectLlm(),
        GetAvailableModels(),
        GetCurrentLlmConfig(),
        EvaluateResponse(),
        AnalyzeLlmUsage(),
        OptimizeModelSelection(),
        GetLlmMetrics(),
        CompareModels(),
    ):
        register(action)
