"""Budget reservations: every LLM call under a cap first reserves its estimated cost.

`BudgetGuard` is the router's guard (LlmRouter.guard, installed by the Runtime), so every
call and every fallback attempt of every caller — turns, compaction, persona previews,
agent-mode plans, the connection test of the LLM settings — goes through it. Before an
attempt it reserves the attempt's estimated cost atomically against cap − spent −
reserved for each cap that applies: the agent's daily and monthly budget, the ticket's
`maxCostUsd` for the stretch, the fleet's daily and monthly cap (calls for no agent,
"system", count against the fleet's). Reservations are rows in the store
(store/repositories/reservations.py: SQLite inside `BEGIN IMMEDIATE`, PostgreSQL under
advisory transaction locks), so they hold across processes; the attempt's metrics row
settles its reservation in the transaction that stores it (the real cost takes the
estimate's place), and an attempt cancelled before it has one releases it. A
reservation names its process and expires after `[budgets] reservation_ttl_secs`
(default `[agent] turn_timeout_secs` + 120 s), so a crashed process's reservations
lapse. A call that does not fit is refused with BudgetExceeded naming the cap, what is
spent, what calls running now hold and the estimate; alerts at 80 % and 100 % of a cap
are recorded and delivered as before (core/budgets.py).

The estimate (`estimate_usd`): input tokens counted cheaply from the request — the
engine's context count (about 4 ASCII characters or 1 wide character per token, plus a
few per message) over every message and tool definition — and output tokens from the
request's `max_tokens`, else `[budgets] reserve_output_tokens` (1024); priced at the
model's input and output rates with cache discounts ignored, so it errs high. A call
may still cost more than its estimate when it sets no `max_tokens` and the model writes
more than the default: a cap is overshot by at most that error of the calls running.

A model the price table has no price for is refused under any money cap: its calls are
recorded at $0, so no cap could ever count them, and a guessed estimate would hold only
while the call runs. The refusal names the model and how to price it (`opencrab llm price`
or the Costs page). Local providers (ollama, llamacpp, embedded) declare $0 default
prices (their `ProviderFacts`) and run freely.

Example:
    router.guard = BudgetGuard(db, settings, router.price_book, outlets)
    info = CallInfo(agent_id=agent.id, budget=CallBudget.of(agent))
    await router.chat(request, info)  # BudgetExceeded when the call does not fit
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentStore
from opencrab.core.budgets import (
    Budgets,
    CostCap,
    day_start,
    exceeded_text,
    month_start,
    notify,
    raise_hint,
    thresholds_reached,
    ticket_scope,
    ticket_thresholds,
    usd,
)
from opencrab.core.context import message_tokens, tools_tokens
from opencrab.errors import BudgetExceeded, NotFoundError
from opencrab.llm.metrics import SYSTEM_AGENT
from opencrab.llm.pricing import ModelPrice, PriceBook
from opencrab.llm.router import CallInfo, Target
from opencrab.llm.types import ChatRequest
from opencrab.messages import MessageOutlet
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.leases import PROCESS_OWNER
from opencrab.store.repositories import reservations as repo
from opencrab.store.repositories.budgets import FLEET, AlertRow

TTL_GRACE_SECS = 120.0
"""Added to `[agent] turn_timeout_secs` for a reservation's default lifetime."""

Caps = tuple[float | None, float | None]


@dataclass(frozen=True)
class CallBudget:
    """What the guard needs of a call's agent and turn (CallInfo.budget): the agent's
    name and (daily, monthly) caps, the turn's ticket cap with what the stretch spent so
    far, and the fleet's caps when the caller knows them (None: the guard reads them)
    with whether they were set on the Budgets page (else `[budgets]` set them)."""

    agent_name: str
    caps: Caps
    cost_cap: CostCap | None = None
    fleet_caps: Caps | None = None
    fleet_caps_stored: bool = False

    @classmethod
    def of(
        cls,
        agent: Agent,
        cost_cap: CostCap | None = None,
        fleet_caps: Caps | None = None,
        fleet_caps_stored: bool = False,
    ) -> CallBudget:
        """The budget of a call for `agent`: its name and its llm config's caps."""
        config = agent.llm_config
        caps = (config.daily_budget_usd, config.monthly_budget_usd)
        return cls(agent.name, caps, cost_cap, fleet_caps, fleet_caps_stored)

    def uncapped(self) -> bool:
        """True when no cap can apply: then nothing is reserved and nothing read."""
        if self.cost_cap is not None or any(c is not None for c in self.caps):
            return False
        return self.fleet_caps is not None and all(c is None for c in self.fleet_caps)


def estimate_usd(price: ModelPrice, request: ChatRequest, default_output_tokens: int) -> float:
    """The most a call is expected to cost (see the module docstring for how)."""
    input_tokens = sum(message_tokens(m) for m in request.messages)
    input_tokens += tools_tokens(request.tools or [])
    output_tokens = request.max_tokens or default_output_tokens
    return (
        input_tokens * price.input_price_per_1m + output_tokens * price.output_price_per_1m
    ) / 1_000_000


@dataclass(frozen=True)
class _Outcome:
    reserved: bool
    alerts: list[AlertRow]
    refusal: str | None = None


class BudgetGuard:
    """Reserves each call's estimate under its caps, or refuses it (module docstring)."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        prices: Callable[[], PriceBook | None],
        outlets: Mapping[str, MessageOutlet] | None = None,
        *,
        owner: str = PROCESS_OWNER,
    ) -> None:
        self.db = db
        self.settings = settings
        self.prices = prices
        self.outlets = outlets
        self.owner = owner
        self._releasing: set[asyncio.Task[None]] = set()

    @property
    def ttl(self) -> timedelta:
        """How long a reservation counts when nothing settles it."""
        secs = self.settings.budgets.reservation_ttl_secs
        if secs is None:
            secs = self.settings.agent.turn_timeout_secs + TTL_GRACE_SECS
        return timedelta(seconds=secs)

    async def reserve(
        self, target: Target, request: ChatRequest, info: CallInfo, call_id: str
    ) -> bool:
        """Reserve the attempt's estimate under `call_id`; False when no cap applies;
        BudgetExceeded when it does not fit (new alerts are delivered either way)."""
        budget = info.budget if isinstance(info.budget, CallBudget) else None
        if budget is not None and budget.uncapped():
            return False  # known without a trip to the store
        agent_id = info.agent_id or SYSTEM_AGENT
        outcome = await run_blocking(self._decide, target, request, agent_id, budget, call_id)
        if outcome.alerts:
            name = budget.agent_name if budget is not None else agent_id
            notify(self.settings, outcome.alerts, {agent_id: name}, self.outlets)
        if outcome.refusal is not None:
            raise BudgetExceeded(outcome.refusal)
        return outcome.reserved

    def release(self, call_id: str) -> None:
        """Let go of a reservation in the background (its attempt was cancelled)."""

        async def settle() -> None:
            await run_blocking(self._settle, call_id)

        task = asyncio.get_running_loop().create_task(settle())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    # ------------------------------------------------------------ in a worker thread
    def _settle(self, call_id: str) -> None:
        with self.db.write() as conn:
            repo.settle(conn, [call_id])

    def _budget_of(self, agent_id: str) -> CallBudget:
        """The budget of a call whose caller gave none: the agent's as stored."""
        if agent_id == SYSTEM_AGENT:
            return CallBudget(SYSTEM_AGENT, (None, None))
        try:
            return CallBudget.of(AgentStore(self.db, self.settings).get(agent_id))
        except NotFoundError:
            return CallBudget(agent_id, (None, None))

    def _decide(
        self,
        target: Target,
        request: ChatRequest,
        agent_id: str,
        budget: CallBudget | None,
        call_id: str,
    ) -> _Outcome:
        budget = budget or self._budget_of(agent_id)
        fleet_caps, stored = budget.fleet_caps, budget.fleet_caps_stored
        if fleet_caps is None:
            fleet_caps = Budgets(self.db, self.settings).fleet_caps()
        cap = budget.cost_cap
        capped_fleet = any(c is not None for c in fleet_caps)
        if capped_fleet and budget.fleet_caps is None:
            stored = Budgets(self.db, self.settings).fleet_caps_stored()
        capped_agent = any(c is not None for c in budget.caps)
        if not (capped_fleet or capped_agent or cap is not None):
            return _Outcome(False, [])
        book = self.prices()
        price = book.find(target.provider, target.model) if book is not None else None
        estimate = 0.0  # unpriced: refused below unless a cap is spent already
        if price is not None:
            estimate = estimate_usd(price, request, self.settings.budgets.reserve_output_tokens)
        ticket_id = cap.ticket_id if cap is not None else None
        scopes = [FLEET] if capped_fleet else []
        scopes += [f"agent:{agent_id}"] if capped_agent else []
        scopes += [ticket_scope(ticket_id)] if ticket_id is not None else []
        now = datetime.now(UTC)
        with self.db.write() as conn:
            repo.lock(conn, scopes)
            figures = repo.standing(
                conn, agent_id, ticket_id, day_start(now), month_start(now), now, fleet=capped_fleet
            )
            refusal = _refusal(budget, (fleet_caps, stored), figures, estimate, target)
            if refusal is None and price is None:
                refusal = _unpriced(target, budget, capped_fleet, cap)
            if refusal is None:
                hold = repo.Hold(call_id, self.owner, agent_id, ticket_id, estimate)
                repo.insert(conn, hold, now, now + self.ttl)
        reached = thresholds_reached(agent_id, budget.caps, figures.agent_spent, now)
        reached += thresholds_reached(FLEET, fleet_caps, figures.fleet_spent, now)
        if cap is not None and cap.ticket_id is not None:
            reached += ticket_thresholds(cap)
        alerts = Budgets(self.db, self.settings).record(reached, now)
        return _Outcome(refusal is None, alerts, refusal)


def _refusal(
    budget: CallBudget,
    fleet: tuple[Caps, bool],
    figures: repo.Figures,
    estimate: float,
    target: Target,
) -> str | None:
    """Why the call does not fit (the first cap it would break), or None; `fleet`: the
    fleet's caps and whether they were set on the Budgets page (not in `[budgets]`)."""
    fleet_caps, stored = fleet
    name, mine = budget.agent_name, figures.agent_reserved
    named = (
        (name, "daily", budget.caps[0], figures.agent_spent[0], mine),
        (name, "monthly", budget.caps[1], figures.agent_spent[1], mine),
        (FLEET, "daily", fleet_caps[0], figures.fleet_spent[0], figures.fleet_reserved),
        (FLEET, "monthly", fleet_caps[1], figures.fleet_spent[1], figures.fleet_reserved),
    )
    for whose, period, limit, spent, held in named:
        if limit is None:
            continue
        if spent >= limit:
            scope = FLEET if whose == FLEET else "agent"
            row = AlertRow(scope, period, "", 100, limit, spent)
            return exceeded_text(whose, row, stored=stored)
        if spent + held + estimate > limit:
            owner = "the fleet" if whose == FLEET else f"agent {whose}"
            return (
                f"{owner}'s {usd(limit)} {period} budget cannot take this call: "
                f"${spent:.4f} spent, ${held:.4f} held by calls running now, and this call "
                f"to {target} may cost up to ${estimate:.4f}; try again when those calls end "
                f"or {raise_hint(whose == FLEET, period, stored=stored)}"
            )
    cap = budget.cost_cap
    if cap is not None:
        spent = cap.spent_usd
        if spent >= cap.limit_usd:
            return (
                f"ticket cost limit reached: ${spent:.4f} ({cap.label} {cap.limit_usd:g}); "
                "no further LLM calls in this stretch"
            )
        if spent + figures.ticket_reserved + estimate > cap.limit_usd:
            return (
                f"ticket cost limit would be passed: ${spent:.4f} spent, "
                f"${figures.ticket_reserved:.4f} held, this call may cost up to "
                f"${estimate:.4f} ({cap.label} {cap.limit_usd:g}); "
                "no further LLM calls in this stretch"
            )
    return None


def _unpriced(target: Target, budget: CallBudget, fleet: bool, cap: CostCap | None) -> str:
    """The refusal of a call to a model with no price while a money cap applies."""
    if any(c is not None for c in budget.caps):
        which = f"agent {budget.agent_name}'s budget"
    elif cap is not None:
        which = f"the ticket's {cap.label}"
    else:
        which = "the fleet's cap" if fleet else "a budget"
    return (
        f"{target} has no price, so under {which} its cost could not be counted: set its "
        f"price (opencrab llm price {target.provider} {target.model} --input <$/1M> "
        "--output <$/1M>, or the Costs page) or remove the cap"
    )
