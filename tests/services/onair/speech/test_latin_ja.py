"""Latin-script words of a Japanese answer, in katakana (acronyms, romaji names, English words)."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech.latin_ja import latin_katakana


@pytest.mark.parametrize(
    ("word", "kana"),
    [
        ("DX", "ディーエックス"),
        ("SNS", "エスエヌエス"),
        ("IC", "アイシー"),
        ("FSSC", "エフエスエスシー"),
        ("SDGs", "エスディージーズ"),
        ("X", "エックス"),
        ("NASA", "ナサ"),
        ("Shiomi", "シオミ"),
        ("Shiomi-cho", "シオミチョ"),
        ("Kohoku", "コホク"),
        ("VTuber", "ブイチューバー"),
        ("YouTube", "ユーチューブ"),
        ("iPhone", "アイフォン"),
        ("iOS", "アイオーエス"),
        ("Web", "ウェブ"),
        ("Loop", "ループ"),
        ("Google", "グーグル"),
        ("Home", "ホーム"),
    ],
)
def test_a_latin_word_is_said_as_a_japanese_reader_would(word: str, kana: str) -> None:
    assert latin_katakana(word) == kana
