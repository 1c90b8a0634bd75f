"""kotae.language.grounding.support: how much of a sentence its evidence holds."""

from __future__ import annotations

from kotae.language.grounding import SUPPORT_THRESHOLD, support

EVIDENCE_JA = [
    "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。第2子以降の保育料は無料にします。"
]
EVIDENCE_EN = ["A ride on the Minato Loop community bus will cost adults a flat 150 yen. Children ride free."]


def test_a_quoted_sentence_is_supported() -> None:
    result = support("0〜2歳児の保育料は月額1万5千円を上限にします。", EVIDENCE_JA)
    assert result.supported
    assert result.ratio == 1.0
    assert result.missing_terms == [] and result.missing_numbers == []


def test_the_same_amount_written_differently_is_supported() -> None:
    assert support("保育料は月額15,000円が上限です。", EVIDENCE_JA).supported


def test_english_sentence_is_supported() -> None:
    assert support("Adults ride the community bus for 150 yen.", EVIDENCE_EN).supported


def test_a_changed_number_is_reported() -> None:
    result = support("0〜2歳児の保育料は月額2万円を上限にします。", EVIDENCE_JA)
    assert not result.supported
    assert result.missing_numbers == ["20000"]
    en = support("A ride on the community bus will cost adults 200 yen.", EVIDENCE_EN)
    assert not en.supported
    assert en.missing_numbers == ["200"]


def test_a_changed_number_is_unsupported_even_with_every_word_present() -> None:
    result = support("保育料は月額1万6千円を上限にします。", EVIDENCE_JA)
    assert result.ratio >= SUPPORT_THRESHOLD  # the words are all there...
    assert result.missing_numbers == ["16000"]  # ...but the number is not
    assert not result.supported


def test_an_unrelated_sentence_has_a_low_ratio() -> None:
    result = support("市長は火星に宇宙港を建設します。", EVIDENCE_JA)
    assert result.ratio < 0.3
    assert not result.supported
    assert "火星" in result.missing_terms


def test_evidence_is_pooled_across_texts() -> None:
    result = support("保育料は無料で、バスは150円です。", [EVIDENCE_JA[0], "バスの運賃は150円です。"])
    assert result.supported


def test_a_sentence_without_content_words_is_trivially_supported() -> None:
    result = support("こんばんは。", EVIDENCE_JA)
    assert result.terms == 0 and result.supported


def test_no_evidence_supports_nothing() -> None:
    result = support("保育料は無料です。", [])
    assert result.ratio == 0.0 and not result.supported
