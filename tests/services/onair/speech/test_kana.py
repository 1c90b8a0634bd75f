"""Hepburn romaji ⇄ katakana for names that cross languages."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech.kana import katakana_to_romaji, romaji_to_katakana


@pytest.mark.parametrize(
    ("romaji", "kana"),
    [("Shiomi", "シオミ"), ("Kohoku", "コホク"), ("Minato", "ミナト"), ("Sapporo", "サッポロ"),
     ("Shinkansen", "シンカンセン"), ("Kyoto", "キョト"), ("Komorebi", "コモレビ"), ("Amazon", "アマゾン")],
)  # fmt: skip
def test_romaji_names_become_katakana(romaji: str, kana: str) -> None:
    assert romaji_to_katakana(romaji) == kana


@pytest.mark.parametrize("word", ["Loop", "Google", "Station", "web", "line", "Pay"])
def test_english_words_are_not_romaji(word: str) -> None:
    assert romaji_to_katakana(word) is None


@pytest.mark.parametrize(
    ("kana", "romaji"),
    [("シオミセン", "shiomisen"), ("ホッカイドー", "hokkaido"), ("マッチャ", "matcha"), ("シンカンセン", "shinkansen"),
     ("ウミノアカリ", "uminoakari"), ("キョート", "kyoto"), ("ティー", "ti")],
)  # fmt: skip
def test_katakana_becomes_hepburn(kana: str, romaji: str) -> None:
    assert katakana_to_romaji(kana) == romaji


@pytest.mark.parametrize("name", ["Shiomi", "Uminoakari", "Komorebi", "Sapporo", "Kanazawa"])
def test_a_name_survives_the_round_trip(name: str) -> None:
    assert katakana_to_romaji(romaji_to_katakana(name) or "") == name.lower()
