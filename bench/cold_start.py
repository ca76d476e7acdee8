"""Cold start of the `opencrab` command, each run a fresh process.

Figures: `opencrab --version` (target < 100 ms) and `opencrab --help` (every command
registered; target < 300 ms), each against a bare `python -c pass` started the same way
in the same run, alternating, so a busy machine shows in both.

    python bench/cold_start.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGETS_MS = {"opencrab --version": 100.0, "opencrab --help": 300.0}


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(runs: int) -> None:
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "opencrab --version": [str(BIN / "opencrab"), "--version"],
        "opencrab --help": [str(BIN / "opencrab"), "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(timed(cmd))
    base = statistics.median(times["python -c pass"])
    for name, values in times.items():
        p50 = statistics.median(values) * 1000
        line = f"{name:20s} p50 {p50:7.1f} ms   ratio to bare python {p50 / 1000 / base:5.2f}x"
        target = TARGETS_MS.get(name)
        if target is not None:
            line += f"   target < {target:.0f} ms: {'met' if p50 < target else 'NOT met'}"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    main(parser.parse_args().runs)
