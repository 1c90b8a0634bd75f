"""kotae.services.reranker.logic: keep the relevant documents, most relevant first."""

from __future__ import annotations

from kotae.contracts import CommentV1, Evidence, RetrievalV1
from kotae.services.reranker.logic import apply_selection, keep_top_n

DOCS = [Evidence(doc_id=f"d{i}", chunk_id=f"d{i}#1", title=f"T{i}", text=f"text {i}", slide=i) for i in range(1, 6)]


def retrieval(docs: list[Evidence]) -> RetrievalV1:
    comment = CommentV1(comment_id="c1", stream_id="s", author="a", text="保育料は？", normalized="保育料は?")
    return RetrievalV1(comment_id="c1", stream_id="s", comment=comment, gate="answer", top_score=1.0, docs=docs, method="bm25")


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


def test_apply_selection_keeps_the_given_order() -> None:
    assert [d.doc_id for d in apply_selection(DOCS, [3, 1, 5])] == ["d3", "d1", "d5"]


def test_apply_selection_drops_unknown_ids() -> None:
    assert [d.doc_id for d in apply_selection(DOCS, [0, 2, 6, -1, 99])] == ["d2"]


def test_apply_selection_drops_duplicates() -> None:
    assert [d.doc_id for d in apply_selection(DOCS, [2, 2, 4, 2])] == ["d2", "d4"]


def test_apply_selection_drops_bools_strings_and_other_types() -> None:
    picked = apply_selection(DOCS, [True, "1", 2, False, 3.0, None, [4], {"id": 5}, 5])
    assert [d.doc_id for d in picked] == ["d2", "d5"]


def test_apply_selection_of_nothing() -> None:
    assert apply_selection(DOCS, []) == []
    assert apply_selection([], [1, 2]) == []
