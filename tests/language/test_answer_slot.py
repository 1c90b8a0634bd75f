"""kotae.language.answer_slot: where in the evidence a question's slot is filled, shared by generator and verifier."""

from __future__ import annotations

from kotae.language.answer_slot import SLOT_WEIGHTS, asks_for_slot, place_signs, question_slot
from kotae.language.sentence_analysis import analyse, evidence_sentences

EVIDENCE = [
    (1, s)
    for s in evidence_sentences("梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨入りは沖縄で5月10日ごろである。")
]


def score(question: str, n: int, text: str) -> float:
    slot = question_slot(analyse(question), None, EVIDENCE)
    assert slot is not None
    sentence = EVIDENCE[n][1]
    term = next(t for t in sentence.terms if t.text == text)
    signs = place_signs(EVIDENCE, n, term.start, term.end, slot)
    return sum(SLOT_WEIGHTS[k] * v for k, v in signs.items())


def test_the_phrase_standing_in_the_slot_outscores_its_rivals() -> None:
    question = "日本で梅雨がないのは北海道とどこか。"
    assert score(question, 0, "小笠原諸島") > score(question, 1, "沖縄") + 0.5
    assert score(question, 0, "小笠原諸島") > score(question, 0, "日本")


def test_a_question_that_offers_a_choice_or_asks_yes_no_has_no_open_slot() -> None:
    assert asks_for_slot(analyse("梅雨入りはどこ？"))
    assert not asks_for_slot(analyse("梅雨は長い？短い？"))
