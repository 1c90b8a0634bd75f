"""Names a comment calls someone by: left out of what a comment that asks nothing is about."""

from __future__ import annotations

import pytest

from kotae.language import lexicon
from kotae.language.address import without_forms_of_address
from kotae.language.text import normalize
from kotae.services.ingest.chatter import is_chatter

LEXICONS = ("address_suffixes",)


@pytest.mark.parametrize("suffix", lexicon.entries("address_suffixes"))
def test_a_greeting_to_a_name_is_chatter_and_the_name_alone_is_not(suffix):
    # ルカ alone may be a topic (a record about ルカ); ルカちゃん is whom the viewer greets
    assert is_chatter(f"ルカ{suffix}こんばんは")
    assert not is_chatter("ルカこんばんは")


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("ルカちゃんの声すき", "の声すき"),
        ("ひばなちゃんこんばんは", "こんばんは"),  # Sudachi reads ひば + な: the whole run is the name
        ("手話通訳さん、いつもありがとう", "、いつもありがとう"),
        ("漁師のおっちゃん言ってたわ", "漁師の 言ってたわ"),
        ("さんま", "さんま"),  # a suffix with no name before it is no form of address
    ],
)
def test_the_name_before_a_suffix_of_address_is_left_out(text, left):
    assert " ".join(without_forms_of_address(normalize(text)).split()) == left


@pytest.mark.parametrize(
    "text",
    [
        "ミオちゃんこんにちは〜",
        "ひばなちゃんこんばんは〜🔥",
        "ルカちゃんの声すき",
        "手話通訳さん、いつもありがとう",
        "海野さん",
    ],
)
def test_chat_spoken_to_someone_by_name_is_dropped(text):
    assert is_chatter(text)


@pytest.mark.parametrize(
    "text",
    [
        "ミオちゃんの誕生日はいつ？",  # asks
        "矢代さん説明うまいな",  # 説明 may be a topic: the gate decides
        "漁師のおっちゃんが牡蠣が育たないって言ってた",  # hearsay about a topic
        "ルカちゃんの肩書きを教えてください",
    ],
)
def test_a_name_with_a_topic_or_a_question_goes_on(text):
    assert not is_chatter(text)
