"""kotae.language.text: normalisation, search tokens and sentence splitting."""

from __future__ import annotations

import pytest

from kotae.language.text import is_japanese, normalize, search_tokens, split_sentences

# --- normalize -----------------------------------------------------------------


def test_full_width_becomes_half_width() -> None:
    assert normalize("ＡＢＣ１２３") == "ABC123"
    assert normalize("月額１万５千円") == "月額1万5千円"
    assert normalize("ｶﾀｶﾅ") == "カタカナ"  # half-width katakana becomes full-width


def test_whitespace_is_collapsed_and_trimmed() -> None:
    assert normalize("\u3000バス　の\t運賃  は\n？ ") == "バス の 運賃 は ?"


@pytest.mark.parametrize("text", ["ｗｗｗ", "www", "WWW", "ｗｗｗｗｗｗ"])
def test_laughter_alone_normalises_to_nothing(text: str) -> None:
    assert normalize(text) == ""


def test_laughter_after_a_question_is_removed() -> None:
    assert normalize("保育料はいくら？ｗｗｗ") == "保育料はいくら?"
    assert normalize("給食費タダになるってほんと？ｗ") == "給食費タダになるってほんと?"


def test_stretched_marks_are_shortened() -> None:
    assert normalize("すごい！！！") == "すごい!"
    assert normalize("本当？？？") == "本当?"
    assert normalize("こんばんは〜〜〜") == "こんばんは〜"


def test_words_containing_w_are_kept() -> None:
    assert normalize("How was the town hall?") == "How was the town hall?"


# --- search tokens: Japanese ------------------------------------------------------


def test_japanese_content_word_is_found() -> None:
    assert "保育料" in search_tokens("保育料っていくらになるの")


def test_japanese_particles_and_question_words_are_dropped() -> None:
    tokens = search_tokens("保育料はいくらですか")
    for noise in ("は", "いくら", "幾ら", "です", "か"):
        assert noise not in tokens
    assert set(tokens) <= {"保育料", "保育"}


def test_kanji_numbers_become_digits() -> None:
    assert "15000" in search_tokens("1万5千円")
    assert "15000" in search_tokens("月額１万５千円")
    assert "15000" in search_tokens("15,000円")


def test_the_same_word_meets_however_it_is_written() -> None:
    assert set(search_tokens("ｶﾀｶﾅ")) == set(search_tokens("カタカナ"))
    assert set(search_tokens("保育料は月額1万5千円")) >= {"保育料", "15000"}
    assert set(search_tokens("保育料は月額15000円")) >= {"保育料", "15000"}


def test_compounds_also_index_their_parts() -> None:
    tokens = search_tokens("バス代")
    assert "バス代" in tokens and "バス" in tokens


# --- search tokens: English ---------------------------------------------------------


def test_english_stopwords_are_dropped() -> None:
    tokens = search_tokens("What are the fees for the nursery?")
    assert not {"what", "are", "the", "for"} & set(tokens)
    assert "nursery" in tokens


def test_english_plurals_are_stemmed() -> None:
    assert search_tokens("nursery fees") == ["nursery", "fee"]
    assert search_tokens("cities buses classes churches") == ["city", "bus", "class", "church"]
    assert search_tokens("bus") == ["bus"]  # a singular ending in s stays
    assert search_tokens("glass") == ["glass"]


def test_english_is_lower_cased() -> None:
    assert search_tokens("Minato LOOP") == ["minato", "loop"]


def test_mixed_script_comment() -> None:
    tokens = search_tokens("Minato Loop のバスの運賃は？")
    assert {"minato", "loop", "バス", "運賃"} <= set(tokens)


# --- search tokens: chatter -----------------------------------------------------------


def test_kusa_is_a_single_token() -> None:
    assert search_tokens("草") == ["草"]


@pytest.mark.parametrize("text", ["こんばんは", "こんばんは〜", "ｗｗｗ", "lol", "👏👏👏", ""])
def test_chatter_gives_no_tokens(text: str) -> None:
    assert search_tokens(text) == []


# --- split_sentences --------------------------------------------------------------------


def test_japanese_sentences_split_after_the_full_stop() -> None:
    assert split_sentences("保育料は無料です。バスは150円です。") == ["保育料は無料です。", "バスは150円です。"]


def test_japanese_question_and_exclamation_marks_end_sentences() -> None:
    assert split_sentences("本当ですか？はい！無料です。") == ["本当ですか？", "はい！", "無料です。"]


def test_english_sentences_split_after_the_period() -> None:
    assert split_sentences("The fare is 150 yen. Kids ride free! Is it true?") == [
        "The fare is 150 yen.",
        "Kids ride free!",
        "Is it true?",
    ]


def test_decimal_point_does_not_split() -> None:
    assert split_sentences("It costs 1.5 million yen. That is all.") == ["It costs 1.5 million yen.", "That is all."]


def test_newlines_split() -> None:
    assert split_sentences("見出し\n本文です。") == ["見出し", "本文です。"]


def test_markers_after_the_japanese_full_stop_stay_with_their_sentence() -> None:
    assert split_sentences("保育料は無料です。[1]バスは150円です。[2][3]") == [
        "保育料は無料です。[1]",
        "バスは150円です。[2][3]",
    ]


def test_markers_before_the_full_stop_stay_with_their_sentence() -> None:
    assert split_sentences("保育料は無料です[1]。バスは150円です[2]。") == [
        "保育料は無料です[1]。",
        "バスは150円です[2]。",
    ]


def test_markers_after_an_english_period_stay_with_their_sentence() -> None:
    sentences = split_sentences("The fare is 150 yen. [1] Kids ride free. [2]")
    assert len(sentences) == 2
    assert sentences[0].startswith("The fare") and sentences[0].endswith("[1]")
    assert sentences[1].startswith("Kids") and sentences[1].endswith("[2]")


def test_empty_text_has_no_sentences() -> None:
    assert split_sentences("") == []
    assert split_sentences("  \n ") == []


def test_is_japanese() -> None:
    assert is_japanese("バス")
    assert not is_japanese("bus 150")


def test_english_words_ending_in_w_are_kept() -> None:
    assert normalize("Tell me about the new law") == "Tell me about the new law"
    assert "law" in search_tokens("Tell me about the new law")
    assert "tomorrow" in search_tokens("Is the bus free tomorrow")


from hypothesis import (  # noqa: E402
    given,
    settings,
    strategies as st,  # noqa: E402
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=list("。．.!?！？[]12 aAあ保\n"), max_size=40))
def test_splitting_never_loses_or_adds_text(text: str) -> None:
    sentences = split_sentences(text)
    assert "".join("".join(sentences).split()) == "".join(text.split())
    assert all(s and s == s.strip() for s in sentences)
