"""kotae.services.verifier.logic.verify with aligned support: each verdict class, in Japanese
and English, and the swaps a bag-of-words check lets through."""

from __future__ import annotations

import pytest

from kotae.contracts import Evidence
from kotae.language.answer_slot import SLOT_MARGIN, SLOT_WEIGHTS
from kotae.services.verifier.alignment import align, slot_places
from kotae.services.verifier.logic import verify

TSUYU = Evidence(
    doc_id="tsuyu",
    chunk_id="tsuyu#1",
    text=(
        "梅雨は、北海道と小笠原諸島を除く日本でみられる気象現象で、5月から7月にかけて来る雨の多い期間のこと。"
        "雨季の一種である。日本気象協会によると、梅雨入りの平年値は沖縄で5月10日ごろである。"
        "市の人口は約1万5千人、予算は3億円である。"
    ),
    lang="ja",
)
BUS = Evidence(
    doc_id="bus",
    chunk_id="bus#1",
    text=(
        "The Minato Loop bus costs adults 150 yen. Children ride free. "
        "The service is run by Harbor Transit, and the mayor, Aiko Tanaka, opened it in 2027."
    ),
    lang="en",
)
WHERE = "日本で梅雨がないのは北海道とどこか。"


def check(answer: str, question: str | None = None):
    evidence = BUS if answer.isascii() else TSUYU
    return verify(answer, [evidence], [], question=question)


# --- 0: supported ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "梅雨は、北海道と小笠原諸島を除く日本でみられる[1]。",
        "日本気象協会によると、梅雨入りの平年値は沖縄で5月10日ごろである[1]。",
        "The Minato Loop bus costs adults 150 yen[1].",
        "Aiko Tanaka opened the service in 2027[1].",
    ],
)
def test_a_supported_answer_passes(answer: str) -> None:
    v = check(answer)
    assert v.verdict == 0 and v.passed, v.reasons


@pytest.mark.parametrize(
    "answer",
    [
        "梅雨入りの平年値は沖縄で５月１０日ごろである[1]。",  # full-width digits
        "梅雨入りの平年値は沖縄で五月十日ごろです[1]。",  # kanji numerals
        "市の人口は約15000人です[1]。",  # 1万5千 written out
        "市の人口は約1.5万人です[1]。",
        "予算は３億円です[1]。",
        "予算は300000000円です[1]。",
    ],
)
def test_numbers_are_compared_after_normalisation(answer: str) -> None:
    assert check(answer).verdict == 0


def test_a_bare_answer_that_fills_the_questions_slot_passes() -> None:
    assert check("小笠原諸島です[1]。", WHERE).verdict == 0
    assert check("Aiko Tanaka[1].", "Who opened the service?").verdict == 0


# --- 1: contradicts the knowledge -------------------------------------------------------


def test_an_entity_swapped_within_the_paragraph_is_a_contradiction() -> None:
    # Every word is in the evidence; Okinawa is just in another sentence, in another relation.
    answer = "梅雨は、北海道と沖縄を除く日本でみられる[1]。"
    v = check(answer)
    assert v.verdict == 1
    assert any("沖縄" in r and "not in this relation" in r for r in v.reasons)


def test_a_number_moved_to_another_claim_is_a_contradiction() -> None:
    v = check("梅雨入りの平年値は沖縄で7月10日ごろである[1]。")
    assert v.verdict == 1
    assert any("'7'" in r for r in v.reasons)


def test_a_number_with_another_counter_is_a_contradiction() -> None:
    # 3億 is in the evidence, but as yen, not as people.
    assert check("市の人口は約3億人である[1]。").verdict == 1


def test_an_entity_repeated_in_place_of_another_is_a_contradiction() -> None:
    # Hokkaido is there once; the claim needs it twice.
    assert check("梅雨は、北海道と北海道を除く日本でみられる[1]。").verdict == 1


def test_a_bare_answer_in_the_wrong_slot_is_a_contradiction() -> None:
    assert check("沖縄です[1]。", WHERE).verdict == 1
    assert check("日本です[1]。", WHERE).verdict == 1
    assert check("Harbor Transit[1].", "Who opened the service?").verdict == 1


def test_english_number_and_subject_swapped_are_contradictions() -> None:
    v = check("Children ride for 150 yen[1].")
    assert v.verdict == 1
    assert any("150" in r for r in v.reasons)
    assert check("The mayor opened it in 150[1].").verdict == 1


# --- 2: states what the knowledge does not say -----------------------------------------


def test_a_changed_number_is_unsupported_and_named() -> None:
    v = check("市の人口は約2万人です[1]。")
    assert v.verdict == 2
    assert any("20000" in r for r in v.reasons)
    en = check("Aiko Tanaka opened the service in 2025[1].")
    assert en.verdict == 2
    assert any("2025" in r for r in en.reasons)


def test_an_added_claim_is_unsupported() -> None:
    v = check("梅雨は、北海道と小笠原諸島を除く日本でみられ、農業に欠かせない[1]。")
    assert v.verdict == 2
    assert any("農業" in r for r in v.reasons)
    assert check("Adults pay 200 yen for the Minato Loop bus[1].").verdict == 2


# --- 3: invents people, organisations, concepts -----------------------------------------


def test_an_invented_person_or_organisation_is_an_invention() -> None:
    v = check("気象庁の山田太郎によると、梅雨は雨季の一種である[1]。")
    assert v.verdict == 3
    assert any("山田太郎" in r for r in v.reasons)
    assert check("東洋未来財団の調べでは、梅雨は雨季の一種である[1]。").verdict == 3
    en = check("According to Kenji Sato, the Minato Loop bus costs adults 150 yen[1].")
    assert en.verdict == 3
    assert any("Kenji Sato" in r for r in en.reasons)


def test_an_organisation_the_evidence_names_is_not_an_invention() -> None:
    assert check("日本気象協会によると、梅雨入りの平年値は沖縄で5月10日ごろである[1]。").verdict == 0


# --- the findings themselves ------------------------------------------------------------


def test_align_points_at_the_evidence_sentence_of_the_other_relation() -> None:
    findings = align("梅雨は、北海道と沖縄を除く日本でみられる。", [(1, TSUYU.text)])
    assert [(f.cls, f.term, f.block) for f in findings] == [(1, "沖縄", 1)]
    assert findings[0].evidence is not None and "平年値" in findings[0].evidence


PERCUSSION = Evidence(
    doc_id="music",
    chunk_id="music#1",
    text=(
        "打楽器には明確な音高を持つものと持たないものがある。後者はリズムを奏でる。"
        "タイでは1888年(仏暦2431年)に廃止された。"
    ),
    lang="ja",
)


def test_a_bare_answer_in_a_sentence_that_refers_back_passes() -> None:
    # 後者 points at the sentence before, which holds the question's words.
    question = "明確な音高を持たない打楽器は何を奏でるか。"
    assert verify("リズムです[1]。", [PERCUSSION], [], question=question).verdict == 0
    assert verify("音高です[1]。", [PERCUSSION], [], question=question).verdict == 1


def test_a_parenthesised_alias_is_not_a_rival_answer() -> None:
    # 仏暦2431年 restates 1888年 in another calendar; either year answers the question.
    question = "タイで廃止されたのは何年か。"
    assert verify("1888年です[1]。", [PERCUSSION], [], question=question).verdict == 0


def test_without_the_question_a_bare_answer_is_only_checked_for_presence() -> None:
    # The slot check needs the question: a wrong but present entity then goes through,
    # and an absent one is still caught.
    assert check("沖縄です[1]。").verdict == 0
    assert check("四国です[1]。").verdict != 0


def test_a_verdict_carries_the_findings_behind_its_reasons() -> None:
    v = check("梅雨は、北海道と沖縄を除く日本でみられる[1]。")
    assert [(f.cls, f.term, f.block, f.claim) for f in v.findings] == [
        (1, "沖縄", 1, "梅雨は、北海道と沖縄を除く日本でみられる。")
    ]
    assert check("梅雨は、北海道と小笠原諸島を除く日本でみられる[1]。").findings == []


# --- bare answers and the slot their question asks about --------------------------------

BURMA = Evidence(
    doc_id="burma",
    chunk_id="burma#1",
    text="ビルマ暦(ビルマれき)は、ミャンマーやタイで昔使われていた暦法の一つ。小暦とも言う。太陰太陽暦。",
    lang="ja",
)
LAOS = Evidence(
    doc_id="laos",
    chunk_id="laos#1",
    text=(
        "少ない人口が満遍なく分散して暮らすラオスでは、大部分の人は稲作を基盤とする農業を営んでいる。"
        "まず、自給米を確保して余剰分を販売し、現金収入とする。ラオス人の主食はもち米である。"
        "自給農業を基盤とした分散型社会である。"
    ),
    lang="ja",
)


def test_a_bare_answer_of_the_kind_the_question_names_passes() -> None:
    # 何暦 asks for a 暦: 小暦 is one, 暦法 (the sentence's other calendar word) is not the other name.
    question = "ビルマ暦は別名何暦というか"
    assert verify("小暦です[1]。", [BURMA], [], question=question).verdict == 0
    assert verify("暦法です[1]。", [BURMA], [], question=question).verdict == 1


def test_a_bare_answer_with_the_particle_the_question_asks_with_passes() -> None:
    # 何を営んでいるか ~ 農業を営んでいる; the other sentences' nouns fill no such slot.
    question = "少ない人口が満遍なく分散して暮らすラオスでは、大部分の人は何を営んでいるか"
    assert verify("農業です[1]。", [LAOS], [], question=question).verdict == 0
    for wrong in ("現金収入", "もち米", "分散型社会"):
        assert verify(f"{wrong}です[1]。", [LAOS], [], question=question).verdict == 1, wrong


def test_a_bare_answer_that_only_repeats_the_question_is_a_contradiction() -> None:
    v = check("北海道です[1]。", WHERE)
    assert v.verdict == 1
    assert any("repeats the question" in r for r in v.reasons)
    assert check("Minato Loop[1].", "Who runs the Minato Loop bus?").verdict == 1


def test_a_question_that_offers_a_choice_may_be_answered_with_its_own_words() -> None:
    assert check("北海道です[1]。", "北海道と沖縄のどちらに梅雨がないか。").verdict == 0
    assert check("Harbor Transit[1].", "Does Harbor Transit or the mayor run the service?").verdict == 0


def test_a_bare_answer_that_says_nothing_is_rejected() -> None:
    v = check("ものです[1]。", WHERE)
    assert v.verdict == 2
    assert any("says nothing" in r for r in v.reasons)
    assert check("It is[1].", "Who runs the service?").verdict == 2


def test_evidence_that_does_not_address_the_question_backs_no_bare_answer() -> None:
    # Okinawa is in the evidence, but nothing there is about France.
    assert check("沖縄です[1]。", "フランスの首都はどこか。").verdict == 1
    assert check("Aiko Tanaka[1].", "Who founded the Louvre?").verdict == 1


# --- the places a bare answer is weighed at ----------------------------------------------


def test_the_right_answers_place_outscores_its_rivals_and_decides_the_verdict() -> None:
    # 小笠原諸島 follows 北海道と, as どこ does in the question; 沖縄 is in a sentence about something else.
    evidence = [(1, TSUYU.text)]
    right = slot_places("小笠原諸島です。", evidence, WHERE)
    wrong = slot_places("沖縄です。", evidence, WHERE)
    assert right is not None and wrong is not None
    assert set(right.answer[0]) == set(SLOT_WEIGHTS)
    mine, rivals = right.scores()
    assert rivals and max(mine) > max(rivals)
    assert right.fills(SLOT_MARGIN) and not wrong.fills(SLOT_MARGIN)
    # The same places as the verdict weighs.
    assert check("小笠原諸島です[1]。", WHERE).verdict == 0
    assert check("沖縄です[1]。", WHERE).verdict == 1


def test_an_answer_whose_verdict_does_not_turn_on_its_place_has_no_places() -> None:
    evidence = [(1, TSUYU.text)]
    assert slot_places("北海道です。", evidence, WHERE) is None  # only repeats the question
    assert slot_places("京都です。", evidence, WHERE) is None  # not in the evidence
    assert slot_places("梅雨は北海道と小笠原諸島を除く日本でみられる。", evidence, WHERE) is None  # not bare
