"""The retrieval index of a knowledge base, in Qdrant.

Each chunk is one point with three vectors: ``dense`` (the embedding model's),
and the sparse lexical fields ``words`` and ``chars`` (see
:mod:`kotae.knowledge.sparse`), plus a payload carrying everything a stage
needs (text, source, slide, version, validity). A meta point per knowledge base
records which embedding model and dimension built the index, the BM25
parameters, the word document frequencies used by the gate and the characters
too common to be worth searching (see :func:`kotae.knowledge.sparse.common_terms`).

Two backends with the same behaviour:

* ``EdgeBackend`` — the embedded default: Qdrant's in-process engine
  (qdrant-edge-py), a shard directory per knowledge base under
  ``$KOTAE_DATA_DIR/kb/<name>/``. A shard may be open in one process at a time,
  so each retriever opens its own copy of the built shard.
* ``ServerBackend`` — a Qdrant server (``KOTAE_QDRANT_URL``) through
  qdrant-client: one collection, the knowledge base name in every point's
  payload and in every query's filter.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from kotae.knowledge.embeddings import Embedder, check_same_model
from kotae.knowledge.rescore import Candidate, RescoreQuery, RescoreWeights, rescore
from kotae.knowledge.sparse import FIELDS, Bm25Params, common_terms, doc_vector, query_vector, terms
from kotae.knowledge.store import Chunk, KnowledgeStore
from kotae.language.terms import Vocabulary
from kotae.language.text import normalize, search_tokens

NAMESPACE = uuid.UUID("6f1c5d1e-8a57-4d0e-9d59-0d8c4b1b7a11")
OPEN_FROM = 0
OPEN_TO = 99_991_231
EMBED_BATCH = 64
# What an index holds and how it is searched; an index of another format is rebuilt by
# the next ``kotae kb load``. 2: the meta records the common characters. 3: and the
# vocabulary of the records (words, readings, synonym groups; kotae.language.terms). 4: English
# words are lemmatised by the language layer's one stemmer (prizes → prize, not priz).
INDEX_FORMAT = 4


class IndexMissing(RuntimeError):
    """The knowledge base has no index (not loaded, or loaded by an older kotae)."""


def day_number(day: date | None, default: int) -> int:
    return default if day is None else day.year * 10_000 + day.month * 100 + day.day


def point_id(kb: str, key: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{kb}:{key}"))


@dataclass
class IndexMeta:
    kb: str
    embedding_model: str
    dim: int
    chunks: int
    digest: str
    avgdl: dict[str, float]
    df: dict[str, int]
    k1: float
    b: float
    built_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    common_chars: list[str] = field(default_factory=list)
    format: int = 1  # the meta of an index built before formats were recorded has none
    vocabulary: dict[str, Any] = field(default_factory=dict)  # Vocabulary.as_dict() of the records

    def vocab(self) -> Vocabulary:
        """The records' :class:`~kotae.language.terms.Vocabulary` (built once per meta)."""
        cached = self.__dict__.get("_vocab")
        if cached is None:
            cached = self.__dict__["_vocab"] = Vocabulary.from_dict(self.vocabulary)
        return cached

    def idf(self, term: str) -> float:
        n = max(self.chunks, 1)
        d = self.df.get(term, 0)
        return math.log(1.0 + (n - d + 0.5) / (d + 0.5))

    def coverage(self, query_terms: list[str], text: str) -> float:
        """IDF-weighted share of the query's words that ``text`` contains (0–1).

        A word of two characters or more also counts when it is written inside a longer
        word of the text (バス in コミュニティバス, which Sudachi keeps whole).
        """
        q = set(query_terms)
        total = sum(self.idf(t) for t in q)
        if total <= 0:
            return 0.0
        have = set(search_tokens(text))
        flat = normalize(text).lower()
        return sum(self.idf(t) for t in q if t in have or (len(t) > 1 and t in flat)) / total


@dataclass(frozen=True)
class Search:
    """One scored search on one vector field, filtered to a knowledge base, kind and day."""

    using: str  # "dense", "words" or "chars"
    vector: Any  # list[float] for dense, (indices, values) for sparse
    kb: str
    kind: str
    day: date
    limit: int


@dataclass(frozen=True)
class Scored:
    id: str
    score: float
    payload: dict[str, Any]


# What a search returns of each point's payload: all that fusion and the cut to one hit
# per document need. Reading whole payloads (the text above all) for every candidate of
# every search cost more than the searches; the few hits kept are read in full afterwards.
RANKING_PAYLOAD = ["doc_id", "chunk_id"]


class Backend(Protocol):
    def write(self, kb: str, meta: IndexMeta, points: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None: ...
    def meta(self, kb: str) -> IndexMeta | None: ...
    def search(self, searches: list[Search]) -> list[list[Scored]]:
        """Scored points of each search, best first, with only :data:`RANKING_PAYLOAD`."""
        ...

    def points(self, ids: list[str], *, dense: bool = False, words: bool = False) -> dict[str, Stored]:
        """The whole payload of each of these points (and its dense / words vector if asked), by point id."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Stored:
    """A point read in full: its payload and, when asked for, its stored vectors."""

    payload: dict[str, Any]
    dense: np.ndarray | None = None
    words: frozenset[int] | None = None  # term ids of the words vector


def _vectors_asked(dense: bool, words: bool) -> list[str] | bool:
    asked = [name for name, want in (("dense", dense), ("words", words)) if want]
    return asked or False


def _stored(payload: Any, vectors: Any) -> Stored:
    vectors = vectors if isinstance(vectors, dict) else {}
    dense = vectors.get("dense")
    words = vectors.get("words")
    return Stored(
        payload=dict(payload or {}),
        dense=np.asarray(dense, dtype=np.float32) if dense is not None else None,
        words=frozenset(words.indices) if words is not None else None,
    )


def _payload_meta(meta: IndexMeta) -> dict[str, Any]:
    return {"kb": meta.kb, "kind": "meta", "meta": json.dumps(asdict(meta), ensure_ascii=False)}


def _meta_from_payload(payload: dict[str, Any] | None) -> IndexMeta | None:
    if not payload or "meta" not in payload:
        return None
    return IndexMeta(**json.loads(payload["meta"]))


# --- embedded: qdrant-edge ------------------------------------------------------------


#: Points an embedded backend keeps converted (about 5 KB each with a 512-d vector).
POINTS_CACHED = 4096


class EdgeBackend:
    """One qdrant-edge shard (a directory) holding one knowledge base."""

    def __init__(
        self, path: Path, dim: int | None = None, *, create: bool = False, owned_dir: Path | None = None
    ) -> None:
        import qdrant_edge as qe

        self.qe = qe
        self.path = Path(path)
        self.owned_dir = owned_dir  # a private copy, deleted on close
        if create:
            if dim is None:
                raise ValueError("dim is needed to create a shard")
            self.path.mkdir(parents=True, exist_ok=True)
            config = qe.EdgeConfig(
                vectors={"dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
                sparse_vectors={f: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf) for f in FIELDS},
            )
            self.shard = qe.EdgeShard.create(str(self.path), config)
            # Payload indexes: every search filters on these four fields.
            for name, schema in (
                ("kb", qe.PayloadSchemaType.Keyword),
                ("kind", qe.PayloadSchemaType.Keyword),
                ("vf", qe.PayloadSchemaType.Integer),
                ("vt", qe.PayloadSchemaType.Integer),
            ):
                self.shard.update(qe.UpdateOperation.create_field_index(name, schema))
        else:
            self.shard = qe.EdgeShard.load(str(self.path))
        # Points read in full, by (point id, vectors asked). A chunk's id comes from its content, and
        # a retriever's shard is a private copy that only this object writes to, so an entry stays
        # true until write(); converting a point's payload and 512-float vector out of the shard
        # was the largest single cost of the second stage, and a stream's questions keep
        # landing on the same chunks.
        self._points: dict[tuple[str, bool, bool], Stored] = {}

    def _vector(self, vectors: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in vectors.items():
            if isinstance(value, tuple):
                out[name] = self.qe.SparseVector(indices=value[0], values=value[1])
            else:
                out[name] = value
        return out

    def write(self, kb: str, meta: IndexMeta, points: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        qe = self.qe
        self._points.clear()
        batch = []
        for pid, vectors, payload in points:
            batch.append(qe.Point(id=pid, vector=self._vector(vectors), payload=payload))
            if len(batch) >= 512:
                self.shard.update(qe.UpdateOperation.upsert_points(batch))
                batch = []
        if batch:
            self.shard.update(qe.UpdateOperation.upsert_points(batch))
        self.shard.update(
            qe.UpdateOperation.upsert_points(
                [qe.Point(id=point_id(kb, "__meta__"), vector={}, payload=_payload_meta(meta))]
            )
        )
        self.shard.flush()

    def meta(self, kb: str) -> IndexMeta | None:
        records = self.shard.retrieve([point_id(kb, "__meta__")], with_payload=True, with_vector=False)
        return _meta_from_payload(records[0].payload) if records else None

    def _filter(self, s: Search) -> Any:
        qe = self.qe
        d = day_number(s.day, 0)
        return qe.Filter(
            must=[
                qe.FieldCondition(key="kb", match=qe.MatchValue(s.kb)),
                qe.FieldCondition(key="kind", match=qe.MatchValue(s.kind)),
                qe.FieldCondition(key="vf", range=qe.RangeFloat(lte=d)),
                qe.FieldCondition(key="vt", range=qe.RangeFloat(gte=d)),
            ]
        )

    def search(self, searches: list[Search]) -> list[list[Scored]]:
        qe = self.qe
        requests = []
        for s in searches:
            vector = (
                qe.SparseVector(indices=s.vector[0], values=s.vector[1]) if isinstance(s.vector, tuple) else s.vector
            )
            requests.append(
                qe.QueryRequest(
                    limit=s.limit,
                    query=qe.Query.Nearest(vector, using=s.using),
                    filter=self._filter(s),
                    with_payload=RANKING_PAYLOAD,
                    with_vector=False,
                )
            )
        results = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return [[Scored(str(p.id), float(p.score), dict(p.payload or {})) for p in result] for result in results]

    def points(self, ids: list[str], *, dense: bool = False, words: bool = False) -> dict[str, Stored]:
        if not ids:
            return {}
        cache = self._points
        missing = [i for i in ids if (i, dense, words) not in cache]
        if missing:
            if len(cache) + len(missing) > POINTS_CACHED:
                cache.clear()
            for r in self.shard.retrieve(missing, with_payload=True, with_vector=_vectors_asked(dense, words)):
                cache[(str(r.id), dense, words)] = _stored(r.payload, r.vector)
        # A fresh payload dict per call: callers may add to what they are given.
        return {
            i: replace(hit, payload=dict(hit.payload)) for i in ids if (hit := cache.get((i, dense, words))) is not None
        }

    def close(self) -> None:
        try:
            self.shard.close()
        finally:
            if self.owned_dir is not None:
                shutil.rmtree(self.owned_dir, ignore_errors=True)


# --- production: a Qdrant server through qdrant-client ------------------------------


class ServerBackend:
    """A Qdrant collection shared by every knowledge base; ``kb`` in payload and filter."""

    def __init__(self, client: Any, collection: str) -> None:
        from qdrant_client import models

        self.client = client
        self.models = models
        self.collection = collection

    @classmethod
    def connect(cls, url: str, collection: str, api_key: str | None = None) -> ServerBackend:
        from qdrant_client import QdrantClient

        if url.startswith(("http://", "https://")):
            client = QdrantClient(url=url, api_key=api_key, timeout=10)
        else:  # a local path: qdrant-client's local mode (tests, single machine)
            client = QdrantClient(path=url)
        return cls(client, collection)

    def _ensure(self, dim: int) -> None:
        m = self.models
        if self.client.collection_exists(self.collection):
            return
        self.client.create_collection(
            self.collection,
            vectors_config={"dense": m.VectorParams(size=dim, distance=m.Distance.COSINE)},
            sparse_vectors_config={f: m.SparseVectorParams(modifier=m.Modifier.IDF) for f in FIELDS},
        )
        for key, schema in (
            ("kb", m.PayloadSchemaType.KEYWORD),
            ("kind", m.PayloadSchemaType.KEYWORD),
            ("vf", m.PayloadSchemaType.INTEGER),
            ("vt", m.PayloadSchemaType.INTEGER),
        ):
            try:
                self.client.create_payload_index(self.collection, key, schema)
            except Exception:  # local mode has no payload indexes
                pass

    def write(self, kb: str, meta: IndexMeta, points: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        m = self.models
        existing = self.meta(kb)
        if existing and existing.dim != meta.dim:
            raise ValueError(
                f"collection {self.collection} holds {existing.dim}-d vectors; this knowledge base needs {meta.dim}-d"
            )
        self._ensure(meta.dim)
        structs = []
        for pid, vectors, payload in points:
            vec = {
                k: (m.SparseVector(indices=v[0], values=v[1]) if isinstance(v, tuple) else v)
                for k, v in vectors.items()
            }
            structs.append(m.PointStruct(id=pid, vector=vec, payload=payload))
        for i in range(0, len(structs), 256):
            self.client.upsert(self.collection, structs[i : i + 256], wait=True)
        # Drop this knowledge base's chunks that the new content no longer has (after the
        # upsert, so a query during the reload never finds the knowledge base empty).
        keep = [pid for pid, _, _ in points]
        self.client.delete(
            self.collection,
            points_selector=m.FilterSelector(
                filter=m.Filter(
                    must=[m.FieldCondition(key="kb", match=m.MatchValue(value=kb))],
                    must_not=[
                        m.HasIdCondition(has_id=keep),
                        m.FieldCondition(key="kind", match=m.MatchValue(value="meta")),
                    ],
                )
            ),
            wait=True,
        )
        self.client.upsert(
            self.collection,
            [m.PointStruct(id=point_id(kb, "__meta__"), vector={}, payload=_payload_meta(meta))],
            wait=True,
        )

    def meta(self, kb: str) -> IndexMeta | None:
        if not self.client.collection_exists(self.collection):
            return None
        records = self.client.retrieve(self.collection, [point_id(kb, "__meta__")], with_payload=True)
        return _meta_from_payload(records[0].payload) if records else None

    def search(self, searches: list[Search]) -> list[list[Scored]]:
        m = self.models
        requests = []
        for s in searches:
            d = day_number(s.day, 0)
            flt = m.Filter(
                must=[
                    m.FieldCondition(key="kb", match=m.MatchValue(value=s.kb)),
                    m.FieldCondition(key="kind", match=m.MatchValue(value=s.kind)),
                    m.FieldCondition(key="vf", range=m.Range(lte=d)),
                    m.FieldCondition(key="vt", range=m.Range(gte=d)),
                ]
            )
            query = m.SparseVector(indices=s.vector[0], values=s.vector[1]) if isinstance(s.vector, tuple) else s.vector
            requests.append(
                m.QueryRequest(query=query, using=s.using, filter=flt, limit=s.limit, with_payload=RANKING_PAYLOAD)
            )
        results = self.client.query_batch_points(self.collection, requests=requests)
        return [[Scored(str(p.id), float(p.score), dict(p.payload or {})) for p in r.points] for r in results]

    def points(self, ids: list[str], *, dense: bool = False, words: bool = False) -> dict[str, Stored]:
        if not ids:
            return {}
        records = self.client.retrieve(
            self.collection, ids, with_payload=True, with_vectors=_vectors_asked(dense, words)
        )
        return {str(r.id): _stored(r.payload, r.vector) for r in records}

    def close(self) -> None:
        self.client.close()


# --- building ---------------------------------------------------------------------------


def chunk_payload(kb: str, chunk: Chunk) -> dict[str, Any]:
    r = chunk.record
    return {
        "kb": kb,
        "kind": r.kind,
        "doc_id": r.id,
        "chunk_id": chunk.chunk_id,
        "title": r.title,
        "text": chunk.text,
        "question": r.question,
        "answer": r.answer,
        "source": r.source,
        "slide": r.slide,
        "lang": r.language,
        "version": r.version,
        "valid_from": r.valid_from.isoformat() if r.valid_from else None,
        "valid_to": r.valid_to.isoformat() if r.valid_to else None,
        "vf": day_number(r.valid_from, OPEN_FROM),
        "vt": day_number(r.valid_to, OPEN_TO),
    }


def passage_text(chunk: Chunk) -> str:
    """What is embedded and searched for a chunk: its title, then its text."""
    title = chunk.record.title
    return chunk.text if chunk.kind == "faq" or not title else f"{title}\n{chunk.text}"


class EmbeddingCache:
    """Vectors of chunks already embedded by a model, keyed by chunk id (which hashes the text)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                self.vectors = dict(zip(data["ids"].tolist(), data["vectors"], strict=True))

    def save(self, keep: list[str]) -> None:
        ids = [k for k in keep if k in self.vectors]
        if not ids:
            return
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, ids=np.array(ids), vectors=np.stack([self.vectors[k] for k in ids]))
        tmp.replace(self.path)


@dataclass(frozen=True)
class BuildReport:
    chunks: int
    embedded: int
    reused: int
    seconds: float
    model: str
    dim: int


PARALLEL_FROM = 256
DEFAULT_BM25 = Bm25Params()
#: ``progress(done, total)``: chunks embedded so far, of the chunks this load embeds.
Progress = Callable[[int, int], None]


def _embed_in_worker(spec: str, texts: list[str]) -> np.ndarray:
    from kotae.knowledge.embeddings import embedder_for

    # One thread per worker process: the workers already take one core each, and a
    # multi-threaded model in each of them would fight over the same cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return embedder_for(spec).embed(texts, "passage")


def embed_passages(embedder: Embedder, texts: list[str], progress: Progress | None = None) -> np.ndarray:
    """Embed passages in batches; an offline model on a multi-core machine uses one process per core.

    ``progress`` is called after every batch with the passages done and the total.
    """
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
    workers = min(os.cpu_count() or 1, 4)
    out: list[np.ndarray] = []

    def keep(vectors: np.ndarray) -> None:
        out.append(vectors)
        if progress is not None:
            progress(sum(len(v) for v in out), len(texts))

    if getattr(embedder, "offline", False) and len(texts) >= PARALLEL_FROM and workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                for vectors in pool.map(_embed_in_worker, [embedder.model_id] * len(batches), batches):
                    keep(vectors)
            return np.concatenate(out)
        except BrokenProcessPool:  # e.g. a __main__ that workers cannot re-import: do it here
            out.clear()
    for batch in batches:
        keep(embedder.embed(batch, "passage"))
    return np.concatenate(out)


def build_points(
    kb: str,
    chunks: list[Chunk],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    params: Bm25Params,
    digest: str,
    progress: Progress | None = None,
) -> tuple[IndexMeta, list[tuple[str, dict[str, Any], dict[str, Any]]], int]:
    texts = [passage_text(c) for c in chunks]
    toks = {f: [terms(f, t) for t in texts] for f in FIELDS}
    avgdl = {f: (sum(map(len, toks[f])) / len(chunks) if chunks else 1.0) for f in FIELDS}
    df: dict[str, int] = {}
    for words in toks["words"]:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    missing = [i for i, c in enumerate(chunks) if cache is None or c.chunk_id not in cache.vectors]
    vectors: dict[int, np.ndarray] = {}
    for i, v in zip(missing, embed_passages(embedder, [texts[i] for i in missing], progress), strict=True):
        vectors[i] = v
        if cache is not None:
            cache.vectors[chunks[i].chunk_id] = v
    dim = embedder.dim
    points = []
    for i, chunk in enumerate(chunks):
        vec = vectors[i] if i in vectors else cache.vectors[chunk.chunk_id]  # type: ignore[union-attr]
        dim = int(vec.shape[0])
        sparse = {f: doc_vector(toks[f][i], avgdl[f], params) for f in FIELDS}
        points.append(
            (
                point_id(kb, chunk.chunk_id),
                {"dense": vec.astype(np.float32).tolist(), **sparse},
                chunk_payload(kb, chunk),
            )
        )
    meta = IndexMeta(
        kb=kb,
        embedding_model=embedder.model_id,
        dim=dim,
        chunks=len(chunks),
        digest=digest,
        avgdl=avgdl,
        df=df,
        k1=params.k1,
        b=params.b,
        common_chars=common_terms(toks["chars"]),
        format=INDEX_FORMAT,
        vocabulary=Vocabulary.of(texts).as_dict(),
    )
    return meta, points, len(missing)


def _slug(model_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)[:80]


def build_index(
    store: KnowledgeStore,
    embedder: Embedder,
    *,
    qdrant_url: str | None = None,
    collection: str = "kotae_chunks",
    params: Bm25Params = DEFAULT_BM25,
    progress: Progress | None = None,
) -> BuildReport:
    """(Re)build the index of ``store`` with ``embedder``; unchanged chunks reuse their vectors.

    ``progress(done, total)`` follows the embedding of the chunks that are new or changed.
    """
    started = time.perf_counter()
    chunks = store.chunks()
    digest = store.digest() or ""
    cache = EmbeddingCache(store.dir / f"embeddings-{_slug(embedder.model_id)}.npz")
    meta, points, embedded = build_points(store.name, chunks, embedder, cache, params, digest, progress)
    if qdrant_url:
        backend = ServerBackend.connect(qdrant_url, collection)
        try:
            backend.write(store.name, meta, points)
        finally:
            backend.close()
    else:
        target = store.dir / f"index-{digest[:12]}-{_slug(embedder.model_id)}"
        if target.exists():
            shutil.rmtree(target)
        backend = EdgeBackend(target, meta.dim, create=True)
        try:
            backend.write(store.name, meta, points)
        finally:
            backend.close()
        pointer = {
            "path": target.name,
            "digest": digest,
            "model": meta.embedding_model,
            "dim": meta.dim,
            "format": INDEX_FORMAT,
        }
        tmp = store.dir / ".index.json.tmp"
        tmp.write_text(json.dumps(pointer) + "\n")
        tmp.replace(store.dir / "index.json")
        for old in store.dir.glob("index-*"):
            if old.is_dir() and old != target:
                shutil.rmtree(old, ignore_errors=True)
    cache.save([c.chunk_id for c in chunks])
    return BuildReport(
        chunks=len(chunks),
        embedded=embedded,
        reused=len(chunks) - embedded,
        seconds=round(time.perf_counter() - started, 3),
        model=meta.embedding_model,
        dim=meta.dim,
    )


def _copy_sparse(src: str, dst: str) -> None:
    """Copy a file keeping its holes: a shard preallocates (WAL, mmap) far more than it writes."""
    block = 1 << 20
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(block):
            if chunk.count(0) == len(chunk):
                fout.seek(len(chunk), os.SEEK_CUR)
            else:
                fout.write(chunk)
        fout.truncate()
    shutil.copystat(src, dst)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_copies(folder: Path) -> None:
    """Private copies left by processes that died without closing them."""
    for old in folder.glob("*-*"):
        pid = old.name.split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def open_embedded(store: KnowledgeStore) -> tuple[EdgeBackend, str]:
    """A private copy of the knowledge base's built shard, opened; and the digest it was built from.

    Copies live in ``kb/<name>/.open/<pid>-…`` and are deleted on close, at exit, or — for
    a process that was killed — by the next process that opens the knowledge base.
    """
    pointer_path = store.dir / "index.json"
    try:
        pointer = json.loads(pointer_path.read_text())
    except (OSError, ValueError):
        raise IndexMissing(
            f"knowledge base {store.name!r} has no index (run: kotae kb load PATH --name {store.name})"
        ) from None
    source = store.dir / pointer["path"]
    opened = store.dir / ".open"
    opened.mkdir(parents=True, exist_ok=True)
    _remove_stale_copies(opened)
    private = Path(tempfile.mkdtemp(dir=opened, prefix=f"{os.getpid()}-"))
    atexit.register(shutil.rmtree, private, True)
    try:
        shutil.copytree(source, private / "shard", copy_function=_copy_sparse)
    except OSError as exc:  # replaced by a concurrent load: the caller retries
        shutil.rmtree(private, ignore_errors=True)
        raise IndexMissing(f"index of {store.name!r} changed while opening it: {exc}") from None
    try:
        return EdgeBackend(private / "shard", owned_dir=private), pointer["digest"]
    except Exception:
        shutil.rmtree(private, ignore_errors=True)
        raise


# --- searching -------------------------------------------------------------------------

# Fused candidates the second stage reorders (see kotae.knowledge.rescore): its weights were
# fitted on the best 30 (bench/rescoring.py). The retriever takes it from KOTAE_RESCORE_POOL.
RESCORE_POOL = 30


@dataclass(frozen=True)
class Weights:
    """Fusion weights of the three signals (each first scaled to 0–1 within the query)."""

    words: float = 0.4
    chars: float = 0.3
    dense: float = 0.3

    @property
    def fields(self) -> list[str]:
        return [f for f in ("words", "chars", "dense") if getattr(self, f) > 0]


DEFAULT_WEIGHTS = Weights()
DEFAULT_RESCORE = RescoreWeights()


@dataclass(frozen=True)
class Hit:
    payload: dict[str, Any]
    score: float  # fused, for ranking
    signals: dict[str, float]  # raw score of each field (0 when the field did not find it)
    point_id: str = ""

    @property
    def doc_id(self) -> str:
        return self.payload["doc_id"]


def fuse(results: dict[str, list[Scored]], weights: Weights) -> list[Hit]:
    """Weighted sum of max-scaled scores; a chunk missing from a field's list scores 0 there."""
    payloads: dict[str, dict[str, Any]] = {}
    raw: dict[str, dict[str, float]] = {}
    for fieldname, scored in results.items():
        for s in scored:
            payloads.setdefault(s.id, s.payload)
            raw.setdefault(s.id, {})[fieldname] = s.score
    top = {f: max((s.score for s in scored), default=0.0) for f, scored in results.items()}
    hits = []
    for pid, payload in payloads.items():
        signals = {f: raw[pid].get(f, 0.0) for f in results}
        score = 0.0
        for f, value in signals.items():
            w = getattr(weights, f)
            if f == "dense":
                score += w * max(value, 0.0)
            elif top[f] > 0:
                score += w * value / top[f]
        hits.append(Hit(payload, score, signals, pid))
    hits.sort(key=lambda h: (-h.score, h.payload.get("chunk_id", "")))
    return hits


class HybridSearcher:
    """Searches one knowledge base: lexical (words, chars) and dense, fused, then rescored.

    First stage: each signal whose weight is above 0 is searched (``pool`` results
    each) and the results fused (:func:`fuse`). Second stage (``rescore_pool`` > 0,
    the default): the ``rescore_pool`` best fused chunks are read in full, with their
    stored vectors, and reordered by :func:`kotae.knowledge.rescore.rescore`; a hit's
    ``score`` is then the rescored one. ``rescore_pool=0`` keeps the fused order.

    With ``cosines`` (the default) every hit returned carries its embedding cosine
    to the query in ``signals["dense"]`` — read from the hit's stored vector — because
    the retriever's gate needs it; ``cosines=False`` with no second stage skips
    embedding the query when dense is not searched.

    Example::

        searcher = HybridSearcher(backend, meta, embedder)
        hits = searcher.search_many("保育料はいくら？", kinds=("doc",), day=date.today(), top_k=5)["doc"]
    """

    def __init__(
        self,
        backend: Backend,
        meta: IndexMeta,
        embedder: Embedder,
        *,
        weights: Weights = DEFAULT_WEIGHTS,
        pool: int = 30,
        cosines: bool = True,
        rescore_pool: int = RESCORE_POOL,
        rescore_weights: RescoreWeights = DEFAULT_RESCORE,
    ) -> None:
        check_same_model(meta.embedding_model, meta.dim, embedder)
        self.backend = backend
        self.meta = meta
        self.embedder = embedder
        self.weights = weights
        self.pool = pool
        self.cosines = cosines
        self.rescore_pool = rescore_pool
        self.rescore_weights = rescore_weights
        self.common_chars = frozenset(meta.common_chars)

    def embed(self, text: str) -> np.ndarray:
        return self.embedder.embed([text], "query")[0].astype(np.float32)

    def query_vectors(self, text: str) -> dict[str, Any]:
        vectors: dict[str, Any] = {}
        if self.weights.words > 0:
            vectors["words"] = query_vector(terms("words", text))
        if self.weights.chars > 0:
            vectors["chars"] = query_vector([t for t in terms("chars", text) if t not in self.common_chars])
        if self.weights.dense > 0:
            vectors["dense"] = self.embed(text).tolist()
        return vectors

    def search_many(self, text: str, *, kinds: tuple[str, ...], day: date, top_k: int) -> dict[str, list[Hit]]:
        vectors = self.query_vectors(text)
        searches = [
            Search(using=f, vector=v, kb=self.meta.kb, kind=kind, day=day, limit=self.pool)
            for kind in kinds
            for f, v in vectors.items()
            if not (isinstance(v, tuple) and not v[0])
        ]
        results = self.backend.search(searches) if searches else []
        second = self.rescore_pool > 0
        ranked: dict[str, list[Hit]] = {}
        for kind in kinds:
            per_field = {s.using: r for s, r in zip(searches, results, strict=True) if s.kind == kind}
            ranked[kind] = fuse(per_field, self.weights)[: max(top_k, self.rescore_pool) if second else top_k]
        # Searches return only what ranking needs; the candidates are read in full here,
        # with the stored vectors that the second stage and the gate's cosine need.
        with_dense = second or self.cosines
        kept = [h.point_id for hits in ranked.values() for h in hits]
        full = self.backend.points(kept, dense=with_dense, words=second)
        query = self.embed(text) if with_dense and kept else None
        rescore_query = RescoreQuery.of(text, query, self.meta) if second and kept else None
        out: dict[str, list[Hit]] = {}
        for kind, hits in ranked.items():
            found = []
            for h in hits:
                if h.point_id not in full:  # deleted since the search
                    continue
                stored = full[h.point_id]
                signals = h.signals
                if query is not None and stored.dense is not None:
                    signals = {**signals, "dense": float(np.dot(query, stored.dense))}
                found.append((replace(h, payload=stored.payload, signals=signals), stored))
            if rescore_query is not None:
                candidates = [
                    Candidate(
                        fused=h.score,
                        title=h.payload.get("title") or "",
                        text=h.payload.get("text") or "",
                        vector=stored.dense,
                        words=stored.words or frozenset(),
                    )
                    for h, stored in found
                ]
                order = rescore(rescore_query, candidates, self.rescore_weights)
                out[kind] = [replace(found[i][0], score=score) for i, score in order][:top_k]
            else:
                out[kind] = [h for h, _ in found][:top_k]
        return out


def index_is_current(
    store: KnowledgeStore, model_id: str, qdrant_url: str | None, collection: str = "kotae_chunks"
) -> bool:
    """True when the index already reflects the stored records with this embedding model."""
    digest = store.digest()
    if digest is None:
        return False
    if qdrant_url:
        backend = ServerBackend.connect(qdrant_url, collection)
        try:
            meta = backend.meta(store.name)
        finally:
            backend.close()
        return bool(meta and meta.digest == digest and meta.embedding_model == model_id and meta.format == INDEX_FORMAT)
    try:
        pointer = json.loads((store.dir / "index.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        pointer.get("digest") == digest
        and pointer.get("model") == model_id
        and pointer.get("format", 1) == INDEX_FORMAT
        and (store.dir / pointer["path"]).is_dir()
    )
