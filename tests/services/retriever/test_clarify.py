"""The clarify round trip's pure parts: picking the candidates a reply names, and the KV key.

``pick_candidates`` and ``pick_faq`` live in ``kotae.services.retriever.clarify``; the pending
ask-back, its key and its store in ``kotae.clarify`` (ingest reads it too). The
store against a real nats-server is exercised in ``test_handlers.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from nats.js.errors import KeyNotFoundError

from kotae.clarify import ClarifyStore, PendingClarify, key_for
from kotae.contracts import Evidence, FaqEvidence
from kotae.services.retriever.clarify import pick_candidates, pick_faq

BUS = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus-fare-2027#1",
    title="公共交通：コミュニティバス運賃と新路線",
    text="市のコミュニティバス「みなとループ」の運賃を、大人1回150円にします。",
    score=0.40,
)
CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#1",
    title="子育て支援：保育料と待機児童ゼロ",
    text="0〜2歳児の保育料は、月額1万5千円を上限にします。",
    score=0.21,
)
DISASTER = Evidence(
    doc_id="disaster-2027",
    chunk_id="disaster-2027#1",
    title="防災：避難所の拡充と防災アプリ",
    text="指定避難所を80か所に増やします。",
    score=0.20,
)
PENDING = PendingClarify(
    comment_id="c-7", question="いくらになるんですか？", kb="default", docs=[BUS, CHILDCARE, DISASTER]
)

# NATS KV keys: letters, digits and - / _ = . only, no leading or trailing dot.
KV_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")


def picked(reply: str, pending: PendingClarify = PENDING) -> list[str]:
    return [d.doc_id for d in pick_candidates(reply, pending)]


# --- pick_candidates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "doc_id"),
    [
        ("運賃", "bus-fare-2027"),
        ("保育料のほう", "childcare-2027"),
        ("子育てのやつ", "childcare-2027"),
        ("防災アプリ", "disaster-2027"),
        ("コミュニティバスです", "bus-fare-2027"),
    ],
)
def test_a_reply_picks_by_title_words(reply: str, doc_id: str) -> None:
    assert picked(reply) == [doc_id]


@pytest.mark.parametrize(
    "reply",
    [
        "バス",  # Sudachi keeps コミュニティバス whole: only the bigram バス meets it
        "コミュニティ",  # normalised to コミュニティー as a word; its bigrams are all in the title
    ],
)
def test_a_reply_picks_by_character_overlap_when_no_word_meets(reply: str) -> None:
    assert picked(reply) == ["bus-fare-2027"]


def test_a_reply_naming_the_texts_words_picks_that_document() -> None:
    assert picked("みなとループ") == ["bus-fare-2027"]  # in the text, not the title


@pytest.mark.parametrize("reply", ["今日の天気は？", "はい", "そう", "www", "👍", "Hello"])
def test_a_reply_that_names_no_candidate_picks_nothing(reply: str) -> None:
    assert picked(reply) == []


def test_candidates_come_best_first_and_ties_keep_their_order() -> None:
    # 保育料, 保育: 2 of the reply's 3 words; the bus policy has 1 of 3, under half: not picked.
    assert picked("運賃と保育料") == ["childcare-2027"]
    assert picked("防災と運賃") == ["bus-fare-2027", "disaster-2027"]  # one word each: stored order
    assert picked("運賃と防災") == ["bus-fare-2027", "disaster-2027"]


def test_nothing_is_picked_without_candidates() -> None:
    empty = PendingClarify(comment_id="c", question="q", kb="default", docs=[])
    assert pick_candidates("運賃", empty) == []


def test_the_docstring_example_picks_the_bus_policy() -> None:
    assert picked("バスの方") == ["bus-fare-2027"]


# --- pick_faq ------------------------------------------------------------------------------

BUS_FAQ = FaqEvidence(faq_id="faq-bus", question="バスの運賃はいくら？", answer="大人1回150円です。", score=0.5)
LUNCH_FAQ = FaqEvidence(faq_id="faq-lunch", question="給食費は無料になる？", answer="小中学校の給食費を無料にします。")
WITH_FAQ = PENDING.model_copy(update={"faq": [LUNCH_FAQ, BUS_FAQ]})


def test_a_reply_keeps_only_the_faq_of_the_topic_it_picks() -> None:
    # The ask-back stored the FAQ of every topic it offered; the reply about the bus must not
    # bring the school-lunch entry along to be quoted as the answer.
    assert [f.faq_id for f in pick_faq("バスのほうです", WITH_FAQ)] == ["faq-bus"]
    assert [f.faq_id for f in pick_faq("給食費の方", WITH_FAQ)] == ["faq-lunch"]
    assert pick_faq("防災アプリ", WITH_FAQ) == []


# --- key_for ------------------------------------------------------------------------------


def test_key_is_stable() -> None:
    assert key_for("stream-1", "viewer") == key_for("stream-1", "viewer")
    # ingest (which admits the reply) and the retriever (which reads it) must agree across
    # processes and versions: a plain hash of the pair, no per-process salt
    assert key_for("stream-1", "viewer") == "c.df1c6fb063c208407d56061f7c097083"


def test_key_differs_by_stream_and_by_author_and_does_not_collide_on_joins() -> None:
    keys = {
        key_for("stream-1", "viewer"),
        key_for("stream-2", "viewer"),
        key_for("stream-1", "viewer2"),
        key_for("a", "b c"),
        key_for("a b", "c"),
        key_for("ab", "c"),
        key_for("a", "bc"),
    }
    assert len(keys) == 7


@pytest.mark.parametrize(
    "author", ["みなと民A", "名無し さん", "a.b.c", "*", ">", "$JS.API", "x" * 200, "", "🚌\x00\n/=", "..", "a b/c"]
)
def test_key_is_kv_safe_for_any_author(author: str) -> None:
    key = key_for("stream.with*odd>chars", author)
    assert KV_KEY.match(key), key
    assert not key.startswith(".") and not key.endswith(".")
    assert re.fullmatch(r"c\.[0-9a-f]{32}", key)
    assert author not in key or author == ""


# --- PendingClarify and the store (on a fake KV) ---------------------------------------------


def test_pending_round_trips_through_json() -> None:
    pending = PENDING.model_copy(
        update={"faq": [FaqEvidence(faq_id="faq-bus", question="運賃は？", answer="150円です。", score=0.3)]}
    )
    assert PendingClarify.model_validate_json(pending.model_dump_json()) == pending


class Entry:
    def __init__(self, value: bytes | None) -> None:
        self.value = value


class FakeKV:
    """The part of nats-py's KeyValue the store uses."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, key: str) -> Entry:
        if key not in self.data:
            raise KeyNotFoundError
        return Entry(self.data[key])

    async def put(self, key: str, value: bytes) -> int:
        assert KV_KEY.match(key)
        self.data[key] = value
        return len(self.data)

    async def delete(self, key: str) -> bool:
        if key not in self.data:
            raise KeyNotFoundError
        del self.data[key]
        return True


async def test_store_puts_gets_and_deletes_by_stream_and_author() -> None:
    kv = FakeKV()
    store = ClarifyStore(kv)
    assert await store.get("s", "viewer") is None
    assert await store.waiting("s", "viewer") is False
    await store.put("s", "viewer", PENDING)
    assert list(kv.data) == [key_for("s", "viewer")]
    assert await store.get("s", "viewer") == PENDING
    assert await store.waiting("s", "viewer") is True
    assert await store.get("s", "someone-else") is None
    assert await store.get("other-stream", "viewer") is None
    await store.delete("s", "viewer")
    assert await store.get("s", "viewer") is None
    await store.delete("s", "viewer")  # deleting twice is fine


async def test_store_treats_an_empty_entry_as_nothing_pending() -> None:
    kv: Any = FakeKV()
    kv.data[key_for("s", "viewer")] = b""  # what a KV delete marker reads as
    assert await ClarifyStore(kv).get("s", "viewer") is None
