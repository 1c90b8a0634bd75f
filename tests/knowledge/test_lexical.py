"""kotae.knowledge.lexical.LexicalIndex: BM25 search with validity filtering and coverage."""

from __future__ import annotations

from datetime import date

import pytest

from kotae.knowledge.lexical import LexicalIndex
from kotae.knowledge.records import KBRecord
from kotae.knowledge.store import chunk_record
from kotae.knowledge.text import search_tokens

DAY = date(2026, 11, 30)


def rec(id: str, title: str, text: str, **kw: object) -> KBRecord:
    return KBRecord(id=id, kind="doc", title=title, text=text, **kw)


RECORDS = [
    rec("childcare", "子育て支援", "0〜2歳児の保育料は月額1万5千円を上限にします。第2子以降の保育料は無料にします。"),
    rec("lunch", "教育", "市立小中学校の給食費を無料にします。タブレットを新しくします。"),
    rec("disaster", "防災", "指定避難所を80か所に増やします。防災アプリを公開します。"),
    rec("housing", "住まい", "若者に月額1万円の家賃補助を支給します。空き家を改修します。"),
    rec("bus-en", "Buses", "Adults will pay a flat 150 yen per ride on the community bus. Children ride free."),
    KBRecord(id="faq-lunch", kind="faq", question="給食費は無料になりますか？", answer="はい、無料になります。"),
]


def make_index(records: list[KBRecord]) -> LexicalIndex:
    return LexicalIndex([c for r in records for c in chunk_record(r)])


@pytest.fixture(scope="module")
def index() -> LexicalIndex:
    return make_index(RECORDS)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("保育料っていくらになるの", "childcare"),
        ("避難所は何か所になる？", "disaster"),
        ("家賃補助はある？", "housing"),
        ("How much is the bus fare for adults?", "bus-en"),
    ],
)
def test_the_right_document_ranks_first(index: LexicalIndex, query: str, expected: str) -> None:
    hits = index.search(query, day=DAY, top_k=3)
    assert hits, query
    assert hits[0].chunk.doc_id == expected
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))  # best first


def test_kind_filter(index: LexicalIndex) -> None:
    docs = index.search("給食費は無料？", day=DAY, top_k=5, kind="doc")
    faq = index.search("給食費は無料？", day=DAY, top_k=5, kind="faq")
    assert docs and all(h.chunk.kind == "doc" for h in docs)
    assert docs[0].chunk.doc_id == "lunch"
    assert [h.chunk.doc_id for h in faq] == ["faq-lunch"]


def test_top_k_limits_the_hits(index: LexicalIndex) -> None:
    assert len(index.search("無料", day=DAY, top_k=1)) == 1
    assert len(index.search("無料", day=DAY, top_k=10)) >= 3


def test_title_is_searchable_for_documents(index: LexicalIndex) -> None:
    hits = index.search("防災", day=DAY, top_k=3)
    assert hits[0].chunk.doc_id == "disaster"


def test_a_document_not_valid_on_the_day_is_never_returned() -> None:
    old = rec(
        "bus-fare-2026", "バス運賃", "コミュニティバスの運賃を大人1回200円にします。",
        valid_from=date(2025, 6, 1), valid_to=date(2026, 10, 31),
    )
    new = rec("bus-fare-2027", "バス運賃", "コミュニティバスの運賃を大人1回150円にします。", valid_from=date(2026, 11, 1))
    index = make_index([old, new, *RECORDS])

    before = index.search("バスの運賃は大人いくら", day=date(2026, 6, 1), top_k=10)
    after = index.search("バスの運賃は大人いくら", day=date(2026, 11, 30), top_k=10)
    last_old_day = index.search("バスの運賃は大人いくら", day=date(2026, 10, 31), top_k=10)
    first_new_day = index.search("バスの運賃は大人いくら", day=date(2026, 11, 1), top_k=10)

    assert before[0].chunk.doc_id == "bus-fare-2026" and "200円" in before[0].chunk.text
    assert "bus-fare-2027" not in [h.chunk.doc_id for h in before]
    assert after[0].chunk.doc_id == "bus-fare-2027" and "150円" in after[0].chunk.text
    assert "bus-fare-2026" not in [h.chunk.doc_id for h in after]
    assert [h.chunk.doc_id for h in last_old_day][:1] == ["bus-fare-2026"]
    assert "bus-fare-2027" not in [h.chunk.doc_id for h in last_old_day]
    assert [h.chunk.doc_id for h in first_new_day][:1] == ["bus-fare-2027"]
    assert "bus-fare-2026" not in [h.chunk.doc_id for h in first_new_day]
    # before either version: no fare at all
    assert not {"bus-fare-2026", "bus-fare-2027"} & {
        h.chunk.doc_id for h in index.search("バスの運賃は大人いくら", day=date(2020, 1, 1), top_k=10)
    }


def test_coverage_is_one_when_every_query_term_occurs(index: LexicalIndex) -> None:
    hits = index.search("保育料っていくらになるの", day=DAY, top_k=1)
    assert hits[0].coverage == pytest.approx(1.0)


def test_coverage_is_partial_when_some_terms_are_missing(index: LexicalIndex) -> None:
    hits = index.search("保育料と天気と野球", day=DAY, top_k=1)
    assert hits[0].chunk.doc_id == "childcare"
    assert 0.0 < hits[0].coverage < 0.6


def test_coverage_is_low_for_off_topic_text(index: LexicalIndex) -> None:
    query = search_tokens("明日の天気と野球の試合と好きな食べ物を空き家で")
    i = next(i for i, c in enumerate(index.chunks) if c.doc_id == "housing")
    assert index.coverage(query, i) < 0.3
    j = next(i for i, c in enumerate(index.chunks) if c.doc_id == "childcare")
    assert index.coverage(query, j) == 0.0


def test_coverage_stays_between_zero_and_one(index: LexicalIndex) -> None:
    for query in ("保育料", "無料の給食費と保育料", "bus fare children free adults"):
        for hit in index.search(query, day=DAY, top_k=10):
            assert 0.0 <= hit.coverage <= 1.0


def test_query_with_no_known_term_returns_nothing(index: LexicalIndex) -> None:
    assert index.search("明日の天気どうなるんだろ", day=DAY, top_k=5) == []
    assert index.search("こんばんは〜", day=DAY, top_k=5) == []


def test_empty_index_returns_nothing() -> None:
    empty = LexicalIndex([])
    assert empty.search("保育料はいくら", day=DAY, top_k=5) == []
    assert empty.search("", day=DAY, top_k=5) == []
