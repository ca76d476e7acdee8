"""What a chat-platform gateway adds to a turn, per platform, against REST in the same run.

For each platform with a `bench/gateways_<name>.py` module (each exposes `async def
measure(turns: int) -> dict`), that module serves one OpenCrab app in this process (its
LLM a scripted provider, its platform a fake speaking the platform's wire format on
127.0.0.1) and measures, turn by turn and alternately:

- gateway: a message leaving the fake platform → the start of the agent's turn
  (`TurnService.steps` entered);
- REST: `POST /api/sessions/{id}/messages` leaving an HTTP client on the same machine →
  the start of the same turn.

It also sends 100 conversations at once through the gateway and counts the answers.
Printed per platform: p50 of each path, the difference (target: under 5 ms added at p50)
and whether the 100 conversations lost nothing.

    python bench/gateways.py [--turns N] [--only slack,telegram,...]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MS = 5.0


def platforms() -> list[str]:
    """The platforms whose bench module exists beside this file."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem.removeprefix("gateways_") for p in here.glob("gateways_*.py"))


async def main(turns: int, only: list[str] | None) -> int:
    failed = 0
    for name in platforms():
        if only and name not in only:
            continue
        module = importlib.import_module(f"bench.gateways_{name}")
        result = await module.measure(turns)
        gateway, rest = result["gateway_p50_ms"], result["rest_p50_ms"]
        added = gateway - rest
        lost = result["concurrent_sent"] - result["concurrent_answered"]
        ok = added < TARGET_MS and lost == 0
        failed += not ok
        print(
            f"{name:10} gateway p50 {gateway:7.2f} ms   REST p50 {rest:7.2f} ms   "
            f"added {added:+6.2f} ms (target < {TARGET_MS:.0f})   "
            f"{result['concurrent_answered']}/{result['concurrent_sent']} conversations "
            f"answered at once   {'ok' if ok else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--only", default="", help="platforms, comma-separated")
    args = parser.parse_args()
    wanted = [n for n in args.only.split(",") if n] or None
    sys.exit(asyncio.run(main(args.turns, wanted)))
