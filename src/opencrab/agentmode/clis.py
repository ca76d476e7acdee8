"""The coding CLIs a sub-agent runs (seed 004 `SubAgentType`), as data, and how to read them.

Each profile says how to start its CLI in a tmux pane: the argv (full-auto flags, the
prompt as one argv element, so no shell ever quotes it), the sub-agent's own HOME and the
configuration written into it (model endpoint, key, hooks / notify / OpenCode's plugin
pointing at `signals.py`), and the environment (telemetry and auto-update off). `observe` turns the
recorded signals and the pane's exit status into a status; `match_screen` is the fallback
that reads a captured pane for a known prompt, never matching text the prompt echoed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from opencrab.agentmode import signals
from opencrab.agentmode.signals import Signal
from opencrab.errors import ValidationError

AgentType = Literal["ClaudeCode", "Codex", "Gemini", "OpenCode", "Other"]
Status = Literal["Running", "WaitingInput", "Completed", "Error"]
Source = Literal["Hook", "ProcessExit", "OutputPattern", "IdleTimeout"]

QUIET_ENV = {
    # Claude Code: no auto-update, telemetry, error reports or other non-essential calls.
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # Codex, Gemini CLI, OpenCode, npm: no update checks or usage statistics.
    "CODEX_DISABLE_UPDATE_CHECK": "1",
    "GEMINI_CLI_DISABLE_AUTO_UPDATE": "true",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class Endpoint:
    """The model a sub-agent talks to: OpenCrab's choice, never the user's own login
    (`credentials.py` finds it in OpenCrab's LLM settings). The base URL is written the
    way OpenCrab's provider of the same vendor takes it (Anthropic and Google without a
    version path, OpenAI-compatible ones with `/v1`); None: the vendor's own API."""

    base_url: str | None  # e.g. http://127.0.0.1:8080 (Anthropic) or …/v1 (OpenAI)
    api_key: str = field(repr=False)  # never in a repr, so never in a log line
    model: str | None = None
    provider: str | None = None  # the OpenCrab provider it came from (OpenCode's choice)


@dataclass(frozen=True)
class ScreenPattern:
    """A prompt recognised on the captured screen: a question line and a cue below it."""

    status: Status
    question: re.Pattern[str]  # the line that holds the question
    cue: re.Pattern[str]  # must appear on a later line (the choices), not in the prompt
    startup: bool = False  # asked before the CLI's hooks run (read even when they report)


@dataclass(frozen=True)
class Profile:
    """How one kind of coding CLI is started, configured and read."""

    agent_type: AgentType
    executable: str  # the command name looked up (node_modules/.bin, then PATH)
    full_auto: tuple[str, ...]  # flags that let it run without approval prompts
    always: tuple[str, ...] = ()  # flags for every run (e.g. no background daemon)
    ask_first: tuple[str, ...] = ()  # flags that make it ask before acting
    prompt_via: Literal["argv", "paste"] = "argv"  # argv: the prompt is the last argument
    prompt_flag: str | None = None  # with argv: the option that carries the prompt
    transcripts: str | None = None  # its transcripts, relative to its HOME
    importer: str | None = None  # opencrab.importers source (gemini, opencode: usage only)
    screen: tuple[ScreenPattern, ...] = ()
    asks_by_hook: bool = False  # its hooks report each question (else: the screen does);
    # its `startup` patterns are still read off the screen until its first signal


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one sub-agent: argv, environment, directories."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)  # holds the key: never in a repr or log line
    cwd: Path
    home: Path
    signal_dir: Path
    prompt: str
    paste_prompt: bool  # True: send the prompt into the pane after start (prompt_via paste)
    transcripts: Path | None


@dataclass(frozen=True)
class Observation:
    """What the signals say about a sub-agent now."""

    status: Status
    source: Source | None = None  # how a Completed / Error was detected
    question: str | None = None  # the WaitingInput question
    summary: str | None = None  # the CLI's last message, when it finished
    transcript: str | None = None  # the transcript path a hook named
    detail: dict[str, str] = field(default_factory=dict)


def _pattern(status: Status, question: str, cue: str, *, startup: bool = False) -> ScreenPattern:
    return ScreenPattern(status, re.compile(question), re.compile(cue), startup)


CLAUDE_CODE = Profile(
    agent_type="ClaudeCode",
    executable="claude",
    full_auto=("--dangerously-skip-permissions",),
    ask_first=("--permission-mode", "default"),
    transcripts=".claude/projects",
    importer="claude",
    screen=(
        _pattern("WaitingInput", r"^\s*(Do you want to [^?]+\?)", r"^\s*(❯\s*)?1\.\s*Yes\b"),
        # before its hooks run: "Detected a custom API key … use it?  Yes / ❯ No"
        _pattern(
            "WaitingInput",
            r"^\s*(Do you want to use this API key\?)",
            r"^\s*(❯\s*)?Yes\b",
            startup=True,
        ),
    ),
    asks_by_hook=True,  # Notification permission_prompt / idle_prompt (after its start)
)
CODEX = Profile(
    agent_type="Codex",
    executable="codex",
    # --no-daemon: Codex would otherwise start a shared app-server daemon that outlives
    # the pane (an orphaned process per sub-agent HOME).
    always=("--no-daemon",),
    full_auto=("--dangerously-bypass-approvals-and-sandbox",),
    ask_first=("--ask-for-approval", "on-request", "--sandbox", "read-only"),
    transcripts=".codex/sessions",
    importer="codex",
    screen=(
        _pattern(
            "WaitingInput",
            r"^\W*(Would you like to (?:run|make|apply) [^?]+\?)",
            r"^\W*(›\s*)?1\.\s*Yes\b",
        ),
    ),
)
# Gemini CLI: a positional prompt starts its interactive UI with that prompt submitted.
GEMINI = Profile(
    agent_type="Gemini",
    executable="gemini",
    full_auto=("--yolo",),
    ask_first=("--approval-mode", "default"),
    transcripts=".gemini/tmp",  # <project>/chats/session-*.jsonl: their usage is imported
    importer="gemini",
    screen=(_pattern("WaitingInput", r"^\W*(Allow execution.*\?)\s*$", r"^\W*1\.\s*Yes\b"),),
)
# OpenCode: its TUI's positional argument is the project folder; the prompt is --prompt.
# It has no hook commands: the plugin written into its HOME records the signals.
OPENCODE = Profile(
    agent_type="OpenCode",
    executable="opencode",
    full_auto=("--auto",),
    prompt_flag="--prompt",
    transcripts=".local/share/opencode",  # $XDG_DATA_HOME/opencode/opencode.db: usage
    importer="opencode",
)
OTHER = Profile(agent_type="Other", executable="", full_auto=(), prompt_via="paste")

PROFILES: dict[AgentType, Profile] = {
    p.agent_type: p for p in (CLAUDE_CODE, CODEX, GEMINI, OPENCODE, OTHER)
}
CLI_NAMES: dict[str, AgentType] = {
    "claude": "ClaudeCode",
    "codex": "Codex",
    "gemini": "Gemini",
    "opencode": "OpenCode",
    "other": "Other",
}


def profile_for(name: str) -> Profile:
    """The profile for a `--cli` name (claude, codex, gemini, opencode, other) or type."""
    agent_type = CLI_NAMES.get(name, name)
    if agent_type not in PROFILES:
        known = ", ".join(CLI_NAMES)
        raise ValidationError(f"unknown coding CLI {name!r}: use one of {known}")
    return PROFILES[agent_type]


def launch_command(
    profile: Profile,
    command: Sequence[str] | str | None,
    search: Sequence[str | os.PathLike[str]] = (),
) -> list[str]:
    """`command` as an argv (a string is split as a shell would); ValidationError when the
    CLI cannot be started this way: `other` with no command, or the CLI not installed
    (so a caller can refuse before planning or storing anything)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command or [])
    if profile.agent_type == "Other" and not argv:
        raise ValidationError("the `other` CLI needs --command (the program to run)")
    if not argv and profile.executable:
        find_executable(profile, search)
    return argv


def find_executable(profile: Profile, search: Sequence[str | os.PathLike[str]] = ()) -> str:
    """The CLI's executable: first in `search` dirs (e.g. clis/node_modules/.bin), then PATH."""
    if not profile.executable:
        raise ValidationError("the Other sub-agent type needs its own --command")
    for directory in search:
        found = shutil.which(profile.executable, path=os.fspath(directory))
        if found:
            return found
    found = shutil.which(profile.executable)
    if found is None:
        raise ValidationError(
            f"{profile.executable!r} is not installed: run `make clis` or put it on PATH"
        )
    return found


def signal_command(signal_dir: Path, source: str) -> list[str]:
    """The argv of the hook / notify command that records one signal for a sub-agent."""
    return [
        sys.executable,
        "-I",  # isolated: no PYTHON* variables, no script dir or user site on sys.path
        signals.__file__,
        "--dir",
        str(signal_dir),
        "--source",
        source,
    ]


def prepare(
    profile: Profile,
    *,
    executable: str | Sequence[str],
    home: Path,
    workdir: Path,
    signal_dir: Path,
    endpoint: Endpoint | None,
    prompt: str,
    full_auto: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    """Write the sub-agent's HOME configuration and return how to start it."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    signal_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = [executable] if isinstance(executable, str) else list(executable)
    argv += [*profile.always, *(profile.full_auto if full_auto else profile.ask_first)]
    env = {"HOME": str(home), "TERM": "xterm-256color", **QUIET_ENV}
    if profile.agent_type == "ClaudeCode":
        env |= _claude_home(home, workdir, signal_dir, endpoint)
        if full_auto and os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # --dangerously-skip-permissions refuses root otherwise
    elif profile.agent_type == "Codex":
        env |= _codex_home(home, workdir, signal_dir, endpoint)
    elif profile.agent_type == "Gemini":
        env |= _gemini_home(home, workdir, signal_dir, endpoint)
    elif profile.agent_type == "OpenCode":
        env |= _opencode_home(home, signal_dir, endpoint, full_auto=full_auto)
    if extra_env:
        env |= dict(extra_env)
    paste = profile.prompt_via == "paste"
    if not paste:
        argv += [profile.prompt_flag, prompt] if profile.prompt_flag else [prompt]
    transcripts = home / profile.transcripts if profile.transcripts else None
    return Launch(argv, env, workdir, home, signal_dir, prompt, paste, transcripts)


def _claude_home(
    home: Path, workdir: Path, signal_dir: Path, endpoint: Endpoint | None
) -> dict[str, str]:
    """~/.claude.json (onboarding done, key approved, folder trusted) and settings.json hooks."""
    key = endpoint.api_key if endpoint else ""
    state = {
        "hasCompletedOnboarding": True,
        "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [key[-20:]] if key else [], "rejected": []},
        "projects": {
            str(workdir): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
        },
    }
    hook = [{"type": "command", "command": _shell_words(signal_command(signal_dir, "claude"))}]
    settings = {
        "hooks": {
            "Stop": [{"hooks": hook}],
            "Notification": [{"matcher": "permission_prompt|idle_prompt", "hooks": hook}],
            "SessionEnd": [{"hooks": hook}],
        },
    }
    _write_private(home / ".claude.json", json.dumps(state, indent=2))
    _write_private(home / ".claude" / "settings.json", json.dumps(settings, indent=2))
    env: dict[str, str] = {}
    if endpoint:
        # ANTHROPIC_API_KEY is sent as x-api-key (what Anthropic's API takes); the
        # "custom API key" question it causes is answered by `customApiKeyResponses`
        env["ANTHROPIC_API_KEY"] = key
        if endpoint.base_url:
            env["ANTHROPIC_BASE_URL"] = endpoint.base_url
        if endpoint.model:
            env["ANTHROPIC_MODEL"] = endpoint.model
    return env


CODEX_KEY_VAR = "OPENCRAB_CODEX_API_KEY"
OPENAI_URL = "https://api.openai.com/v1"


def _codex_home(
    home: Path, workdir: Path, signal_dir: Path, endpoint: Endpoint | None
) -> dict[str, str]:
    """~/.codex/config.toml: OpenCrab's provider (Responses API), notify, trusted folder."""
    codex_home = home / ".codex"
    lines = [
        f"notify = {_toml_list(signal_command(signal_dir, 'codex'))}",
        "check_for_update_on_startup = false",
    ]
    if endpoint:
        if endpoint.model:
            lines.append(f"model = {_toml_str(endpoint.model)}")
        lines += [
            'model_provider = "opencrab"',
            "",
            "[model_providers.opencrab]",
            'name = "OpenCrab"',
            f"base_url = {_toml_str(endpoint.base_url or OPENAI_URL)}",
            'wire_api = "responses"',
            f"env_key = {_toml_str(CODEX_KEY_VAR)}",
        ]
    # no snapshot of the shell's environment on disk: it would hold the key
    lines += ["", "[features]", "shell_snapshot = false"]
    lines += ["", f"[projects.{_toml_str(str(workdir))}]", 'trust_level = "trusted"', ""]
    _write_private(codex_home / "config.toml", "\n".join(lines))
    env = {"CODEX_HOME": str(codex_home)}
    if endpoint:
        env[CODEX_KEY_VAR] = endpoint.api_key
    return env


def _gemini_home(
    home: Path, workdir: Path, signal_dir: Path, endpoint: Endpoint | None
) -> dict[str, str]:
    """~/.gemini/settings.json (hooks recording AfterAgent, Notification and SessionEnd;
    API-key auth; no usage statistics, telemetry or auto-update) and trustedFolders.json
    (the worktree trusted, so no trust dialog holds the prompt back)."""
    hook = [{"type": "command", "command": _shell_words(signal_command(signal_dir, "gemini"))}]
    settings: dict[str, object] = {
        "hooks": {
            "AfterAgent": [{"hooks": hook}],
            "Notification": [{"hooks": hook}],
            "SessionEnd": [{"hooks": hook}],
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }
    env: dict[str, str] = {}
    if endpoint:
        # The key from GEMINI_API_KEY, sent to GOOGLE_GEMINI_BASE_URL (the Gemini API's
        # /v1beta/models/{model}:streamGenerateContent); without a chosen auth type the
        # CLI waits for a Google login.
        settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        if endpoint.model:
            settings["model"] = {"name": endpoint.model}
        env["GEMINI_API_KEY"] = endpoint.api_key
        if endpoint.base_url:  # else the vendor's own API
            env["GOOGLE_GEMINI_BASE_URL"] = endpoint.base_url
    gemini = home / ".gemini"
    _write_private(gemini / "settings.json", json.dumps(settings, indent=2))
    _write_private(gemini / "trustedFolders.json", json.dumps({str(workdir): "TRUST_FOLDER"}))
    return env


OPENCODE_KEY_VAR = "OPENCRAB_OPENCODE_API_KEY"
OPENCODE_PROVIDER = "opencrab"
OPENCODE_URL_SUFFIX = {"anthropic": "/v1", "google": "/v1beta"}
"""What OpenCode's provider packages (the AI SDK's) expect after the base URL that
OpenCrab's provider of the same vendor takes (OpenAI-compatible ones include `/v1`)."""

# Records OpenCode's session events with the signal command: `session.idle` of a top-level
# session as Stop (its last assistant text as last_assistant_message), or as SessionEnd
# when the turn failed; `permission.asked` / `question.asked` as Notification.
_OPENCODE_PLUGIN = """\
// Written by OpenCrab agent mode: records this sub-agent's signals.
import { spawnSync } from "node:child_process";

const COMMAND = %(command)s;

export const OpenCrabSignals = async () => {
  const roles = new Map();
  const lastText = new Map();
  const failed = new Map();
  const children = new Set();
  const send = (payload) => {
    spawnSync(COMMAND[0], COMMAND.slice(1), { input: JSON.stringify(payload) });
  };
  return {
    event: async ({ event }) => {
      const p = event.properties || {};
      if (event.type === "session.created" || event.type === "session.updated") {
        if (p.info && p.info.parentID) children.add(p.info.id);
      } else if (event.type === "message.updated" && p.info) {
        roles.set(p.info.id, p.info.role);
      } else if (event.type === "message.part.updated" && p.part) {
        const part = p.part;
        if (part.type === "text" && roles.get(part.messageID) === "assistant" && part.text) {
          lastText.set(part.sessionID, part.text);
        }
      } else if (event.type === "session.error") {
        const error = p.error || {};
        const data = error.data || {};
        failed.set(p.sessionID, String(data.message || error.name || "error"));
      } else if (event.type === "session.idle") {
        if (children.has(p.sessionID)) return;
        const reason = failed.get(p.sessionID);
        failed.delete(p.sessionID);
        if (reason !== undefined) {
          send({ hook_event_name: "SessionEnd", session_id: p.sessionID, reason });
        } else {
          const text = lastText.get(p.sessionID) || "";
          send({ hook_event_name: "Stop", session_id: p.sessionID, last_assistant_message: text });
        }
      } else if (event.type === "permission.asked" || event.type === "question.asked") {
        const what = p.permission || (p.questions && p.questions[0] && p.questions[0].question);
        send({
          hook_event_name: "Notification",
          notification_type: event.type,
          session_id: p.sessionID,
          message: String(what || "waiting for input"),
        });
      }
    },
  };
};
"""


def _opencode_home(
    home: Path, signal_dir: Path, endpoint: Endpoint | None, *, full_auto: bool
) -> dict[str, str]:
    """~/.config/opencode/opencode.json (OpenCrab's OpenAI-compatible provider and its
    model, no sharing or auto-update, edits and commands asking first unless full-auto)
    and plugins/opencrab-signals.js (the signals); XDG folders inside the sub-agent's
    HOME, so a user's own XDG_* settings never lead it to their config or sessions."""
    xdg = {
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_CACHE_HOME": home / ".cache",
    }
    env = {name: str(path) for name, path in xdg.items()}
    env |= {
        "OPENCODE_DISABLE_MODELS_FETCH": "1",  # models.dev
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",  # the login helpers of other providers
        # It installs @opencode-ai/plugin into each config folder from the npm registry
        # in the background and waits for that before loading plugins: offline, the
        # install fails at once instead of reaching for the registry.
        "npm_config_offline": "true",
    }
    # snapshot: no undo history of its own (a shadow git repository of the worktree); the
    # worktree's branch and OpenCrab's diff keep what it changed
    config: dict[str, object] = {"autoupdate": False, "share": "disabled", "snapshot": False}
    if not full_auto:
        config["permission"] = {"edit": "ask", "bash": "ask", "webfetch": "ask"}
    if endpoint:
        config |= _opencode_provider(endpoint)
        env[OPENCODE_KEY_VAR] = endpoint.api_key
    folder = xdg["XDG_CONFIG_HOME"] / "opencode"
    _write_private(folder / "opencode.json", json.dumps(config, indent=2))
    command = json.dumps(signal_command(signal_dir, "opencode"))
    plugin = _OPENCODE_PLUGIN % {"command": command}
    _write_private(folder / "plugins" / "opencrab-signals.js", plugin)
    return env


def _opencode_provider(endpoint: Endpoint) -> dict[str, object]:
    """OpenCode's `provider` and `model` settings for `endpoint`, the key read from
    OPENCODE_KEY_VAR (never written to the file).

    An OpenAI-compatible endpoint at a base URL of its own (OpenCrab's `openai` provider
    pointed at a proxy, vLLM or llama.cpp; the base includes `/v1`) becomes a provider of
    OpenCrab's speaking Chat Completions, which every such server answers. Any other
    provider is OpenCode's own of the same name (anthropic, google, openai, openrouter),
    its base URL given the version path that provider's SDK expects."""
    key = {"apiKey": f"{{env:{OPENCODE_KEY_VAR}}}"}
    name = endpoint.provider or "openai"
    if name == "openai" and endpoint.base_url:
        provider: dict[str, object] = {
            "npm": "@ai-sdk/openai-compatible",  # Chat Completions at {baseURL}/chat/completions
            "name": "OpenCrab",
            "options": {"baseURL": endpoint.base_url, **key},
        }
        if endpoint.model:
            provider["models"] = {endpoint.model: {"name": endpoint.model}}
        name = OPENCODE_PROVIDER
    else:
        options: dict[str, str] = dict(key)
        if endpoint.base_url:
            suffix = OPENCODE_URL_SUFFIX.get(name, "")
            options["baseURL"] = endpoint.base_url.rstrip("/") + suffix
        provider = {"options": options}
    settings: dict[str, object] = {"provider": {name: provider}}
    if endpoint.model:
        model = f"{name}/{endpoint.model}"
        settings |= {"model": model, "small_model": model}
    return settings


def observe(
    found: Iterable[Signal],
    pane_dead_status: int | None = None,
    *,
    screen: str | None = None,
    profile: Profile | None = None,
    prompt: str = "",
) -> Observation:
    """The status the signals give (the last decisive one wins), then the pane's exit,
    then (only while still Running) a known prompt on the `screen` of `profile`. With the
    task's `prompt`, Codex notifications of other threads than the one it started (the
    TUI's own title request) are ignored."""
    now = Observation("Running")
    main_thread: str | None = None  # Codex: the thread the task's prompt started
    for signal in found:
        thread = signal.payload.get("thread-id")
        if signal.source == "codex" and isinstance(thread, str) and prompt:
            inputs = signal.payload.get("input-messages")
            if main_thread is None and isinstance(inputs, list) and prompt in inputs:
                main_thread = thread
            if thread != main_thread:
                continue  # a side thread (e.g. the TUI's title generation) finishing
        seen = _from_signal(signal, now)
        if seen is not None:
            now = seen
    if pane_dead_status is not None and now.status != "Completed":
        if pane_dead_status == 0:
            return Observation("Completed", "ProcessExit", summary=now.summary)
        reason = now.detail.get("reason", "")
        detail = {"exit_status": str(pane_dead_status)} | ({"reason": reason} if reason else {})
        return Observation("Error", "ProcessExit", summary=now.summary, detail=detail)
    if now.status == "Running" and screen is not None and profile is not None:
        match = match_screen(profile, screen, prompt)
        if match is not None:
            return Observation(match.status, "OutputPattern", question=match.question)
    return now


def _from_signal(signal: Signal, now: Observation) -> Observation | None:
    payload = signal.payload
    transcript = _text(payload.get("transcript_path")) or now.transcript
    event = signal.event
    if event in ("Stop", "AfterAgent") or event == "agent-turn-complete":
        summary = _text(
            payload.get("last_assistant_message")
            or payload.get("last-assistant-message")
            or payload.get("prompt_response")
        )
        return Observation("Completed", "Hook", summary=summary, transcript=transcript)
    if event == "Notification":
        kind = _text(payload.get("notification_type")) or ""
        if kind == "idle_prompt" and now.status == "Completed":
            return None  # idle after finishing is still finished
        message = _text(payload.get("message")) or "waiting for input"
        return Observation("WaitingInput", question=message, transcript=transcript)
    if "approval" in event or "input-requested" in event:
        return Observation("WaitingInput", question=_text(payload.get("message")) or event)
    if event == "SessionEnd" and now.status != "Completed":
        reason = _text(payload.get("reason")) or "ended"
        return Observation(
            "Error", "Hook", transcript=transcript, detail={"reason": f"session ended: {reason}"}
        )
    if event in ("UserPromptSubmit", "PreToolUse", "PostToolUse"):
        return Observation("Running", transcript=transcript)
    return None


@dataclass(frozen=True)
class ScreenMatch:
    """A known prompt found on the screen, with its menu: the choices below it as shown
    (numbers and the cursor mark left out), whether they are numbered, and the one the
    cursor is on (None when no mark is shown)."""

    status: Status
    question: str
    options: tuple[str, ...] = ()
    numbered: bool = False
    selected: int | None = None


MENU_LINE = re.compile(r"^\s*(?P<mark>[❯›>]\s*)?(?P<number>\d+\.\s+)?(?P<text>\S.*?)\s*$")


def match_screen(profile: Profile, screen: str, prompt: str = "") -> ScreenMatch | None:
    """The last known prompt on a captured pane, ignoring the lines that echo the prompt."""
    lines = screen.splitlines()
    echoed = _echoed_lines(lines, prompt)
    for index in range(len(lines) - 1, -1, -1):
        if index in echoed:
            continue
        for pattern in profile.screen:
            found = pattern.question.search(lines[index])
            if found is None:
                continue
            below = [n for n in range(index + 1, len(lines)) if lines[n].strip()][:8]
            if any(n not in echoed and pattern.cue.search(lines[n]) for n in below):
                return _with_menu(ScreenMatch(pattern.status, found[1].strip()), lines[index + 1 :])
    return None


def _with_menu(match: ScreenMatch, below: list[str]) -> ScreenMatch:
    """`match` with the menu read from the lines below its question: the first run of
    non-blank lines (the choices), up to the next blank line."""
    options: list[str] = []
    numbered = True
    selected: int | None = None
    for line in below:
        if not line.strip():
            if options:
                break
            continue
        found = MENU_LINE.match(line)
        if found is None:
            break
        if found["mark"]:
            selected = len(options)
        numbered = numbered and bool(found["number"])
        options.append(found["text"])
    return ScreenMatch(
        match.status, match.question, tuple(options), numbered and bool(options), selected
    )


def _echoed_lines(lines: list[str], prompt: str) -> set[int]:
    """Indexes of screen lines that show the prompt: each run of lines that are all
    pieces of the prompt and that starts with its first line (the CLI's echo of it)."""
    whole = _squash(prompt)
    first = next((_squash(line) for line in prompt.splitlines() if _squash(line)), "")
    if not first:
        return set()
    echoed: set[int] = set()
    run: list[int] = []
    for index, line in enumerate([*lines, ""]):
        text = _squash(line)
        if text and text in whole:
            run.append(index)
            continue
        if not text and run and index < len(lines):
            continue  # a blank line inside the echo
        if any(first in _squash(lines[n]) or first.startswith(_squash(lines[n])) for n in run[:1]):
            echoed.update(run)
        run = []
    return echoed


def _squash(text: str) -> str:
    """Text without marks, punctuation other than ? and ., or spacing, for comparing."""
    return " ".join(re.sub(r"[^\w?.]+", " ", text).split()).casefold()


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temp, path)


def _shell_words(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_str(item) for item in items) + "]"
