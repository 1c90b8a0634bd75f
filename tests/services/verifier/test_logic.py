"""kotae.services.verifier.logic.verify: decide whether a draft may be said on stream."""

from __future__ import annotations

import pytest

from kotae.contracts import Evidence, FaqEvidence
from kotae.services.verifier.logic import SAFE_REPLY, verify

JA = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    title="子育て支援",
    text="0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。第2子以降の保育料は無料にします。",
    lang="ja",
)
BUS = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus#a",
    title="バス",
    text="市のコミュニティバスの運賃を、大人1回150円にします。",
    lang="ja",
)
EN = Evidence(
    doc_id="bus-fare-2027-en",
    chunk_id="bus-en#a",
    title="Buses",
    text="A ride on the Minato Loop community bus will cost adults a flat 150 yen. Children of elementary-school age or younger ride free.",
    lang="en",
)
FAQ = FaqEvidence(
    faq_id="faq-lunch",
    question="給食費は無料になりますか？",
    answer="はい、給食費を2027年9月から無料にします。",
    lang="ja",
)


# --- passes ---------------------------------------------------------------------------


def test_faithful_japanese_answer_passes() -> None:
    v = verify(
        "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。第2子以降の保育料は無料にします[1]。",
        [JA],
        [],
    )
    assert v.verdict == 0 and v.passed
    assert v.reasons == []
    assert v.method == "citation_and_support"


def test_faithful_english_answer_passes() -> None:
    v = verify(
        "A ride on the Minato Loop community bus will cost adults a flat 150 yen[1]. Children of elementary-school age or younger ride free[1].",
        [EN],
        [],
    )
    assert v.verdict == 0 and v.passed


def test_faithful_answer_from_several_blocks_and_faq_passes() -> None:
    answer = "第2子以降の保育料は無料にします[1]。運賃は大人1回150円にします[2]。給食費を2027年9月から無料にします[3]。"
    assert verify(answer, [JA, BUS], [FAQ]).verdict == 0


def test_marker_after_the_full_stop_passes() -> None:
    assert verify("第2子以降の保育料は無料にします。[1]", [JA], []).verdict == 0


# --- detections ------------------------------------------------------------------------


def test_changed_number_in_japanese_is_rejected_naming_the_number() -> None:
    v = verify("0〜2歳児の保育料は、世帯の所得にかかわらず月額2万円を上限にします[1]。", [JA], [])
    assert v.verdict == 2 and not v.passed
    assert any("20000" in r and "[1]" in r for r in v.reasons)


def test_changed_number_in_english_is_rejected_naming_the_number() -> None:
    v = verify("A ride on the Minato Loop community bus will cost adults a flat 200 yen[1].", [EN], [])
    assert v.verdict == 2
    assert any("200" in r for r in v.reasons)


def test_superseded_fare_is_rejected_against_the_current_document() -> None:
    v = verify("市のコミュニティバスの運賃を、大人1回200円にします[1]。", [BUS], [])
    assert v.verdict == 2
    assert any("200" in r for r in v.reasons)


def test_uncited_sentence_is_rejected() -> None:
    v = verify("第2子以降の保育料は無料にします[1]。保育料は月額1万5千円が上限です。", [JA], [])
    assert v.verdict == 2
    assert any("uncited" in r and "保育料は月額1万5千円が上限です" in r for r in v.reasons)


def test_uncited_english_sentence_is_rejected() -> None:
    v = verify("Adults pay a flat 150 yen[1]. Children ride free.", [EN], [])
    assert v.verdict == 2
    assert any("uncited" in r and "Children ride free." in r for r in v.reasons)


def test_unknown_citation_is_rejected() -> None:
    v = verify("第2子以降の保育料は無料にします[3]。", [JA], [FAQ])
    assert v.verdict == 2
    assert any("[3]" in r and "there are 2" in r for r in v.reasons)
    en = verify("Adults pay a flat 150 yen[2].", [EN], [])
    assert en.verdict == 2 and any("[2]" in r for r in en.reasons)


def test_content_not_in_the_cited_block_is_rejected_as_invented() -> None:
    # Mars is a proper name the evidence never mentions: an invention (3), not merely unsupported.
    v = verify("第2子以降の保育料は無料にします[1]。市長は港に宇宙センターを建設して火星に移住します[1]。", [JA], [])
    assert v.verdict == 3
    assert any("火星" in r for r in v.reasons)


def test_english_invention_is_rejected() -> None:
    v = verify("The mayor will build a spaceport on Mars with robots[1].", [EN], [])
    assert v.verdict == 3  # Mars is named nowhere in the evidence
    assert any("Mars" in r for r in v.reasons)
    assert any("spaceport" in r for r in v.reasons)


def test_true_fact_cited_to_the_wrong_block_is_rejected() -> None:
    # The fare is in [2], not in [1]: the citation must hold the claim.
    v = verify("運賃は大人1回150円にします[1]。", [JA, BUS], [])
    assert v.verdict == 2
    assert any("150" in r for r in v.reasons)


@pytest.mark.parametrize("answer", ["", "   ", "\n"])
def test_empty_answer_is_rejected(answer: str) -> None:
    v = verify(answer, [JA], [])
    assert v.verdict == 2 and not v.passed
    assert v.reasons == ["empty answer"]


def test_answer_without_evidence_is_rejected() -> None:
    assert verify("第2子以降の保育料は無料にします[1]。", [], []).verdict == 2


def test_safe_replies_exist_for_both_languages() -> None:
    assert SAFE_REPLY["ja"] and SAFE_REPLY["en"]


@pytest.mark.parametrize(
    "answer",
    [
        # a short sentence whose term no relation around it can place
        "また、その形態[1]。",
        # another name given in parentheses, with 非 in it, quoted in full-width brackets
        "半狭前舌非円唇母音（はんせま・まえじた・ひえんしんぼいん）ともいう[1]。",
    ],
)
def test_a_word_for_word_quote_of_a_cited_sentence_is_supported(answer: str) -> None:
    text = (
        "非円唇前舌半狭母音(ひえんしん・まえじた・はんせまぼいん)は母音の種類の一つ。"
        "半狭前舌非円唇母音(はんせま・まえじた・ひえんしんぼいん)ともいう。"
        "ノンフィクションとは、史実や記録に基づいた作品。また、その形態。"
    )
    doc = Evidence(doc_id="d", chunk_id="d#0", title="用語", text=text)
    v = verify(answer, [doc], [])
    assert v.verdict == 0 and v.decision == "supported", v.reasons
    # The same words negated are not a quote.
    assert verify(answer.replace("[1]。", "ではない[1]。"), [doc], []).verdict != 0


# --- bare answers: right only where they stand -------------------------------------------------

DAIBUTSU = Evidence(
    doc_id="daibutsu",
    chunk_id="daibutsu#a",
    title="奈良の大仏",
    text="奈良の大仏は東大寺の大仏殿に安置されている。現在の大仏殿は1709年に再建されたもので、"
    "開眼供養は752年に行われた。大仏の造立を命じたのは聖武天皇である。",
    lang="ja",
)


@pytest.mark.parametrize(
    ("question", "right", "swapped"),
    [
        ("大仏殿が再建されたのは何年？", "1709年です[1]。", "752年です[1]。"),
        ("大仏の造立を命じたのは誰？", "聖武天皇です[1]。", "東大寺です[1]。"),
        ("奈良の大仏があるのはどこの寺？", "東大寺です[1]。", "聖武天皇です[1]。"),
    ],
)
def test_a_bare_answer_is_supported_where_it_answers_and_a_swap_from_the_same_paragraph_is_not(
    question: str, right: str, swapped: str
) -> None:
    # Every word of the swapped answer is in the evidence: only where it stands says it is wrong.
    assert verify(right, [DAIBUTSU], [], question=question).decision == "supported"
    assert verify(swapped, [DAIBUTSU], [], question=question).decision != "supported"


@pytest.mark.parametrize(
    "question",
    [
        None,  # nothing to place it by
        "いつ？",  # a question with no words of the evidence
        "それっていつ？",
    ],
)
def test_a_bare_answer_the_evidence_cannot_place_is_unsure_never_supported(question: str | None) -> None:
    v = verify("1709年です[1]。", [DAIBUTSU], [], question=question)
    assert v.decision == "unsure" and v.verdict == 0
    assert "cannot place as the answer to the question" in v.reasons[0]


def test_a_bare_yes_or_no_is_unsure_as_the_lexical_method_cannot_read_it() -> None:
    party = Evidence(doc_id="p", chunk_id="p", text="他党に所属しながら党員になることはできない。", lang="ja")
    v = verify("できないです[1]。", [party], [], question="他党に入ったままでも党員になれる？")
    assert v.decision == "unsure"


def test_a_full_sentence_needs_no_question_to_be_supported() -> None:
    assert verify("現在の大仏殿は1709年に再建されたものです[1]。", [DAIBUTSU], []).decision == "supported"
