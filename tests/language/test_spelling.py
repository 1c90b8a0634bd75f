"""kotae.language.spelling: a kana word typed with a slip is matched to the records' word, and
nothing else is."""

from __future__ import annotations

import pytest

from kotae.language.spelling import fold, folded_in, is_slip, nearest


@pytest.mark.parametrize(
    ("typed", "word"),
    [
        ("モッフパッド", "モップパッド"),  # a handakuten dropped
        ("ハッテリー", "バッテリー"),  # a dakuten dropped
        ("フラチナ", "プラチナ"),
        ("キャンヘーン", "キャンペーン"),
        ("ロホット", "ロボット"),
        ("ロボボット", "ロボット"),  # a key pressed twice
        ("ろぼっと", "ロボット"),  # the same word in hiragana
        ("ロホツト", "ロボット"),  # and a small kana written large
    ],
)
def test_a_slip_of_the_finger_is_the_records_word(typed: str, word: str) -> None:
    assert is_slip(typed, word)


@pytest.mark.parametrize(
    ("typed", "word"),
    [
        ("バス", "パス"),  # too short to tell a slip from another word
        ("ゲームパス", "ゲームス"),  # a kana more that is no doubled key: another word
        ("ロボット", "ロケット"),  # another kana, not another mark
        ("補聴器", "補聴機"),  # kanji are matched by reading elsewhere, never here
        ("ロボット", "ロボット"),  # the word itself is no slip
    ],
)
def test_another_word_is_no_slip(typed: str, word: str) -> None:
    assert not is_slip(typed, word)


def test_fold_leaves_what_a_slip_of_marks_and_small_kana_leaves() -> None:
    assert fold("プラチナ") == fold("ふらちな") == "フラチナ"
    assert fold("キャンペーン") == "キヤンヘーン"


def test_nearest_names_the_one_word_and_refuses_when_two_fit() -> None:
    assert nearest("モッフパッド", ["モップパッド", "パッド", "ロボット"]) == "モップパッド"
    assert nearest("ハントル", ["ハンドル", "バンドル"]) is None  # two words fit: no guess
    assert nearest("モッフパッド", ["ロボット"]) is None


def test_a_compound_typed_with_a_slip_is_found_in_running_text() -> None:
    assert folded_in("コラホカフェ", "期間中はコラボカフェで限定メニューを出す。")
    assert not folded_in("コラボカフェ", "期間中はコラボカフェで限定メニューを出す。")  # written as it is
    assert not folded_in("カフェ", "コラボカフェ")  # too short
    assert not folded_in("コラホ定食", "コラボ定食")  # kanji are not folded
