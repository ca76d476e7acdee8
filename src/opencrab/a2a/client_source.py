"""One remote A2A agent (`[a2a.remotes.<name>]`) as a tool source, `a2a__<name>`.

`start` reads the remote's Agent Card with the SDK's card resolver, makes a client for it
with the SDK's client factory (JSON-RPC or HTTP+JSON, as the card offers and `binding`
says) and offers one tool, `ask` (opencrab.a2a.client_tool), described by the card. A
task reads the card again every `refresh_secs`, and soon after a call that could not
reach the remote (`refresh_soon`); a changed card is offered as a new description. A
card that cannot be read at start raises A2aRemoteRetrying (a StillTrying): the source
keeps trying with a backoff of 1, 2, 4… up to `refresh_secs`, and offers its tool once it
reads one. A card read once stays offered while later reads fail (a call then fails,
saying why). An address the SSRF guard refuses, a token variable not set or a token that
cannot be decrypted fail for good: the table must change.

Every connection (the card, and each interface the card names) goes through one httpx
client: the bearer token as its Authorization header, and unless `allow_private = true`
the SSRF guard of the HTTP tools (opencrab.actions.net_guard) as its network backend,
honouring `[tools] http_allow_networks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any, Literal

import httpcore
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict

from opencrab.a2a.client_tool import RemoteAgentTool
from opencrab.actions.base import SEPARATOR, StillTrying, ToolSource
from opencrab.actions.net_guard import AddressRefused, GuardedBackend, allowed_networks
from opencrab.config import Settings
from opencrab.config.a2a_remotes import A2aRemoteConfig
from opencrab.config.secret_key import SecretBox
from opencrab.errors import ConfigError, OpenCrabError
from opencrab.offload import run_blocking

log = logging.getLogger(__name__)

State = Literal["starting", "running", "failed", "stopped"]
FIRST_BACKOFF_SECS = 1.0
BINDINGS: dict[str, list[str]] = {
    "auto": [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
    "JSONRPC": [TransportProtocol.JSONRPC],
    "HTTP+JSON": [TransportProtocol.HTTP_JSON],
}


class A2aRemoteError(OpenCrabError):
    """A remote A2A agent whose card cannot be read or whose table cannot be used."""


class A2aRemoteRetrying(A2aRemoteError, StillTrying):
    """A remote whose card could not be read at start; its source keeps trying."""


class A2aRemoteSource(ToolSource):
    """The remote agent `[a2a.remotes.<remote>]` as a tool source (see the module docstring)."""

    def __init__(self, remote: str, config: A2aRemoteConfig, settings: Settings) -> None:
        super().__init__(f"a2a{SEPARATOR}{remote}")
        self.remote = remote
        self.config = config
        self.settings = settings
        self.state: State = "stopped"
        self.last_error: str | None = None
        self.card: AgentCard | None = None
        self.card_reads = 0  # cards read, the first included
        self.client: Client | None = None
        self.http: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def status(self) -> dict[str, Any]:
        """Where the remote is now: its state, last error, card name and tool."""
        return {
            "remote": self.remote,
            "namespace": self.namespace,
            "url": self.config.url,
            "state": self.state,
            "last_error": self.last_error,
            "agent": None if self.card is None else self.card.name,
            "card_reads": self.card_reads,
            "tools": sorted(a.definition().name for a in self.actions()),
        }

    async def start(self) -> None:
        """Read the card and offer the tool (see the module docstring)."""
        self.state = "starting"
        self.http = await run_blocking(remote_http_client, self.remote, self.config, self.settings)
        try:
            await self.refresh()
        except AddressRefused as exc:
            await self._close()
            self.state, self.last_error = "failed", refused(self.remote, exc)
            raise A2aRemoteError(f"A2A remote {self.remote!r}: {self.last_error}") from None
        except Exception as exc:
            self.state, self.last_error = "failed", explain(exc)
            self._task = asyncio.create_task(self._keep(), name=f"a2a remote {self.remote}")
            raise A2aRemoteRetrying(
                f"A2A remote {self.remote!r}: its card could not be read: {self.last_error}; "
                f"trying again in {FIRST_BACKOFF_SECS:g} s, then with backoff up to "
                f"{self.config.refresh_secs:g} s"
            ) from None
        self._task = asyncio.create_task(self._keep(), name=f"a2a remote {self.remote}")

    async def stop(self) -> None:
        """End the refreshes, close the connections and offer nothing."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        await self._close()
        self.state = "stopped"
        await self.offer([])

    async def _close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        http, self.http = self.http, None
        if http is not None:
            await http.aclose()

    def refresh_soon(self) -> None:
        """Read the card again now (a call could not reach the remote)."""
        self._wake.set()

    async def refresh(self) -> None:
        """Read the card, make a client for it and offer the tool it describes."""
        assert self.http is not None
        resolver = A2ACardResolver(self.http, self.config.url, self.config.card_path)
        async with asyncio.timeout(self.config.connect_timeout_secs):
            card = await resolver.get_agent_card()
        factory = ClientFactory(
            ClientConfig(
                streaming=False,
                polling=True,  # the first answer at once; the task is then polled
                httpx_client=self.http,
                supported_protocol_bindings=BINDINGS[self.config.binding],
            )
        )
        try:
            client = factory.create(card)
        except ValueError as exc:  # no interface of a binding we speak
            raise A2aRemoteError(
                f"its card offers no interface we speak ({', '.join(BINDINGS[self.config.binding])}"
                f"): {exc}"
            ) from None
        changed = self.card is None or MessageToDict(self.card) != MessageToDict(card)
        old, self.client, self.card = self.client, client, card
        self.card_reads += 1
        self.state, self.last_error = "running", None
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()  # its transport only: the httpx client is shared
        if changed:
            await self.offer([RemoteAgentTool(self, card)])

    async def _keep(self) -> None:
        """Read the card again every `refresh_secs`, or soon when woken; after a failure
        with a backoff of 1, 2, 4… seconds up to `refresh_secs`."""
        delay = FIRST_BACKOFF_SECS
        while True:
            wait = self.config.refresh_secs if self.state == "running" else delay
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.refresh()
                delay = FIRST_BACKOFF_SECS
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.state = "failed"
                self.last_error = (
                    refused(self.remote, exc) if isinstance(exc, AddressRefused) else explain(exc)
                )
                log.warning("A2A remote %s: its card could not be read: %s", self.remote, exc)
                delay = min(delay * 2, self.config.refresh_secs)


def remote_token(remote: str, config: A2aRemoteConfig, settings: Settings) -> str:
    """The remote's bearer token ("" when it has none); ConfigError naming the key when
    its variable is not set or its encrypted token cannot be decrypted. Blocking."""
    if config.token_env:
        token = os.environ.get(config.token_env, "")
        if not token:
            raise A2aConfigError(
                f"[a2a.remotes.{remote}] token_env names {config.token_env}, which is not set; "
                "set it to the remote agent's token"
            )
        return token
    if config.token_encrypted:
        box = SecretBox.load(settings.data_dir, create=False)
        try:
            return box.decrypt(config.token_encrypted)
        except ConfigError as exc:
            raise A2aConfigError(
                f"[a2a.remotes.{remote}] token_encrypted cannot be decrypted with the key of "
                f"this data directory ({exc}); encrypt it again with "
                "`opencrab a2a-remotes encrypt-token`"
            ) from None
    return ""


class A2aConfigError(ConfigError, A2aRemoteError):
    """A remote's table that cannot be used as it is (its token)."""


def remote_http_client(
    remote: str, config: A2aRemoteConfig, settings: Settings
) -> httpx.AsyncClient:
    """The one client every connection to the remote goes through (see the module
    docstring). Blocking: it may read the key file."""
    headers = {"User-Agent": "OpenCrab-agent (A2A client)"}
    token = remote_token(remote, config, settings)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    if not config.allow_private:
        allow = allowed_networks(settings.tools.http_allow_networks)
        # the transport's own pool, rebuilt with the guard as its network backend
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=GuardedBackend(allow),
        )
    timeout = httpx.Timeout(config.connect_timeout_secs, read=config.wait_secs)
    return httpx.AsyncClient(
        headers=headers,
        timeout=timeout,
        transport=transport,
        trust_env=False,
        follow_redirects=False,
    )


def refused(remote: str, exc: Exception) -> str:
    """An SSRF refusal, with the key that would allow it."""
    return f"{exc}; or set allow_private = true in [a2a.remotes.{remote}]"


def explain(exc: BaseException) -> str:
    """An exception as one line."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}"


def since(start: float) -> int:
    """Milliseconds from `start` (time.monotonic()) to now."""
    return round((time.monotonic() - start) * 1000)
