"""kotae.services.ingest.triage: which comments are worth answering."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

import kotae.samples
from kotae.contracts import CommentV1, SuperChat
from kotae.services.ingest.sources import RawComment, read_comment_file
from kotae.services.ingest.triage import Dropped, Triage, hash_author, is_question


@pytest.mark.parametrize(
    "text",
    [
        "保育料っていくらになるの",
        "期日前投票っていつから？",
        "バス代いくらになるんですか？🚌",
        "防災アプリの名前なんだっけ",
        "給食費タダになるってほんと？ｗ",
        "太陽光パネルってどこに付けるんですか",
        "介護職員の手当を教えて",
        "What time do the polls close on election day?",
        "Is there any support for small shops",
        "tell me about the bus fare",
        "how many tsunami towers",
    ],
)
def test_questions_and_requests_are_questions(text: str) -> None:
    assert is_question(text)


@pytest.mark.parametrize(
    "text",
    ["草", "888888", "こんばんは〜", "👏👏👏", "lol", "ｗｗｗ", "おやすみー", "がんばれー！", "nice stream", ""],
)
def test_chatter_is_not_a_question(text: str) -> None:
    assert not is_question(text)


def triage() -> Triage:
    return Triage(stream_id="stream-1", kb="campaign", source="replay")


def test_chatter_is_dropped_with_a_reason() -> None:
    result = triage().admit(RawComment(id="c8", author="ゆうき", text="草"))
    assert isinstance(result, Dropped)
    assert result.reason.startswith("not_a_question")
    assert result.comment.comment_id == "c8" and result.comment.text == "草"


def test_a_question_is_admitted_as_a_comment() -> None:
    published = datetime(2026, 11, 30, 11, 0, 21, tzinfo=timezone.utc)
    result = triage().admit(RawComment(id="c3", author="しおみママ", text="保育料っていくらになるの", published_at=published))
    assert isinstance(result, CommentV1)
    assert result.comment_id == "c3"
    assert result.stream_id == "stream-1" and result.kb == "campaign" and result.source == "replay"
    assert result.text == "保育料っていくらになるの"
    assert result.published_at == published
    assert result.lang == "ja"
    assert result.priority == 1 and result.superchat is None


def test_super_chats_are_admitted_first_even_when_chatter() -> None:
    t = triage()
    paid = t.admit(RawComment(id="c14", text="がんばれー！", superchat=SuperChat(amount=500, currency="JPY")))
    free = t.admit(RawComment(id="c3", text="保育料っていくらになるの"))
    assert isinstance(paid, CommentV1) and isinstance(free, CommentV1)
    assert paid.superchat == SuperChat(amount=500, currency="JPY")
    assert paid.priority > free.priority


def test_a_resent_id_returns_none() -> None:
    t = triage()
    raw = RawComment(id="c3", text="保育料っていくらになるの")
    assert isinstance(t.admit(raw), CommentV1)
    assert t.admit(raw) is None
    assert t.admit(RawComment(id="c3", text="別の文面でも同じ id")) is None


def test_a_resent_dropped_comment_is_not_dropped_twice() -> None:
    t = triage()
    assert isinstance(t.admit(RawComment(id="c8", text="草")), Dropped)
    assert t.admit(RawComment(id="c8", text="草")) is None


def test_the_same_id_on_another_stream_is_not_a_resend() -> None:
    raw = RawComment(id="c3", text="保育料っていくらになるの")
    assert isinstance(triage().admit(raw), CommentV1)
    assert isinstance(triage().admit(raw), CommentV1)


def test_text_is_normalised_and_the_original_kept() -> None:
    result = triage().admit(RawComment(id="c", text="ＢＵＳ　ｆａｒｅ　ｉｓ　ｈｏｗ　ｍｕｃｈ？？？"))
    assert isinstance(result, CommentV1)
    assert result.normalized == "BUS fare is how much?"
    assert result.text == "ＢＵＳ　ｆａｒｅ　ｉｓ　ｈｏｗ　ｍｕｃｈ？？？"


def test_laughter_is_trimmed_from_the_normalised_text() -> None:
    result = triage().admit(RawComment(id="c", text="保育料はいくら？ｗｗｗ"))
    assert isinstance(result, CommentV1)
    assert result.normalized == "保育料はいくら?"


@pytest.mark.parametrize(
    ("text", "lang"),
    [("保育料っていくらになるの", "ja"), ("What time do the polls close?", "en"), ("ｗｈａｔ　ｔｉｍｅ？", "en")],
)
def test_language_is_detected(text: str, lang: str) -> None:
    result = triage().admit(RawComment(id="c", text=text))
    assert isinstance(result, CommentV1)
    assert result.lang == lang


def test_missing_timestamp_is_filled_with_now() -> None:
    before = datetime.now(timezone.utc)
    result = triage().admit(RawComment(id="c", text="保育料っていくらになるの"))
    assert isinstance(result, CommentV1)
    assert before <= result.published_at <= datetime.now(timezone.utc)


def test_channel_ids_are_hashed_and_display_names_kept() -> None:
    channel = "UC" + "a1B2c3D4e5F6g7H8i9J0kL"
    assert len(channel) == 24
    hashed = hash_author(channel)
    assert hashed.startswith("ch_") and channel not in hashed
    assert hashed == hash_author(channel)  # stable
    assert hash_author("しおみママ") == "しおみママ"
    result = triage().admit(RawComment(id="c", author=channel, text="保育料っていくらになるの"))
    assert isinstance(result, CommentV1) and result.author == hashed


def test_the_sample_stream_admits_questions_and_drops_chatter() -> None:
    t = triage()
    results = {}
    resends = 0
    for raw in read_comment_file(Path(kotae.samples.__file__).parent / "comments.jsonl"):
        out = t.admit(raw)
        if out is None:
            resends += 1
        else:
            results[raw.id] = out
    assert resends == 1
    dropped = {cid for cid, out in results.items() if isinstance(out, Dropped)}
    # the chatter of the sample, less the Super Chat c014 which is admitted
    assert dropped == {"c001", "c002", "c004", "c008", "c018", "c023", "c030"}
    assert isinstance(results["c014"], CommentV1)
