"""Provider-neutral LLM types (seed 001 "統一メッセージ形式"): requests, replies, streams.

Every provider maps these to and from its wire format. Conventions all providers keep:

- `Usage.input_tokens` counts every prompt token, cached ones included (Anthropic reports
  cache reads and writes apart from `input_tokens`; its provider adds them back).
  `cache_read_tokens` / `cache_write_tokens` say how many of those hit or filled a cache.
- `Usage.output_tokens` counts every generated token, reasoning included (Gemini reports
  `thoughtsTokenCount` apart from `candidatesTokenCount`; its provider adds it back).
  `reasoning_tokens` says how many of those were reasoning.
- `ToolCall.arguments` is the parsed JSON object when the model's arguments parse, else
  the raw text; `raw_arguments` keeps the exact text when the wire format had a string.
- Streams yield `ChatChunk`s whose tool-call deltas carry a stable `index`; fragments of
  one call's arguments are joined in order (see `opencrab.llm.stream.StreamAccumulator`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"]
ToolChoice = Literal["auto", "none", "required"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------ message content
class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Model):
    """An image: an http(s) URL or a `data:<mime>;base64,…` URL."""

    type: Literal["image"] = "image"
    url: str
    detail: Literal["auto", "low", "high"] | None = None

    @property
    def is_data_url(self) -> bool:
        return self.url.startswith("data:")

    def data(self) -> tuple[str, str]:
        """(media type, base64 payload) of a data URL; ValueError for anything else."""
        if not self.is_data_url or ";base64," not in self.url:
            raise ValueError("image is not a base64 data: URL")
        header, payload = self.url[5:].split(";base64,", 1)
        return header or "application/octet-stream", payload


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCall(_Model):
    """A call the model asked for."""

    id: str
    name: str
    arguments: Any = Field(default_factory=dict)
    raw_arguments: str | None = None


class Message(_Model):
    """One chat message: text or parts; assistant tool calls; a tool's result."""

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None  # role "tool": the call this answers
    is_error: bool = False  # role "tool": the tool failed

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str, *, images: list[str] | None = None) -> Message:
        """A user message; `images` are URLs or data URLs sent along with the text."""
        if not images:
            return cls(role="user", content=text)
        parts: list[TextPart | ImagePart] = [TextPart(text=text)]
        parts += [ImagePart(url=url) for url in images]
        return cls(role="user", content=list(parts))

    @classmethod
    def assistant(
        cls, text: str | None = None, tool_calls: list[ToolCall] | None = None
    ) -> Message:
        return cls(role="assistant", content=text, tool_calls=tool_calls or [])

    @classmethod
    def tool(
        cls, tool_call_id: str, output: str, *, name: str | None = None, is_error: bool = False
    ) -> Message:
        return cls(
            role="tool", content=output, tool_call_id=tool_call_id, name=name, is_error=is_error
        )

    @property
    def text(self) -> str:
        """The text of the message, parts joined; images left out."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def parts(self) -> list[TextPart | ImagePart]:
        """The content as a list of parts (a plain string is one text part)."""
        if self.content is None:
            return []
        if isinstance(self.content, str):
            return [TextPart(text=self.content)] if self.content else []
        return list(self.content)


class ToolDefinition(_Model):
    """A function the model may call; `parameters` is a JSON Schema object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ChatRequest(_Model):
    """A provider-neutral chat request (seed 001 ChatRequest; functions → `tools`)."""

    model: str
    messages: list[Message]
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | str | None = None  # a tool name forces that tool
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    timeout: float | None = None  # seconds for the whole call; provider default if None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def sampling(self, max_tokens: str = "max_tokens", stop: str = "stop") -> dict[str, Any]:
        """The temperature, reply length and stop sequences that are set, under a vendor's
        field names, e.g. `request.sampling("maxOutputTokens", "stopSequences")`."""
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options[max_tokens] = self.max_tokens
        if self.stop:
            options[stop] = self.stop
        return options


# ------------------------------------------------------------------ replies
class Usage(_Model):
    """Token counts of one call (see the module docstring for what each includes)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    raw: dict[str, Any] | None = None  # the provider's own usage object

    @classmethod
    def of(
        cls,
        input_tokens: int,
        output_tokens: int,
        *,
        total_tokens: int | None = None,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        raw: dict[str, Any] | None = None,
    ) -> Usage:
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens if total_tokens is None else total_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            reasoning_tokens=reasoning_tokens,
            raw=raw,
        )


class Choice(_Model):
    index: int = 0
    message: Message
    finish_reason: FinishReason | None = None


class ChatResponse(_Model):
    """A complete reply. `cost_usd` is set when the provider reports the cost itself."""

    id: str
    model: str
    provider: str
    choices: list[Choice]
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    raw_finish_reason: str | None = None
    # filled in by the router: the stored metrics row and the call's wall time
    metrics_id: str | None = None
    latency_ms: int | None = None

    @property
    def message(self) -> Message:
        return self.choices[0].message if self.choices else Message(role="assistant")

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls

    @property
    def finish_reason(self) -> FinishReason | None:
        return self.choices[0].finish_reason if self.choices else None


class ToolCallDelta(_Model):
    """Part of a streamed tool call: `index` identifies the call; fragments concatenate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class ChatChunk(_Model):
    """One streamed piece: a text delta, tool-call deltas, and at the end finish and usage."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    id: str | None = None
    model: str | None = None


class ModelInfo(_Model):
    """What a provider says about one model."""

    id: str
    provider: str
    context_window: int | None = None
    supports_vision: bool = False
    supports_functions: bool = True
