"""Reading real models' replies: each case is a shape a model was seen to answer in."""

from __future__ import annotations

import json

import pytest

from kotae.model_reply import as_bool, as_int, citation_markers, foreign_characters, json_object, number_list
from kotae.providers import BadReply


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"ids": [1, 2]}', {"ids": [1, 2]}),
        ('```json\n{"ids": []}\n```', {"ids": []}),
        ('Here you go: {"verdict": 0, "findings": []} hope it helps', {"verdict": 0, "findings": []}),
        ('以下が回答です。\n```json\n{"verdict": 2}\n```\n理由: 資料にない。', {"verdict": 2}),
        ('```\n{"ids": [3]}\n```', {"ids": [3]}),
        ('```json\n{"ids": [3]}', {"ids": [3]}),  # the closing fence cut off
        ('{"a": 1}\n{"b": 2}', {"a": 1}),  # the first of two objects
        ("{'ids': [1, 2]}", {"ids": [1, 2]}),  # a Python dict
        ('{"verdict": 0, "findings": [],}', {"verdict": 0, "findings": []}),  # a trailing comma
        ("{“verdict”: 1}", {"verdict": 1}),  # smart quotes
        ('{"ok": True}', {"ok": True}),
    ],
)
def test_the_object_is_found_whatever_surrounds_it(text: str, expected: dict) -> None:
    assert json_object(text) == expected


def test_a_bare_list_is_the_list_asked_for_only_when_the_stage_says_which() -> None:
    assert json_object("[2, 1]", list_key="ids") == {"ids": [2, 1]}
    assert json_object("関係するのは [2, 1] です", list_key="ids") == {"ids": [2, 1]}
    with pytest.raises(BadReply):
        json_object("[2, 1]")


@pytest.mark.parametrize("text", ["", "   \n", "ids: 1", '{"ids": [1,', "I think number two is best."])
def test_anything_else_is_a_bad_reply_with_a_printable_message(text: str) -> None:
    with pytest.raises(BadReply) as caught:
        json_object(text)
    assert json.dumps(str(caught.value))


def test_a_reply_cut_at_max_tokens_says_so() -> None:
    with pytest.raises(BadReply, match="cut at max_tokens"):
        json_object('{"claims": [{"claim": "保育料は', finish_reason="length")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, 2), (2.0, 2), ("2", 2), (" 3 ", 3), ("[2]", 2), ("#4", 4), ("資料2", 2), ("2番", 2), ("２", 2)],
)
def test_a_number_is_read_however_it_was_written(value: object, expected: int) -> None:
    assert as_int(value) == expected


@pytest.mark.parametrize("value", [True, None, "two", "1と2", 2.5, [1]])
def test_what_is_not_one_number_is_none(value: object) -> None:
    assert as_int(value) is None


def test_number_lists_keep_order_drop_repeats_and_out_of_range() -> None:
    assert number_list(["2", 1, "[3]", 9, 2, 0], 3, key="ids") == [2, 1, 3]
    assert number_list([{"id": 2}, {"n": "1"}], 3, key="ids") == [2, 1]
    assert number_list("1, 3", 3, key="ids") == [1, 3]
    assert number_list(2, 3, key="ids") == [2]
    assert number_list([], 3, key="ids") == []


@pytest.mark.parametrize("raw", [["x"], [7, 8], [True], {"a": 1}])
def test_a_list_naming_nothing_readable_is_not_taken_for_none(raw: object) -> None:
    with pytest.raises(BadReply, match="ids"):
        number_list(raw, 3, key="ids")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), ("true", True), ("はい", True), ("no", False), ("いいえ", False), (None, None)],
)
def test_booleans_in_their_usual_spellings(value: object, expected: bool | None) -> None:
    assert as_bool(value, "supported") is expected


def test_a_boolean_that_is_not_one_is_a_bad_reply() -> None:
    with pytest.raises(BadReply, match="supported"):
        as_bool("maybe", "supported")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("保育料は無料です【1】。", "保育料は無料です[1]。"),
        ("保育料は無料です。【1】", "保育料は無料です[1]。"),
        ("保育料は無料です［２］。", "保育料は無料です[2]。"),
        ("保育料は無料です[1, 2]。", "保育料は無料です[1][2]。"),
        ("保育料は無料です[1][2]。", "保育料は無料です[1][2]。"),
        ("保育料は無料です[1・3]。", "保育料は無料です[1][3]。"),
        ("保育料は無料です[資料1]。", "保育料は無料です[1]。"),
        ("The fare is 200 yen [Document 2].", "The fare is 200 yen [2]."),
        ("The fare is 200 yen [^1].", "The fare is 200 yen [1]."),
        ("See [1-3].", "See [1][2][3]."),
        ("【ラオス】内陸国である[1]。", "【ラオス】内陸国である[1]。"),  # a title label stays
        ("2027年1月24日が投票日です。", "2027年1月24日が投票日です。"),  # nothing to rewrite
    ],
)
def test_citation_variants_become_markers(text: str, expected: str) -> None:
    assert citation_markers(text) == expected


def test_characters_foreign_to_the_answer_language() -> None:
    assert foreign_characters("这个保育料は免费です", "ja") == ["这", "费"]
    assert foreign_characters("보육료は無料です", "ja") == ["보", "육", "료"]
    assert foreign_characters("保育料は無料です。", "ja") == []
    assert foreign_characters("The fee is 無料.", "en") == ["無", "料"]
    assert foreign_characters("Umino Akari (海野あかり) runs.", "en", evidence="候補者 海野あかり") == []
