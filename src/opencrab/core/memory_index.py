"""The memory indexer: embeds session log lines in the background (issue 35).

Nothing on a turn's path embeds: a turn writes its log lines as before, and this service
finds the lines that have no vector of their agent's embedder yet (new lines, lines
written before vectors existed, or every line after the embedder changed), embeds them
in batches and stores the vectors. One process does it at a time: it holds the
`memory-index` lease while it works (store/leases.py), so two processes never embed the
same lines. When an agent's lines are all embedded with a new model, its vectors of the
old model are dropped; until then searches use the new model's vectors found so far.

`progress` says how far an agent is ("embedded N of M with <model>", and where its
vectors are searched: in PostgreSQL with pgvector, or in process and why); the REST route
`GET /api/agents/{id}/memory/index`, `opencrab memory index AGENT` and the dashboard's
memory page show it.

Example:
    indexer = MemoryIndexer(db, settings, providers=router.providers)
    indexer.index_agent(agent_id)   # one agent, until nothing is left (blocking)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencrab.core.agent import AgentStore
from opencrab.core.embedding import (
    Embedder,
    EmbedderUnavailable,
    chosen_ref,
    embedder_name,
    endpoint_embedder,
    endpoint_signature,
    forget_embedder,
    known_embedder,
    remember_embedder,
)
from opencrab.errors import NotFoundError
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.repositories import memory_vectors as repo

if TYPE_CHECKING:
    from opencrab.config import Settings
    from opencrab.llm.base import LlmProvider
    from opencrab.store.lease_keeper import LeaseKeeper

log = logging.getLogger(__name__)

LEASE_KEY = "memory-index"
"""The lease the indexing process holds (one at a time across processes)."""

BATCH = 32  # lines embedded in one call
PASS_LINES = 256  # lines one agent gets per pass before the next agent's turn
IDLE_SECS = 5.0  # the wait between passes that found nothing to embed


@dataclass(frozen=True)
class IndexProgress:
    """How far an agent's memory is embedded."""

    model: str  # the embedder the agent uses now
    embedded: int
    total: int
    error: str | None = None
    vector_store: str = ""  # where the vector leg searches (memory_vectors.vector_store)

    @property
    def text(self) -> str:
        said = f"embedded {self.embedded} of {self.total} with {self.model}"
        return f"{said} (last error: {self.error})" if self.error else said

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "embedded": self.embedded,
            "total": self.total,
            "error": self.error,
            "text": self.text,
            "vector_store": self.vector_store,
        }


def progress(db: Database, settings: Settings, agent_id: str) -> IndexProgress:
    """How far `agent_id`'s memory is embedded with the embedder it uses now."""
    agent = AgentStore(db, settings).get(agent_id)
    model = embedder_name(chosen_ref(settings, agent.llm_config.models.embedding))
    state = repo.embedder_state(db, agent.id)
    error = state.error if state is not None and state.model == model else None
    return IndexProgress(
        model=model,
        embedded=repo.count_embedded(db, agent.id, model),
        total=repo.count_lines(db, agent.id),
        error=error,
        vector_store=repo.vector_store(db).text,
    )


class MemoryIndexer:
    """Embeds every agent's unembedded log lines (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        providers: Mapping[str, LlmProvider] | None = None,
        leases: LeaseKeeper | None = None,
        batch: int = BATCH,
        idle_secs: float = IDLE_SECS,
    ) -> None:
        self.db = db
        self.settings = settings
        self.agents = AgentStore(db, settings)
        self.providers = providers if providers is not None else {}
        self.leases = leases
        self.batch = batch
        self.idle_secs = idle_secs
        self.embedded = 0  # lines this indexer embedded, for the log and tests
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ one agent
    def embedder_for(self, agent_id: str) -> Embedder:
        """The embedder `agent_id`'s `embedding` purpose model chooses (EmbedderUnavailable
        when it cannot run)."""
        agent = self.agents.get(agent_id)
        ref = chosen_ref(self.settings, agent.llm_config.models.embedding)
        name = embedder_name(ref)
        found = known_embedder(name)
        if ref is None:
            assert found is not None  # the packaged one is always known
            return found
        if found is not None:
            made_for = getattr(found, "signature", None)
            if made_for is None:
                return found  # not an endpoint embedder (a plugin's, say): kept as it is
            try:
                now = endpoint_signature(ref, self.providers)
            except EmbedderUnavailable:
                forget_embedder(name)  # its provider is gone
                raise
            if made_for == now:
                return found
            forget_embedder(name)  # its provider's URL or key changed since it was made
        return remember_embedder(endpoint_embedder(ref, self.providers))

    def index_agent(self, agent_id: str, *, most: int | None = None) -> int:
        """Embed up to `most` (None: all) of the agent's unembedded lines, in batches;
        returns how many were stored. A failing embedder's error is kept for `progress`
        and the lines stay pending."""
        try:
            embedder = self.embedder_for(agent_id)
        except NotFoundError:
            return 0
        except EmbedderUnavailable as exc:
            model = embedder_name(
                chosen_ref(self.settings, self.agents.get(agent_id).llm_config.models.embedding)
            )
            self._state(agent_id, model, None, str(exc))
            return 0
        state = repo.embedder_state(self.db, agent_id)
        if state is None or state.model != embedder.name:
            self._state(agent_id, embedder.name, None, None)
            state = repo.embedder_state(self.db, agent_id)
        stored, after = 0, 0
        while most is None or stored < most:
            size = self.batch if most is None else min(self.batch, most - stored)
            lines = repo.pending_lines(self.db, agent_id, embedder.name, after=after, limit=size)
            if not lines:
                break
            try:
                vectors = embedder.embed_passages([line.content for line in lines])
            except EmbedderUnavailable as exc:
                self._state(agent_id, embedder.name, state.dim if state else None, str(exc))
                return stored
            dim = int(vectors.shape[1])
            rows = [(line.id, vectors[i].astype("<f4").tobytes()) for i, line in enumerate(lines)]
            with self.db.write() as conn:
                stored += repo.save_vectors(conn, agent_id, embedder.name, rows, dim)
                repo.set_embedder_state(conn, agent_id, embedder.name, dim=dim, error=None)
            after = lines[-1].id
        if stored and not repo.pending_lines(self.db, agent_id, embedder.name, limit=1):
            with self.db.write() as conn:
                repo.drop_other_models(conn, agent_id, embedder.name)
        self.embedded += stored
        return stored

    def _state(self, agent_id: str, model: str, dim: int | None, error: str | None) -> None:
        with self.db.write() as conn:
            repo.set_embedder_state(conn, agent_id, model, dim=dim, error=error)

    def run_pass(self) -> int:
        """One round over every agent, PASS_LINES lines each at most; returns how many
        lines were embedded."""
        done = 0
        for agent_id in repo.agent_ids(self.db):
            done += self.index_agent(agent_id, most=PASS_LINES)
        return done

    # ------------------------------------------------------------ the service
    async def run(self) -> None:
        """Embed while holding the lease, until `stop`; passes that find nothing wait
        `idle_secs` (or a `nudge`)."""
        while not self._stopping.is_set():
            done = 0
            try:
                if self.leases is None or await self.leases.acquire(LEASE_KEY):
                    done = await run_blocking(self.run_pass)
            except Exception:
                log.exception("memory indexing failed; trying again")
            if done:
                log.debug("memory indexer embedded %d lines", done)
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait(), self.idle_secs)

    async def _wait(self) -> None:
        stopping = asyncio.ensure_future(self._stopping.wait())
        waking = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({stopping, waking}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            waking.cancel()

    def nudge(self) -> None:
        """Look for new lines now rather than after the idle wait."""
        self._wake.set()

    def start(self) -> None:
        """Run `run` in a task of the running loop."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="memory-index")

    async def stop(self) -> None:
        """End `run` after the pass under way; let go of the lease."""
        self._stopping.set()
        if self._task is not None:
            await self._task
        if self.leases is not None:
            with contextlib.suppress(Exception):
                await self.leases.release(LEASE_KEY)


def start_memory_index(
    db: Database,
    settings: Settings,
    providers: Mapping[str, LlmProvider],
    leases: LeaseKeeper,
) -> MemoryIndexer:
    """Start an indexer in a task of the running loop (`stop` ends it)."""
    indexer = MemoryIndexer(db, settings, providers=providers, leases=leases)
    indexer.start()
    return indexer
