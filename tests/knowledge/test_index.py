"""kotae.knowledge.index: building the hybrid index in Qdrant and searching it.

A tiny crafted knowledge base, indexed with the offline USE model: the embedded
backend (a qdrant-edge shard), and the server backend through qdrant-client's
local mode (``qdrant_url`` a path), which must agree with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from kotae.knowledge.embeddings import EmbeddingMismatch, embedder_for
from kotae.knowledge.index import (
    INDEX_FORMAT,
    OPEN_TO,
    RANKING_PAYLOAD,
    BuildReport,
    EdgeBackend,
    HybridSearcher,
    IndexMeta,
    IndexMissing,
    Scored,
    Search,
    ServerBackend,
    Weights,
    build_index,
    day_number,
    fuse,
    index_is_current,
    open_embedded,
    passage_text,
    point_id,
)
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import KBRecord
from kotae.knowledge.sparse import FIELDS, term_id
from kotae.knowledge.store import KnowledgeStore
from kotae.settings import load_settings

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")

NOW = date(2026, 11, 30)
EARLIER = date(2026, 6, 1)
USE = "use-multilingual-v3"

RECORDS = [
    KBRecord(
        id="childcare",
        kind="doc",
        title="子育て支援",
        text="保育料は月額1万5千円を上限にします。第2子以降の保育料は無料にします。",
    ),
    KBRecord(
        id="bus-old",
        kind="doc",
        title="コミュニティバス運賃",
        text="コミュニティバスの運賃は大人1回200円です。",
        version="1",
        valid_from=date(2025, 6, 1),
        valid_to=date(2026, 10, 31),
    ),
    KBRecord(
        id="bus-new",
        kind="doc",
        title="コミュニティバス運賃と新路線",
        text="コミュニティバスの運賃は大人1回150円です。新路線を開設します。",
        version="2",
        valid_from=date(2026, 11, 1),
    ),
    KBRecord(id="disaster", kind="doc", title="防災", text="指定避難所を80か所に増やします。防災アプリを公開します。"),
    KBRecord(
        id="faq-lunch",
        kind="faq",
        question="給食費は無料になりますか？",
        answer="はい、市立小中学校の給食費は無料になります。",
    ),
]
QUERIES = ["保育料はいくら？", "バスの運賃はいくら", "避難所は何か所になる？", "給食費は無料？", "防災アプリ"]


class FakeEmbedder:
    """A deterministic stand-in of another model and dimension (no model to load)."""

    def __init__(self, model_id: str = "fake-8", dim: int = 8) -> None:
        self.model_id = model_id
        self.dim = dim
        self.calls = 0

    def embed(self, texts: list[str], kind: str) -> np.ndarray:
        self.calls += 1
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=self.dim) for t in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def doc_ids(hits: list) -> list[str]:
    return [h.doc_id for h in hits]


def first_per_doc(hits: list) -> list[str]:
    return list(dict.fromkeys(doc_ids(hits)))


@pytest.fixture(scope="module")
def use():  # type: ignore[no-untyped-def]
    return embedder_for(USE)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, use) -> tuple[KnowledgeStore, BuildReport]:  # type: ignore[no-untyped-def]
    store = KnowledgeStore(tmp_path_factory.mktemp("kb"), "tiny")
    store.load(RECORDS)
    return store, build_index(store, use)


@pytest.fixture(scope="module")
def edge(built, use) -> Iterator[HybridSearcher]:  # type: ignore[no-untyped-def]
    store, _ = built
    backend, _digest = open_embedded(store)
    meta = backend.meta(store.name)
    assert meta is not None
    yield HybridSearcher(backend, meta, use)
    backend.close()


# --- building and opening -----------------------------------------------------------------


def test_build_report_and_pointer(built) -> None:  # type: ignore[no-untyped-def]
    store, report = built
    assert report.chunks == len(store.chunks()) == len(RECORDS)
    assert (report.embedded, report.reused) == (report.chunks, 0)
    assert (report.model, report.dim) == (USE, 512)
    pointer = json.loads((store.dir / "index.json").read_text())
    assert pointer["digest"] == store.digest() and pointer["model"] == USE and pointer["dim"] == 512
    assert (store.dir / pointer["path"]).is_dir()
    assert [p.name for p in store.dir.glob("index-*")] == [pointer["path"]]


def test_open_embedded_reads_the_meta_point(built) -> None:  # type: ignore[no-untyped-def]
    store, _ = built
    backend, digest = open_embedded(store)
    try:
        meta = backend.meta("tiny")
        assert digest == store.digest()
        assert meta is not None
        assert (meta.kb, meta.embedding_model, meta.dim, meta.chunks, meta.digest) == ("tiny", USE, 512, 5, digest)
        assert set(meta.avgdl) == set(FIELDS) and all(v > 0 for v in meta.avgdl.values())
        assert (meta.k1, meta.b) == (0.5, 0.9)
        assert meta.df["運賃"] == 2 and meta.df["保育料"] == 1  # words of title and text, per chunk
        assert meta.idf("保育料") > meta.idf("運賃") > 0
        assert meta.coverage(["保育料", "運賃"], "保育料は無料") == pytest.approx(
            meta.idf("保育料") / (meta.idf("保育料") + meta.idf("運賃"))
        )
        assert backend.meta("other-kb") is None
    finally:
        backend.close()


def test_open_embedded_opens_a_private_copy(built) -> None:  # type: ignore[no-untyped-def]
    store, _ = built
    first, _ = open_embedded(store)
    second, _ = open_embedded(store)  # a shard is open in one place at a time: each gets its own copy
    try:
        assert first.path != second.path
        built_at = store.dir / json.loads((store.dir / "index.json").read_text())["path"]
        assert first.path != built_at and store.dir / ".open" in first.path.parents  # never the built shard itself
        assert first.meta("tiny") == second.meta("tiny")
    finally:
        first.close()
        second.close()


def test_searches_return_what_ranking_needs_and_kept_hits_are_read_in_full(edge: HybridSearcher) -> None:
    (scored,) = edge.backend.search([Search("words", edge.query_vectors("保育料")["words"], "tiny", "doc", NOW, 10)])
    assert scored and all(set(s.payload) == set(RANKING_PAYLOAD) for s in scored)
    hit = edge.search_many("保育料", kinds=("doc",), day=NOW, top_k=1)["doc"][0]
    assert hit.payload["text"].startswith("保育料は月額") and hit.payload["title"] == "子育て支援"
    assert hit.point_id == point_id("tiny", hit.payload["chunk_id"])


def test_open_embedded_without_an_index_names_the_knowledge_base(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "never-built")
    store.load(RECORDS[:1])
    with pytest.raises(IndexMissing, match="never-built"):
        open_embedded(store)


def test_payload_carries_what_a_stage_needs(edge: HybridSearcher) -> None:
    hit = edge.search_many("バスの運賃", kinds=("doc",), day=NOW, top_k=1)["doc"][0]
    p = hit.payload
    assert (p["kb"], p["kind"], p["doc_id"], p["version"], p["lang"]) == ("tiny", "doc", "bus-new", "2", "ja")
    assert p["title"] == "コミュニティバス運賃と新路線" and "150円" in p["text"]
    assert (p["valid_from"], p["valid_to"]) == ("2026-11-01", None)
    assert (p["vf"], p["vt"]) == (20261101, OPEN_TO)
    assert p["chunk_id"].startswith("bus-new#")


def test_day_numbers_and_point_ids() -> None:
    assert day_number(date(2026, 11, 1), 0) == 20261101
    assert day_number(None, 7) == 7
    assert point_id("a", "x#1") == point_id("a", "x#1") != point_id("b", "x#1")


# --- searching -------------------------------------------------------------------------------


def test_the_right_document_first(edge: HybridSearcher) -> None:
    expected = {"保育料はいくら？": "childcare", "避難所は何か所になる？": "disaster", "防災アプリ": "disaster"}
    for query, doc in expected.items():
        hits = edge.search_many(query, kinds=("doc",), day=NOW, top_k=5)["doc"]
        assert hits[0].doc_id == doc, query
        assert set(hits[0].signals) == {"words", "chars", "dense"}
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize(
    ("day", "found", "not_found"),
    [
        pytest.param(NOW, {"bus-new"}, {"bus-old"}, id="after-the-change"),
        pytest.param(EARLIER, {"bus-old"}, {"bus-new"}, id="before-the-change"),
        pytest.param(date(2026, 10, 31), {"bus-old"}, {"bus-new"}, id="valid_to-inclusive"),
        pytest.param(date(2026, 11, 1), {"bus-new"}, {"bus-old"}, id="valid_from-inclusive"),
        pytest.param(date(2025, 1, 1), set(), {"bus-old", "bus-new"}, id="before-either"),
    ],
)
def test_only_versions_valid_on_the_day_are_found(edge: HybridSearcher, day: date, found: set, not_found: set) -> None:
    hits = edge.search_many("コミュニティバスの運賃", kinds=("doc",), day=day, top_k=10)["doc"]
    ids = doc_ids(hits)
    assert found <= set(ids) and not (not_found & set(ids))
    if found:
        assert ids[0] in found
    assert {"childcare", "disaster"} <= set(ids)  # undated documents are always valid


def test_documents_and_faq_are_searched_apart(edge: HybridSearcher) -> None:
    out = edge.search_many("給食費は無料？", kinds=("doc", "faq"), day=NOW, top_k=10)
    assert doc_ids(out["faq"]) == ["faq-lunch"]
    assert "faq-lunch" not in doc_ids(out["doc"])
    assert all(h.payload["kind"] == "doc" for h in out["doc"])
    assert out["faq"][0].payload["question"] == "給食費は無料になりますか？"


def test_top_k_limits_each_kind(edge: HybridSearcher) -> None:
    out = edge.search_many("保育料", kinds=("doc", "faq"), day=NOW, top_k=2)
    assert len(out["doc"]) == 2 and len(out["faq"]) == 1


def test_the_kb_filter_keeps_other_knowledge_bases_out(edge: HybridSearcher, use) -> None:  # type: ignore[no-untyped-def]
    vector = use.embed(["保育料"], "query")[0].tolist()
    mine, other = edge.backend.search(
        [
            Search(using="dense", vector=vector, kb="tiny", kind="doc", day=NOW, limit=10),
            Search(using="dense", vector=vector, kb="someone-else", kind="doc", day=NOW, limit=10),
        ]
    )
    assert {s.payload["doc_id"] for s in mine} == {"childcare", "bus-new", "disaster"}  # bus-old expired
    assert other == []


def test_a_query_without_lexical_terms_is_searched_by_embedding_only(edge: HybridSearcher) -> None:
    vectors = edge.query_vectors("！？")
    assert vectors["words"] == ([], []) and vectors["chars"] == ([], [])
    hits = edge.search_many("！？", kinds=("doc",), day=NOW, top_k=3)["doc"]
    assert hits and all(set(h.signals) == {"dense"} for h in hits)
    first_stage = HybridSearcher(edge.backend, edge.meta, edge.embedder, rescore_pool=0)
    hits = first_stage.search_many("！？", kinds=("doc",), day=NOW, top_k=3)["doc"]
    assert [h.score for h in hits] == pytest.approx([0.3 * max(h.signals["dense"], 0.0) for h in hits])


def test_weights_choose_the_fields_searched(edge: HybridSearcher) -> None:
    assert Weights().fields == ["words", "chars", "dense"]
    assert Weights(chars=0).fields == ["words", "dense"]
    fake = FakeEmbedder(USE, 512)  # never called when dense weighs nothing, no cosine is wanted and nothing is rescored
    lexical = HybridSearcher(
        edge.backend, edge.meta, fake, weights=Weights(words=1.0, chars=0.5, dense=0.0), cosines=False, rescore_pool=0
    )
    assert set(lexical.query_vectors("保育料")) == {"words", "chars"}
    hits = lexical.search_many("保育料", kinds=("doc",), day=NOW, top_k=3)["doc"]
    assert hits[0].doc_id == "childcare" and fake.calls == 0
    assert "dense" not in hits[0].signals


@pytest.mark.parametrize("query", QUERIES)
def test_hits_ranked_without_dense_still_carry_their_cosine(edge: HybridSearcher, query: str) -> None:
    """The gate needs the cosine of the best hits: read from their stored vectors, it equals the searched one."""
    lexical = HybridSearcher(edge.backend, edge.meta, edge.embedder, weights=Weights(words=0.75, chars=1.0, dense=0.0))
    searched = {h.point_id: h for h in edge.search_many(query, kinds=("doc", "faq"), day=NOW, top_k=10)["doc"]}
    hits = lexical.search_many(query, kinds=("doc", "faq"), day=NOW, top_k=10)["doc"]
    assert hits
    for hit in hits:
        assert hit.payload["text"] and set(hit.signals) >= {"dense"}
        if hit.point_id in searched:
            assert hit.signals["dense"] == pytest.approx(searched[hit.point_id].signals["dense"], abs=1e-4)
    # ranked by the lexical signals alone
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_searcher_refuses_an_embedder_of_another_model(edge: HybridSearcher) -> None:
    with pytest.raises(EmbeddingMismatch) as err:
        HybridSearcher(edge.backend, edge.meta, FakeEmbedder())
    assert USE in str(err.value) and "fake-8" in str(err.value)


# --- fuse ------------------------------------------------------------------------------------


def sc(pid: str, score: float) -> Scored:
    return Scored(pid, score, {"doc_id": pid.split("#")[0], "chunk_id": pid})


def test_fuse_max_scales_lexical_scores_and_adds_raw_cosine() -> None:
    results = {
        "words": [sc("a#1", 8.0), sc("b#1", 2.0)],
        "chars": [sc("a#1", 3.0), sc("c#1", 6.0)],
        "dense": [sc("a#1", 0.5), sc("b#1", 0.9), sc("c#1", -0.2)],
    }
    hits = {h.payload["chunk_id"]: h for h in fuse(results, Weights(words=0.4, chars=0.3, dense=0.3))}
    assert hits["a#1"].score == pytest.approx(0.4 * 1.0 + 0.3 * 0.5 + 0.3 * 0.5)
    assert hits["b#1"].score == pytest.approx(0.4 * 0.25 + 0.3 * 0.0 + 0.3 * 0.9)
    assert hits["c#1"].score == pytest.approx(0.4 * 0.0 + 0.3 * 1.0 + 0.0)  # negative cosine adds nothing
    # signals are the raw scores, 0 where the field did not find the chunk
    assert hits["b#1"].signals == {"words": 2.0, "chars": 0.0, "dense": 0.9}
    assert hits["c#1"].signals == {"words": 0.0, "chars": 6.0, "dense": -0.2}


def test_fuse_ranks_best_first_and_breaks_ties_by_chunk_id() -> None:
    results = {"words": [sc("b#1", 1.0), sc("a#1", 1.0), sc("c#1", 0.5)]}
    hits = fuse(results, Weights(words=1.0, chars=0.0, dense=0.0))
    assert [h.payload["chunk_id"] for h in hits] == ["a#1", "b#1", "c#1"]
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0, 0.5])
    assert hits[0].doc_id == "a"


def test_dense_is_not_rescaled_within_the_query() -> None:
    # a weak best match stays weak: the gate relies on the absolute cosine
    hits = fuse({"dense": [sc("a#1", 0.2), sc("b#1", 0.1)]}, Weights())
    assert [h.score for h in hits] == pytest.approx([0.3 * 0.2, 0.3 * 0.1])


def test_fuse_of_nothing() -> None:
    assert fuse({}, Weights()) == []
    assert fuse({"words": [], "dense": []}, Weights()) == []
    only_zero = fuse({"words": [sc("a#1", 0.0)]}, Weights())
    assert [h.score for h in only_zero] == [0.0]


# --- idempotence and the embedding cache -----------------------------------------------------


def test_index_is_current_after_a_build_and_stale_after_a_change(tmp_path: Path, use) -> None:  # type: ignore[no-untyped-def]
    store = KnowledgeStore(tmp_path, "kb")
    store.load(RECORDS)
    assert not index_is_current(store, USE, None)
    build_index(store, use)
    assert index_is_current(store, USE, None)
    assert not index_is_current(store, "e5-small-q4", None)  # another model needs its own index
    store.load([RECORDS[0].model_copy(update={"text": "保育料は無料にします。"})])
    assert not index_is_current(store, USE, None)

    again = build_index(store, use)
    assert index_is_current(store, USE, None)
    # the embedding cache: only the changed chunk was embedded
    assert (again.embedded, again.reused) == (1, again.chunks - 1)
    assert len(list(store.dir.glob("index-*"))) == 1  # the old index is gone
    assert (store.dir / f"embeddings-{USE}.npz").exists()


def test_an_index_of_an_older_format_is_rebuilt_by_the_next_load(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    load_knowledge_base(RECORDS, "default", settings)
    store = KnowledgeStore(settings.kb_dir, "default")
    pointer_path = store.dir / "index.json"
    pointer = json.loads(pointer_path.read_text())
    assert pointer["format"] == INDEX_FORMAT
    del pointer["format"]  # as written before formats were recorded
    pointer_path.write_text(json.dumps(pointer))
    assert not index_is_current(store, USE, None)
    # still searchable until then ...
    backend, _ = open_embedded(store)
    try:
        assert backend.meta("default") is not None
    finally:
        backend.close()
    # ... and the next load rebuilds it
    assert load_knowledge_base(RECORDS, "default", settings)["index"]["rebuilt"] is True
    assert index_is_current(store, USE, None)


def test_the_meta_of_an_older_index_still_reads() -> None:
    old = {
        "kb": "kb",
        "embedding_model": USE,
        "dim": 512,
        "chunks": 1,
        "digest": "d",
        "avgdl": {"words": 1.0, "chars": 2.0},
        "df": {"保育料": 1},
        "k1": 0.5,
        "b": 0.9,
        "built_at": "2026-11-01T00:00:00+00:00",
    }
    meta = IndexMeta(**old)
    assert (meta.format, meta.common_chars) == (1, [])


def test_common_characters_are_left_out_of_queries_on_a_large_knowledge_base(tmp_path: Path) -> None:
    """A particle in every chunk decides nothing and costs the longest posting list: not searched."""
    fake = FakeEmbedder()
    filler = [KBRecord(id=f"item-{i}", kind="doc", title="", text=f"項目{i}の話です。") for i in range(520)]
    target = KBRecord(id="childcare", kind="doc", title="", text="保育料の上限は月額1万5千円です。")
    store = KnowledgeStore(tmp_path, "large")
    store.load([*filler, target])
    build_index(store, fake)
    backend, _ = open_embedded(store)
    try:
        meta = backend.meta("large")
        assert meta is not None and meta.format == INDEX_FORMAT
        assert "の" in meta.common_chars and "保" not in meta.common_chars
        searcher = HybridSearcher(backend, meta, fake, weights=Weights(words=0.75, chars=1.0, dense=0.0))
        ids, _ = searcher.query_vectors("保育料の上限")["chars"]
        assert term_id("の") not in ids and {term_id("保育"), term_id("上限")} <= set(ids)
        assert searcher.search_many("保育料の上限", kinds=("doc",), day=NOW, top_k=1)["doc"][0].doc_id == "childcare"
    finally:
        backend.close()
    # a small knowledge base searches every character
    assert edge_meta_common_chars(tmp_path) == []


def edge_meta_common_chars(tmp_path: Path) -> list[str]:
    store = KnowledgeStore(tmp_path, "small")
    store.load(RECORDS)
    build_index(store, FakeEmbedder())
    backend, _ = open_embedded(store)
    try:
        meta = backend.meta("small")
        assert meta is not None
        return meta.common_chars
    finally:
        backend.close()


def test_a_second_build_of_the_same_content_embeds_nothing(tmp_path: Path, use) -> None:  # type: ignore[no-untyped-def]
    store = KnowledgeStore(tmp_path, "kb")
    store.load(RECORDS)
    first = build_index(store, use)
    second = build_index(store, use)
    assert first.embedded == len(RECORDS)
    assert (second.embedded, second.reused, second.chunks) == (0, len(RECORDS), len(RECORDS))


def test_the_cache_survives_a_new_process_view_of_the_store(tmp_path: Path, use) -> None:  # type: ignore[no-untyped-def]
    KnowledgeStore(tmp_path, "kb").load(RECORDS)
    build_index(KnowledgeStore(tmp_path, "kb"), use)
    fresh = KnowledgeStore(tmp_path, "kb")  # nothing in memory but the embedder's own memo
    assert build_index(fresh, use).embedded == 0


def test_loading_a_knowledge_base_twice_rebuilds_once(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    first = load_knowledge_base(RECORDS, "default", settings)
    second = load_knowledge_base(RECORDS, "default", settings)
    assert first["index"]["rebuilt"] is True and first["index"]["embedded"] == len(RECORDS)
    assert second["index"] == {"rebuilt": False, "model": USE}
    assert (second["added"], second["unchanged"]) == (0, len(RECORDS))
    third = load_knowledge_base([RECORDS[0].model_copy(update={"title": "子育て"})], "default", settings)
    assert third["index"]["rebuilt"] is True and third["updated"] == 1


def test_a_title_edit_re_embeds_the_passage(tmp_path: Path, use) -> None:  # type: ignore[no-untyped-def]
    store = KnowledgeStore(tmp_path, "kb")
    store.load([RECORDS[0]])
    build_index(store, use)
    store.load([RECORDS[0].model_copy(update={"title": "コミュニティバス運賃"})])
    report = build_index(store, use)
    backend, _ = open_embedded(store)
    try:
        chunk = store.chunks()[0]
        stored = backend.shard.retrieve([point_id("kb", chunk.chunk_id)], with_payload=False, with_vector=True)
        vector = np.array(stored[0].vector["dense"])
    finally:
        backend.close()
    expected = use.embed([passage_text(chunk)], "passage")[0]
    assert float(vector @ expected) == pytest.approx(1.0, abs=1e-4)
    assert report.embedded == 1


def test_a_load_reports_its_progress_over_the_chunks_it_embeds(tmp_path: Path) -> None:
    records = [KBRecord(id=f"d{i}", kind="doc", title=f"政策{i}", text=f"第{i}項の説明です。") for i in range(150)]
    store = KnowledgeStore(tmp_path, "kb")
    store.load(records)
    seen: list[tuple[int, int]] = []
    build_index(store, FakeEmbedder(), progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (150, 150)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == 3  # one call a batch of 64
    # Incremental: a reload that changes one record embeds, and reports, only that record's chunk.
    store.load([records[7].model_copy(update={"text": "第7項の説明を改めました。"})])
    seen.clear()
    report = build_index(store, FakeEmbedder(), progress=lambda done, total: seen.append((done, total)))
    assert report.embedded == 1 and seen == [(1, 1)]


# --- the server backend (qdrant-client local mode) --------------------------------------------


def test_server_backend_agrees_with_the_embedded_backend(tmp_path: Path, built, edge: HybridSearcher, use) -> None:  # type: ignore[no-untyped-def]
    store, _ = built
    url = str(tmp_path / "qdrant")  # a path: qdrant-client's local mode
    report = build_index(store, use, qdrant_url=url)
    assert (report.chunks, report.embedded, report.model) == (len(RECORDS), 0, USE)  # vectors reused
    assert index_is_current(store, USE, url)
    backend = ServerBackend.connect(url, "kotae_chunks")
    try:
        meta = backend.meta("tiny")
        assert meta is not None and meta.digest == store.digest() and meta.df == edge.meta.df
        lexical = Weights(words=0.75, chars=1.0, dense=0.0)
        pairs = [
            (HybridSearcher(backend, meta, use), edge),
            (
                HybridSearcher(backend, meta, use, weights=lexical),
                HybridSearcher(edge.backend, edge.meta, use, weights=lexical),
            ),
        ]
        for server, embedded in pairs:
            for day in (NOW, EARLIER):
                for query in QUERIES:
                    a = server.search_many(query, kinds=("doc", "faq"), day=day, top_k=3)
                    b = embedded.search_many(query, kinds=("doc", "faq"), day=day, top_k=3)
                    for kind in ("doc", "faq"):
                        assert doc_ids(a[kind]) == doc_ids(b[kind]), (query, day, kind)
                        assert [h.score for h in a[kind]] == pytest.approx(
                            [h.score for h in b[kind]], rel=1e-3, abs=1e-4
                        )
                        assert [h.signals.get("dense") for h in a[kind]] == pytest.approx(
                            [h.signals.get("dense") for h in b[kind]], abs=1e-4
                        )
                        assert [h.payload for h in a[kind]] == [h.payload for h in b[kind]]
    finally:
        backend.close()


def test_server_backend_rebuilds_an_index_of_an_older_format(tmp_path: Path, built, use) -> None:  # type: ignore[no-untyped-def]
    store, _ = built
    url = str(tmp_path / "qdrant")
    build_index(store, use, qdrant_url=url)
    assert index_is_current(store, USE, url)
    backend = ServerBackend.connect(url, "kotae_chunks")
    try:
        meta = backend.meta("tiny")
        assert meta is not None and meta.format == INDEX_FORMAT
        old = {k: v for k, v in json.loads(json.dumps(meta.__dict__)).items() if k not in ("format", "common_chars")}
        backend.client.set_payload("kotae_chunks", {"meta": json.dumps(old)}, points=[point_id("tiny", "__meta__")])
    finally:
        backend.close()
    assert not index_is_current(store, USE, url)
    build_index(store, use, qdrant_url=url)
    assert index_is_current(store, USE, url)


def test_server_backend_keeps_knowledge_bases_apart_in_one_collection(tmp_path: Path, use) -> None:  # type: ignore[no-untyped-def]
    url = str(tmp_path / "qdrant")
    a = KnowledgeStore(tmp_path / "kb", "a")
    b = KnowledgeStore(tmp_path / "kb", "b")
    a.load(RECORDS[:2])  # childcare, bus-old
    b.load(RECORDS[2:4])  # bus-new, disaster
    build_index(a, use, qdrant_url=url)
    build_index(b, use, qdrant_url=url)
    # rebuilding 'a' with an edited document drops its old chunk and leaves 'b' alone
    a.load([RECORDS[0].model_copy(update={"text": "保育料は無料にします。", "version": "2"})])
    build_index(a, use, qdrant_url=url)

    backend = ServerBackend.connect(url, "kotae_chunks")
    try:
        for name, expected in (("a", {"childcare", "bus-old"}), ("b", {"bus-new", "disaster"})):
            meta = backend.meta(name)
            assert meta is not None and meta.kb == name
            searcher = HybridSearcher(backend, meta, use)
            for query in QUERIES:
                hits = searcher.search_many(query, kinds=("doc", "faq"), day=EARLIER if name == "a" else NOW, top_k=10)
                assert set(doc_ids(hits["doc"])) <= expected, (name, query)
                assert hits["faq"] == []
        meta_a = backend.meta("a")
        assert meta_a is not None
        childcare = HybridSearcher(backend, meta_a, use).search_many("保育料", kinds=("doc",), day=EARLIER, top_k=10)[
            "doc"
        ]
        assert [h.payload["text"] for h in childcare if h.doc_id == "childcare"] == ["保育料は無料にします。"]
        assert backend.meta("c") is None
        assert backend.client.count("kotae_chunks").count == 2 + 2 + 2  # chunks of a and b, and two meta points
    finally:
        backend.close()


def test_server_backend_refuses_vectors_of_another_dimension(tmp_path: Path, built, use) -> None:  # type: ignore[no-untyped-def]
    store, _ = built
    url = str(tmp_path / "qdrant")
    build_index(store, use, qdrant_url=url)
    other = KnowledgeStore(tmp_path / "kb", "tiny")  # the same name, rebuilt with an 8-d model
    other.load(RECORDS[:1])
    with pytest.raises(ValueError, match="512-d"):
        build_index(other, FakeEmbedder(), qdrant_url=url)


def test_edge_backend_needs_a_dimension_to_create(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dim"):
        EdgeBackend(tmp_path / "shard", create=True)


@pytest.mark.parametrize("query", QUERIES)
def test_the_second_stage_reorders_what_the_first_stage_found(edge: HybridSearcher, query: str) -> None:
    first_stage = HybridSearcher(edge.backend, edge.meta, edge.embedder, rescore_pool=0)
    fused = first_stage.search_many(query, kinds=("doc",), day=NOW, top_k=10)["doc"]
    rescored = edge.search_many(query, kinds=("doc",), day=NOW, top_k=10)["doc"]
    assert {h.point_id for h in rescored} == {h.point_id for h in fused}
    assert [h.score for h in rescored] == sorted((h.score for h in rescored), reverse=True)
    assert all(0.0 <= h.score <= 1.0 for h in rescored)
