"""A scripted sub-agent (agent mode's `other` CLI type) for tests and the bench.

    python tests/fakes/scripted_agent.py SCRIPT.json

The script is a JSON list of steps run in order; each is an object with one action:

    {"print": "text"}                         print a line (flushed)
    {"write": "path", "content": "text"}      write a file (relative to the cwd)
    {"pid_to": "path"}                        write this process's pid to a file
    {"env_to": "path", "names": ["HOME"]}     write those environment variables as JSON
    {"argv_to": "path"}                       write this program's argv[2:] as JSON
    {"ask": "question?", "answer_to": "path"} print the question, read one answer from
                                              stdin (a bracketed paste may span lines),
                                              write it to the file
    {"spawn": N, "depth": D}                  start N children that each start their own
                                              (D levels deep) and sleep forever;
                                              "setsid": true puts each in its own session
    {"ignore_sigterm": true}                  ignore SIGTERM from here on (children too)
    {"signal": {...}}                          report a status as a hook would: run
                                              $OPENCRAB_SIGNAL_COMMAND with the object
                                              as JSON on stdin (agent mode's runner)
    {"time_to": "path"}                        write the unix time now (benchmarks)
    {"sleep": seconds}
    {"wait_for": "path"}                      wait until that file exists (a test's gate)
    {"exit": code}                            stop here with that exit code

After the last step it exits 0. Extra arguments after the script are only recorded.
SCRIPT may be a directory: then `$OPENCRAB_TASK_ID.json` in it is the script (agent mode
starts every task with the same command).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"


def read_answer() -> str:
    """One answer from stdin: a line, or every line of a bracketed paste."""
    sys.stdout.write("\x1b[?2004h")  # ask the terminal for bracketed paste, as CLIs do
    sys.stdout.flush()
    line = sys.stdin.readline()
    if PASTE_START not in line:
        return line.rstrip("\n")
    parts = [line.split(PASTE_START, 1)[1]]
    while PASTE_END not in parts[-1]:
        more = sys.stdin.readline()
        if not more:
            break
        parts.append(more)
    text = "".join(parts)
    body = text.split(PASTE_END, 1)[0]
    sys.stdout.write("\x1b[?2004l")
    sys.stdout.flush()
    return body.rstrip("\n")


def spawn(count: int, depth: int, setsid: bool) -> None:
    """`count` children that each start their own, `depth` levels deep, then sleep."""
    for _ in range(count):
        subprocess.Popen([sys.executable, __file__, "--tree", str(depth)], start_new_session=setsid)


def tree(depth: int) -> int:
    """One level of a spawned tree: start the next level, then sleep (until killed)."""
    if depth > 1:
        spawn(1, depth - 1, False)
    time.sleep(3600)
    return 0


def run(steps: list[dict[str, object]]) -> int:
    """Run the steps; the exit code."""
    for step in steps:
        if "print" in step:
            print(step["print"], flush=True)
        elif "write" in step:
            with open(str(step["write"]), "w", encoding="utf-8") as handle:
                handle.write(str(step.get("content", "")))
        elif "pid_to" in step:
            with open(str(step["pid_to"]), "w", encoding="utf-8") as handle:
                handle.write(str(os.getpid()))
        elif "env_to" in step:
            names = step.get("names", [])
            assert isinstance(names, list)
            with open(str(step["env_to"]), "w", encoding="utf-8") as handle:
                json.dump({n: os.environ.get(str(n)) for n in names}, handle)
        elif "argv_to" in step:
            with open(str(step["argv_to"]), "w", encoding="utf-8") as handle:
                json.dump(sys.argv[2:], handle, ensure_ascii=False)
        elif "ask" in step:
            print(step["ask"], flush=True)
            answer = read_answer()
            with open(str(step["answer_to"]), "w", encoding="utf-8") as handle:
                handle.write(answer)
        elif "spawn" in step:
            spawn(int(str(step["spawn"])), int(str(step.get("depth", 1))), bool(step.get("setsid")))
        elif "ignore_sigterm" in step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif "signal" in step:
            command = shlex.split(os.environ["OPENCRAB_SIGNAL_COMMAND"])
            subprocess.run(command, input=json.dumps(step["signal"]), text=True, check=True)
        elif "time_to" in step:
            with open(str(step["time_to"]), "w", encoding="utf-8") as handle:
                handle.write(repr(time.time()))
        elif "wait_for" in step:
            while not os.path.exists(str(step["wait_for"])):
                time.sleep(0.05)
        elif "sleep" in step:
            time.sleep(float(str(step["sleep"])))
        elif "exit" in step:
            return int(str(step["exit"]))
        else:
            print(f"scripted_agent: unknown step {step}", file=sys.stderr)
            return 2
    return 0


def main() -> int:
    """Read the script named on the command line and run it."""
    if sys.argv[1] == "--tree":
        return tree(int(sys.argv[2]))
    script = sys.argv[1]
    if os.path.isdir(script):
        script = os.path.join(script, os.environ["OPENCRAB_TASK_ID"] + ".json")
    with open(script, encoding="utf-8") as handle:
        steps = json.load(handle)
    return run(steps)


if __name__ == "__main__":
    sys.exit(main())
