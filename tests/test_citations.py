"""kotae.citations: numbered evidence blocks and the citation check."""

from __future__ import annotations

from kotae.citations import citation_check, cited_numbers, numbered_blocks, strip_markers
from kotae.contracts import Evidence, FaqEvidence

DOCS = [
    Evidence(
        doc_id="childcare",
        chunk_id="childcare#a",
        title="保育",
        text="保育料は無料です。",
        source="p.4",
        slide=4,
        lang="ja",
    ),
    Evidence(doc_id="bus", chunk_id="bus#b", title="バス", text="運賃は150円です。", source="p.6", slide=6, lang="ja"),
]
FAQ = [FaqEvidence(faq_id="faq-lunch", question="給食費は？", answer="無料です。", source="FAQ", slide=10, lang="ja")]


def test_documents_are_numbered_first_then_faq() -> None:
    blocks = numbered_blocks(DOCS, FAQ)
    assert [(b.n, b.kind, b.record_id) for b in blocks] == [
        (1, "doc", "childcare"),
        (2, "doc", "bus"),
        (3, "faq", "faq-lunch"),
    ]
    assert blocks[0].chunk_id == "childcare#a" and blocks[0].slide == 4 and blocks[0].text == "保育料は無料です。"
    faq = blocks[2]
    assert faq.chunk_id is None
    assert faq.text == "給食費は？\n無料です。"  # question and answer
    assert faq.title == "給食費は？" and faq.source == "FAQ" and faq.slide == 10


def test_faq_alone_starts_at_one() -> None:
    assert [b.n for b in numbered_blocks([], FAQ)] == [1]
    assert numbered_blocks([], []) == []


def test_a_fully_cited_answer_passes() -> None:
    check = citation_check("保育料は無料です[1]。運賃は150円です[2]。", 2)
    assert check.ok and check.unknown_ids == [] and check.uncited_sentences == []


def test_unknown_ids_are_found() -> None:
    check = citation_check("保育料は無料です[5]。運賃は150円です[2]。", 2)
    assert not check.ok
    assert check.unknown_ids == [5]
    assert citation_check("無料です[0]。", 2).unknown_ids == [0]
    assert citation_check("無料です[3][3][4]。", 2).unknown_ids == [3, 4]


def test_uncited_sentences_are_found() -> None:
    check = citation_check("保育料は無料です[1]。詳しくは後で。", 1)
    assert not check.ok
    assert check.uncited_sentences == ["詳しくは後で。"]
    en = citation_check("The fare is 150 yen [1]. Kids ride free.", 1)
    assert en.uncited_sentences == ["Kids ride free."]


def test_marker_after_the_full_stop_counts_for_its_sentence() -> None:
    assert citation_check("保育料は無料です。[1]運賃は150円です。[2]", 2).ok
    assert citation_check("The fare is 150 yen. [1] Kids ride free. [2]", 2).ok


def test_exempt_sentences_are_not_flagged() -> None:
    sorry = "Sorry, my documents don't cover that question."
    assert citation_check(sorry, 0, exempt=(sorry,)).ok
    assert not citation_check(sorry, 0).ok


def test_lines_ending_with_a_colon_are_not_claims() -> None:
    assert citation_check("Here is what the plan says:\nThe fare is 150 yen [1].", 1).ok
    assert citation_check("資料によると次のとおりです：\n運賃は150円です[1]。", 1).ok


def test_code_blocks_are_not_checked() -> None:
    answer = "The settings are:\n```\nfare = 150\n```\nThe fare is 150 yen [1]."
    assert citation_check(answer, 1).ok


def test_cited_numbers_in_order() -> None:
    assert cited_numbers("a[2] b[1][3]。") == [2, 1, 3]
    assert cited_numbers("no markers") == []


def test_strip_markers() -> None:
    assert strip_markers("運賃は150円です[1][2]。") == "運賃は150円です。"
    assert strip_markers("The fare is 150 yen [1]. Kids ride free [3].") == "The fare is 150 yen. Kids ride free."
    assert strip_markers("  [1]無料です。 ") == "無料です。"
    assert strip_markers("無料です。") == "無料です。"
