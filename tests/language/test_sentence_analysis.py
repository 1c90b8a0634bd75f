"""kotae.language.sentence_analysis: the tokens and key terms every answer-side check reads."""

from __future__ import annotations

from kotae.language.sentence_analysis import analyse, negations, short_units
from kotae.language.text import katakana


def test_terms_are_numbers_names_and_noun_phrases_with_their_kinds() -> None:
    a = analyse("保育料は月額1万5千円を上限にします。")
    assert [(t.text, t.kind) for t in a.terms] == [
        ("保育料", "term"),
        ("月額", "term"),
        ("15000", "number"),
        ("上限", "term"),
    ]


def test_a_rounding_word_ends_a_noun_phrase() -> None:
    """上旬ごろ東日本 is a time and a place, not one name that no sentence would share."""
    terms = [t.text for t in analyse("6月上旬ごろ東日本の天気").terms]
    assert "上旬" in terms and "東日本" in terms
    assert not any("ごろ" in t for t in terms)


def test_every_token_carries_its_reading_so_a_kana_spelling_meets_the_kanji_word() -> None:
    assert "ホチョウキ" in analyse("補聴器の購入を補助する。").reading
    assert katakana("ほちょうき") == "ホチョウキ"


def test_short_units_put_the_head_of_a_compound_last() -> None:
    assert short_units("消費税") == ("消費", "税")
    assert short_units("初乗り運賃") == ("初乗り", "運賃")


def test_negators_are_counted_in_japanese_and_english() -> None:
    assert negations(analyse("運賃を上げない。")) == 1
    assert negations(analyse("運賃を上げる。")) == 0
    assert negations(analyse("The fare will not rise.")) == 1
