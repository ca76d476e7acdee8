"""The OpenCrab error tree: one shallow hierarchy, drawn here.

    OpenCrabError                 base of everything OpenCrab raises on purpose
    ├── ConfigError               invalid configuration: file, key and problem are named
    ├── StoreError                the database cannot be opened, migrated or written
    ├── ValidationError           input that breaks a documented rule
    │   ├── NameTaken             an agent name another agent has (seed 002 answers 400)
    │   ├── EventValidationError  an AgentEvent batch that breaks a seed-000 rule
    │   ├── WorkspaceError        a workspace path or operation that is not allowed
    │   │   └── QuotaExceeded     a write would take the workspace over its size quota
    │   ├── SkillFileError        a malformed skill file (file, line and reason)
    │   ├── TicketStateError      a ticket move its status does not allow (resume a running one)
    │   ├── PlanError             an agent-mode session or plan that breaks a seed-004 rule
    │   └── TransitionError       a task or session state change seed 004 does not allow
    ├── NotFoundError             a referenced record does not exist
    ├── ForbiddenError            the API token's scope does not cover the request
    ├── ConflictError             the request clashes with stored state (a duplicate name)
    │   └── SessionBusy           another process is running a turn in the session (a lease)
    ├── TurnTimeout               a turn ran past its deadline ([agent] turn_timeout_secs)
    └── LlmError                  an LLM call failed; `retryable` tells the router whether
        │                         another attempt or provider may succeed
        ├── ProviderNotConfigured no key, no SDK, or no server for the provider (not retryable)
        │   └── SelfCallRefused   the provider's server is OpenCrab itself (opencrab.instance)
        ├── ProviderAuthError     401/403 from the provider (not retryable)
        ├── ProviderBadRequest    400/404/422: the request itself is wrong (not retryable)
        ├── RateLimited           429 (retryable)
        ├── ProviderServerError   5xx (retryable)
        ├── ProviderTimeout       no answer in time (retryable)
        ├── ProviderUnreachable   connection refused, reset, DNS (retryable)
        ├── MalformedResponse     a body or stream event that does not parse (retryable)
        ├── StreamInterrupted     the stream ended before it finished (retryable)
        ├── ReplyTooLarge         a reply over `[llm] max_reply_bytes` (retryable)
        ├── EmptyReply            the model answered with neither text nor tool calls
        └── BudgetExceeded        a call would start over the agent's budget (not retryable)

Errors a user can fix say what to do, naming the key, variable or record involved.
CLI commands map them to exit codes (ConfigError → 2, others → 1) and the server
maps them to the `{"error", "message"}` JSON shape.
"""

from __future__ import annotations

from collections.abc import Sequence


class OpenCrabError(Exception):
    """Base class for errors OpenCrab raises deliberately."""

    code = "opencrab_error"


class ConfigError(OpenCrabError):
    """The configuration is invalid; the message names the source, key and problem."""

    code = "config_error"

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        parts = [p for p in (source, key) if p]
        super().__init__(": ".join([*parts, message]))


class StoreError(OpenCrabError):
    """The database could not be opened, migrated or written."""

    code = "store_error"


class ValidationError(OpenCrabError):
    """Input that breaks a documented rule."""

    code = "validation_error"


class NameTaken(ValidationError):
    """Another agent already has this name (names address agents, so they are unique);
    seed 002 documents 400 for creating an agent with input it refuses."""

    code = "name_taken"


class EventValidationError(ValidationError):
    """An AgentEvent batch broke a rule; nothing of the batch was written.

    `problems` lists every offending event as (index in batch, event id or None, reason).
    """

    code = "invalid_event"

    def __init__(self, problems: Sequence[tuple[int, str | None, str]]):
        self.problems = list(problems)
        shown = [_describe(i, eid, why) for i, eid, why in problems[:20]]
        more = len(problems) - len(shown)
        if more > 0:
            shown.append(f"... and {more} more")
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{len(problems)} {noun}, nothing written: " + "; ".join(shown))


def _describe(index: int, event_id: str | None, reason: str) -> str:
    where = f"event #{index + 1}" + (f" ({event_id})" if event_id else "")
    return f"{where}: {reason}"


class WorkspaceError(ValidationError):
    """A workspace path that escapes the jail, or an operation the workspace refuses."""

    code = "workspace_error"


class QuotaExceeded(WorkspaceError):
    """A write would take the workspace over its size quota; nothing was written."""

    code = "quota_exceeded"


class SkillFileError(ValidationError):
    """A skill file that cannot be used; names the file, the line (1-based) and why.

    Text that is not a file yet (`file=""`, a skill sent over REST) reads "line 3: …".
    """

    code = "invalid_skill_file"

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        self.file = file
        self.line = line
        self.reason = reason
        where = (f"{file}:{line}" if file else f"line {line}") if line else file
        super().__init__(f"{where}: {reason}" if where else reason)


class TicketStateError(ValidationError):
    """A ticket cannot make that move from its status (seed 002: resume needs `suspended`)."""

    code = "invalid_ticket_state"


class NotFoundError(OpenCrabError):
    """A referenced record does not exist."""

    code = "not_found"


class ForbiddenError(OpenCrabError):
    """The API token's scope does not cover what was asked (the message names both)."""

    code = "forbidden"


class ConflictError(OpenCrabError):
    """The request clashes with what is stored (e.g. a name already taken)."""

    code = "conflict"


class SessionBusy(ConflictError):
    """Another process holds the session's turn lease: it is running a turn there now."""

    code = "session_busy"

    def __init__(self, session_id: str):
        self.session_id = session_id
        super().__init__(
            f"session {session_id} is running a turn in another process; "
            "try again when that turn has ended"
        )


class TurnTimeout(OpenCrabError):
    """A turn ran past its overall deadline (`[agent] turn_timeout_secs`) and was ended."""

    code = "turn_timeout"


class LlmError(OpenCrabError):
    """An LLM call failed. `retryable` errors may succeed on another attempt or provider."""

    code = "llm_error"
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.status = status
        prefix = f"{provider}: " if provider else ""
        super().__init__(prefix + message)


class ProviderNotConfigured(LlmError):
    code = "provider_not_configured"


class SelfCallRefused(ProviderNotConfigured):
    """A provider's server answered with an OpenCrab instance mark: it is an OpenCrab
    server (this one when the mark is this process's), not a model server."""

    code = "self_call"

    def __init__(self, provider: str, url: str, mark: str, *, own: bool) -> None:
        what = (
            "is this OpenCrab server"
            if own
            else f"is an OpenCrab server (instance {mark[:16]}), not a model server"
        )
        super().__init__(f"{provider} at {url} {what}; set [llm.providers.{provider}] base_url")
        self.provider = provider


class ProviderAuthError(LlmError):
    code = "provider_auth_error"


class ProviderBadRequest(LlmError):
    code = "provider_bad_request"


class RateLimited(LlmError):
    code = "rate_limited"
    retryable = True


class ProviderServerError(LlmError):
    code = "provider_server_error"
    retryable = True


class ProviderTimeout(LlmError):
    code = "provider_timeout"
    retryable = True


class ProviderUnreachable(LlmError):
    code = "provider_unreachable"
    retryable = True


class MalformedResponse(LlmError):
    code = "malformed_response"
    retryable = True


class StreamInterrupted(LlmError):
    code = "stream_interrupted"
    retryable = True


class ReplyTooLarge(LlmError):
    """A provider's reply grew over `[llm] max_reply_bytes`; reading stopped there."""

    code = "reply_too_large"
    retryable = True  # another provider may answer within the limit


class EmptyReply(LlmError):
    """The model's reply had neither text nor tool calls: nothing to say or do."""

    code = "empty_reply"


class BudgetExceeded(LlmError):
    code = "budget_exceeded"


def llm_error_for_status(
    status: int, message: str, *, provider: str | None = None, model: str | None = None
) -> LlmError:
    """The LlmError subclass matching an HTTP status from a provider."""
    cls: type[LlmError]
    if status in (401, 403):
        cls = ProviderAuthError
    elif status == 429:
        cls = RateLimited
    elif status >= 500:
        cls = ProviderServerError
    elif status == 408:
        cls = ProviderTimeout
    else:
        cls = ProviderBadRequest
    return cls(f"HTTP {status}: {message}", provider=provider, model=model, status=status)


class PlanError(ValidationError):
    """An agent-mode session or plan breaks a seed-004 rule; `problems` lists each one
    (naming the task, the dependency or the cycle path)."""

    code = "invalid_plan"

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems) or "invalid plan")


class TransitionError(ValidationError):
    """A seed-004 state change that is not allowed; names what moved and both states."""

    code = "invalid_transition"

    def __init__(self, kind: str, subject: str, current: str, target: str) -> None:
        self.kind = kind
        self.subject = subject
        self.current = current
        self.target = target
        super().__init__(f"{kind} {subject} cannot go from {current} to {target}")
