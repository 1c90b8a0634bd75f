"""kotae.services.reranker.logic: keep the relevant documents, most relevant first."""

from __future__ import annotations

from kotae.contracts import CommentV1, Evidence, RetrievalV1
from kotae.services.reranker.logic import keep_top_n

DOCS = [Evidence(doc_id=f"d{i}", chunk_id=f"d{i}#1", title=f"T{i}", text=f"text {i}", slide=i) for i in range(1, 6)]


def retrieval(docs: list[Evidence]) -> RetrievalV1:
    comment = CommentV1(comment_id="c1", stream_id="s", author="a", text="保育料は？", normalized="保育料は?")
    return RetrievalV1(
        comment_id="c1", stream_id="s", comment=comment, gate="answer", top_score=1.0, docs=docs, method="bm25"
    )


def test_keep_top_n_keeps_the_first_n_in_retrieval_order() -> None:
    result = keep_top_n(retrieval(DOCS), 3)
    assert [d.doc_id for d in result.docs] == ["d1", "d2", "d3"]
    assert result.method == "keep_top_n"
    assert not result.degraded


def test_keep_top_n_with_fewer_documents() -> None:
    assert [d.doc_id for d in keep_top_n(retrieval(DOCS[:2]), 5).docs] == ["d1", "d2"]


def test_slide_is_the_top_documents_slide() -> None:
    assert keep_top_n(retrieval(DOCS[2:]), 2).slide == 3
    assert keep_top_n(retrieval([]), 3).slide is None
