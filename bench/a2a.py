"""A2A overhead: a `message/send` round trip against the same turn over REST, measured in
the same run on one real `opencrab up` (tests/fakes/served.py) whose model is the fake
OpenAI server answering at once (tests/fakes/llm_server.py).

Three sides, each in its own session (an A2A contextId is a session), each turn the same
one-line message answered "Aye." (tests/fakes/served_turns.py):
- A2A JSON-RPC: a plain `SendMessage` POST to `/a2a/aki` with the REST side's HTTP client
  (what the server adds: the SDK's dispatcher, the request handler, the protobuf answer);
- A2A SDK client: the official a2a-sdk client (card resolved once) sending the message
  (the above plus the client's own work);
- REST: `POST /api/sessions/{id}/messages`, the baseline.
Target: A2A adds at most 10% to the REST turn. Calls go in turn, and which goes first
moves round by round, so machine noise hits all alike. Prints each p50 and the ratios.

    python bench/a2a.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from itertools import count
from pathlib import Path

# the repository's root in place of this script's folder, where this file would shadow
# the a2a-sdk's `a2a` package
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import httpx  # noqa: E402
from a2a.client import A2ACardResolver, ClientConfig, create_client  # noqa: E402
from a2a.types import Message, Part, Role, SendMessageRequest  # noqa: E402
from tests.fakes.served_turns import AGENT, ANSWER, rotate, served_turns  # noqa: E402

CONTEXT = "bench-sdk"


async def measure(turns: int) -> list[float]:
    """p50 of the A2A JSON-RPC POST, the SDK client's send and the REST turn."""
    async with served_turns() as on:
        ids = count(1)

        async def by_json_rpc() -> None:
            n = next(ids)
            said = await on.rest.post(
                f"/a2a/{AGENT}",
                headers={"A2A-Version": "1.0"},
                json={
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": f"m{n}",
                            "contextId": "bench-json-rpc",
                            "role": "ROLE_USER",
                            "parts": [{"text": "count"}],
                        }
                    },
                },
            )
            assert said.status_code == 200, said.text
            assert said.json()["result"]["message"]["parts"][0]["text"] == ANSWER, said.text

        async with httpx.AsyncClient(headers=on.served.headers, timeout=120) as http:
            card = await A2ACardResolver(http, f"{on.served.url}/a2a/{AGENT}").get_agent_card()
            client = await create_client(
                card, client_config=ClientConfig(streaming=False, httpx_client=http)
            )

            async def by_sdk() -> None:
                request = SendMessageRequest(
                    message=Message(
                        message_id=f"s{next(ids)}",
                        context_id=CONTEXT,
                        role=Role.ROLE_USER,
                        parts=[Part(text="count")],
                    )
                )
                (answer,) = [event async for event in client.send_message(request)]
                assert answer.message.parts[0].text == ANSWER

            return await rotate([by_json_rpc, by_sdk, on.rest_turn], turns, warm=5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60, help="turns of each side")
    args = parser.parse_args()
    ms = 1000
    by_json_rpc, by_sdk, by_rest = asyncio.run(measure(args.turns))
    print(f"A2A message/send vs a REST turn ({args.turns} of each side, in turn), p50:")
    print(f"    REST turn (baseline)   {by_rest * ms:7.3f} ms")
    for name, took in (("A2A JSON-RPC POST", by_json_rpc), ("A2A SDK client", by_sdk)):
        extra = took / by_rest - 1
        ok = extra <= 0.10
        print(
            f"    {name:22} {took * ms:7.3f} ms   ratio {took / by_rest:.2f}x "
            f"({extra:+.1%}; target <= +10%: {'met' if ok else 'NOT met'})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
