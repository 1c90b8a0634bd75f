"""kotae.knowledge.embeddings: the offline USE default, the embedder registry, the model check."""

from __future__ import annotations

import numpy as np
import pytest

from kotae.faults import TransientError
from kotae.knowledge.embeddings import (
    EmbeddingMismatch,
    EmbeddingUnavailable,
    OpenAIEmbedder,
    UniversalSentenceEncoder,
    _Memo,
    check_same_model,
    embedder_for,
)

USE = "use-multilingual-v3"


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    return embedder_for(USE)  # type: ignore[return-value]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --- USE multilingual v3 -------------------------------------------------------------------


def test_use_vectors_are_512_d_unit_float32(use: UniversalSentenceEncoder) -> None:
    vectors = use.embed(["保育料はいくらですか", "What time do the polls close?", "草"], "query")
    assert use.model_id == USE and use.dim == 512
    assert vectors.shape == (3, 512)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_related_japanese_sentences_score_higher_than_unrelated(use: UniversalSentenceEncoder) -> None:
    fee, nursery, weather, bus, community_bus = use.embed(
        [
            "保育料はいくらですか",
            "保育園の料金を教えてください",
            "今日は天気がいいですね",
            "バスの運賃はいくら？",
            "コミュニティバスの料金",
        ],
        "query",
    )
    assert cos(fee, nursery) > cos(fee, weather) + 0.3
    assert cos(bus, community_bus) > cos(bus, weather) + 0.3
    assert cos(fee, nursery) > cos(fee, community_bus)


def test_use_is_multilingual(use: UniversalSentenceEncoder) -> None:
    ja, en, other = use.embed(
        ["保育料はいくらですか", "How much is the nursery fee?", "今日は天気がいいですね"], "query"
    )
    assert cos(ja, en) > cos(ja, other)


def test_use_is_symmetric_queries_and_passages_share_one_space(use: UniversalSentenceEncoder) -> None:
    text = "指定避難所を80か所に増やします。"
    assert np.array_equal(use.embed([text], "query"), use.embed([text], "passage"))


def test_use_returns_one_row_per_text_in_order_with_repeats(use: UniversalSentenceEncoder) -> None:
    a, b = "みなとループの運賃", "防災アプリ"
    both = use.embed([a, b, a], "passage")
    assert both.shape == (3, 512)
    assert np.array_equal(both[0], both[2])
    assert np.array_equal(both[1], use.embed([b], "passage")[0])
    assert use.embed([], "query").shape == (0, 512)


def test_memo_computes_each_text_once_and_stays_bounded() -> None:
    calls: list[list[str]] = []

    def compute(batch: list[str]) -> np.ndarray:
        calls.append(list(batch))
        return np.array([[float(len(t)), 1.0] for t in batch], dtype=np.float32)

    memo = _Memo(size=2)
    first = memo.embed(["a", "bb", "a"], "query", compute)
    assert calls == [["a", "bb"]]
    assert first[:, 0].tolist() == [1.0, 2.0, 1.0]
    memo.embed(["bb"], "query", compute)
    assert len(calls) == 1  # memoised
    memo.embed(["bb"], "passage", compute)
    assert calls[-1] == ["bb"]  # kinds are kept apart
    assert len(memo.data) <= 2


# --- the registry ------------------------------------------------------------------------


def test_embedder_for_caches_one_instance_per_spec(use: UniversalSentenceEncoder) -> None:
    assert embedder_for(USE) is use
    openai = embedder_for("openai:text-embedding-3-small", api_key="x")
    assert embedder_for("openai:text-embedding-3-small", api_key="x") is openai


def test_openai_and_compatible_specs_build_without_a_call() -> None:
    openai = embedder_for("openai:text-embedding-3-small", api_key="x")
    assert isinstance(openai, OpenAIEmbedder)
    assert openai.model_id == "openai:text-embedding-3-small"
    assert openai.dim == 0  # unknown until the first response
    local = embedder_for("compatible:http://127.0.0.1:9/v1|bge-m3")
    assert isinstance(local, OpenAIEmbedder)
    assert local.model_id == "compatible:http://127.0.0.1:9/v1|bge-m3"
    assert (local.base_url, local.model) == ("http://127.0.0.1:9/v1", "bge-m3")


@pytest.mark.parametrize("spec", ["bert-base", "compatible:http://localhost:8000/v1", "", "USE-multilingual-v3"])
def test_an_unknown_spec_is_rejected_naming_the_setting(spec: str) -> None:
    with pytest.raises(ValueError) as err:
        embedder_for(spec)
    message = str(err.value)
    assert "KOTAE_EMBEDDING_MODEL" in message
    assert repr(spec) in message
    assert USE in message and "e5-small-q4" in message


def test_an_unreachable_compatible_server_is_a_transient_error() -> None:
    local = OpenAIEmbedder(model="bge-m3", base_url="http://127.0.0.1:9/v1", timeout_s=2.0)
    with pytest.raises(EmbeddingUnavailable) as err:
        local.embed(["保育料"], "query")
    assert isinstance(err.value, TransientError)
    assert "compatible:http://127.0.0.1:9/v1|bge-m3" in str(err.value)
    assert local.embed([], "query").shape == (0, 0)


# --- check_same_model ----------------------------------------------------------------------


def test_same_model_and_dimension_pass(use: UniversalSentenceEncoder) -> None:
    check_same_model(USE, 512, use)


def test_another_model_is_refused_naming_both(use: UniversalSentenceEncoder) -> None:
    with pytest.raises(EmbeddingMismatch) as err:
        check_same_model("e5-small-q4", 384, use)
    message = str(err.value)
    assert "e5-small-q4 (384-d)" in message and f"{USE} (512-d)" in message
    assert "kotae kb load" in message


def test_same_name_with_another_dimension_is_refused(use: UniversalSentenceEncoder) -> None:
    with pytest.raises(EmbeddingMismatch, match="768-d"):
        check_same_model(USE, 768, use)


def test_a_remote_model_of_unknown_dimension_is_checked_by_name() -> None:
    remote = OpenAIEmbedder(model="text-embedding-3-small", api_key="x")
    check_same_model("openai:text-embedding-3-small", 1536, remote)  # dim 0: not known yet
    with pytest.raises(EmbeddingMismatch):
        check_same_model(USE, 512, remote)
    remote.dim = 1536
    check_same_model("openai:text-embedding-3-small", 1536, remote)
    with pytest.raises(EmbeddingMismatch):
        check_same_model("openai:text-embedding-3-small", 3072, remote)


def test_an_openai_compatible_embedding_model_indexes_and_searches_end_to_end(tmp_path) -> None:
    """kb load and retrieval with KOTAE_EMBEDDING_MODEL=compatible:…, through the real openai SDK."""
    from datetime import date

    from kotae.knowledge.loading import load_knowledge_base
    from kotae.knowledge.records import KBRecord
    from kotae.services.retriever.logic import Retriever
    from kotae.settings import load_settings
    from tests.fakes.model_server import FakeModelServer

    records = [
        KBRecord(id="fee", kind="doc", title="保育料", text="保育料は月額1万5千円を上限にします。"),
        KBRecord(id="bus", kind="doc", title="バス", text="バスの運賃は150円にします。"),
    ]
    with FakeModelServer() as fake:
        settings = load_settings(
            data_dir=tmp_path, embedding_model=f"compatible:{fake.url}/v1|embedder", openai_api_key="k"
        )
        report = load_knowledge_base(records, "default", settings)
        result = Retriever(settings).retrieve("保育料はいくら？", kb="default", day=date(2026, 11, 30))
    assert report["index"]["model"] == f"compatible:{fake.url}/v1|embedder"
    assert report["index"]["dim"] == 3  # what the server returned, recorded in the index
    assert result.docs[0].doc_id == "fee"
    paths = [r["path"] for r in fake.requests]
    assert paths and set(paths) == {"/v1/embeddings"}
    assert fake.requests[-1]["body"]["input"] == ["保育料はいくら？"]
