"""kotae.services.ingest.triage: which comments are worth answering."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import kotae.samples
from kotae.bus.edge import msg_id
from kotae.contracts import CommentV1, SuperChat, subjects
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
    published = datetime(2026, 11, 30, 11, 0, 21, tzinfo=UTC)
    result = triage().admit(
        RawComment(id="c3", author="しおみママ", text="保育料っていくらになるの", published_at=published)
    )
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
    here, there = triage(), Triage(stream_id="stream-2", kb="campaign", source="replay")
    first = here.admit(raw)
    assert here.admit(raw) is None  # on the same stream it is a resend
    second = there.admit(raw)
    assert isinstance(first, CommentV1) and isinstance(second, CommentV1)
    assert (first.stream_id, second.stream_id) == ("stream-1", "stream-2")
    # The bus keeps the two apart: their message ids differ by the stream they came from.
    ids = {msg_id(c.comment_id, f"{c.stream_id}:live", "ingest", subjects.COMMENT) for c in (first, second)}
    assert len(ids) == 2


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
    before = datetime.now(UTC)
    result = triage().admit(RawComment(id="c", text="保育料っていくらになるの"))
    assert isinstance(result, CommentV1)
    assert before <= result.published_at <= datetime.now(UTC)


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
    # the chatter of the sample, less the Super Chat c014 which is admitted, and c032 merged into c029
    assert dropped == {"c001", "c002", "c004", "c008", "c018", "c023", "c030", "c032"}
    assert results["c032"].merged_into == "c029"
    assert isinstance(results["c014"], CommentV1)


# --- blocklist, merging, rate limit, priority ----------------------------------------------

from kotae.providers import ChatModel  # noqa: E402
from kotae.services.ingest.triage import Blocklist, BlocklistError, order_for_publishing, similarity  # noqa: E402
from kotae.settings import load_settings  # noqa: E402
from tests.fakes.model_server import FakeModelServer  # noqa: E402

T0 = datetime(2026, 11, 30, 11, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    from datetime import timedelta

    return T0 + timedelta(seconds=seconds)


def test_blocklisted_words_and_links_are_dropped_even_when_paid() -> None:
    t = Triage(
        stream_id="s", kb="k", source="replay", blocklist=Blocklist.parse(["死ね", "re:https?://\\S+", "BIT.LY/"])
    )
    abuse = t.admit(RawComment(id="a", text="お前なんか死ねよ、いつ辞めるの？"))
    link = t.admit(RawComment(id="b", text="稼げる方法はここ？ https://spam.example/x"))
    short = t.admit(
        RawComment(id="c", text="see ｂｉｔ．ｌｙ／abc for what?")
    )  # NFKC first: full-width letters still match
    paid = t.admit(RawComment(id="d", text="死ね", superchat=SuperChat(amount=100, currency="JPY")))
    ok = t.admit(RawComment(id="e", text="保育料っていくら？"))
    for result in (abuse, link, short, paid):
        assert isinstance(result, Dropped) and result.reason.startswith("blocked:")
    assert isinstance(ok, CommentV1)


def test_a_blocklist_file_with_a_bad_pattern_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "block.txt"
    path.write_text("# abuse\n死ね\n\nre:(unclosed\n", encoding="utf-8")
    with pytest.raises(BlocklistError, match=rf"{path}:4"):
        Blocklist.from_file(path)


def test_the_blocklist_comes_from_settings(tmp_path: Path) -> None:
    path = tmp_path / "block.txt"
    path.write_text("スパム\n", encoding="utf-8")
    s = load_settings(data_dir=tmp_path, ingest_blocklist="死ね, re:https?://", ingest_blocklist_file=path)
    t = Triage.from_settings(s, source="replay")
    assert isinstance(t.admit(RawComment(id="a", text="スパムはいくら？")), Dropped)
    assert isinstance(t.admit(RawComment(id="b", text="http://x.example どう？")), Dropped)
    assert isinstance(t.admit(RawComment(id="c", text="保育料はいくら？")), CommentV1)


def test_a_near_duplicate_question_is_merged_into_the_earlier_one() -> None:
    t = Triage(stream_id="s", kb="k", source="replay", merge_window_s=180)
    first = t.admit(RawComment(id="q1", text="給食費の無償化はいつから始まるの？", published_at=at(0)))
    again = t.admit(RawComment(id="q2", text="給食費の無償化っていつからですか", published_at=at(40)))
    other = t.admit(RawComment(id="q3", text="保育料いくらになるんですか？", published_at=at(50)))
    assert isinstance(first, CommentV1) and isinstance(other, CommentV1)
    assert isinstance(again, Dropped)
    assert again.merged_into == "q1" and again.reason.startswith("merged_into: q1")


def test_the_very_same_question_is_merged_even_when_a_compound_noun_splits_into_words() -> None:
    # シェアハウス is one noun and two words (シェア, ハウス): a noun both questions name is no thing of their own.
    question = "空き家を直したシェアハウスは何戸できる？"
    assert similarity(question, question) == 1.0
    t = Triage(stream_id="s", kb="k", source="replay", merge_window_s=180)
    assert isinstance(t.admit(RawComment(id="q1", text=question, published_at=at(0))), CommentV1)
    again = t.admit(RawComment(id="q2", text=question, published_at=at(30)))
    assert isinstance(again, Dropped) and again.merged_into == "q1"


def test_the_same_question_after_the_window_is_asked_again() -> None:
    t = Triage(stream_id="s", kb="k", source="replay", merge_window_s=60)
    assert isinstance(t.admit(RawComment(id="q1", text="When does early voting start?", published_at=at(0))), CommentV1)
    assert isinstance(
        t.admit(RawComment(id="q2", text="when does early voting begin?", published_at=at(61))), CommentV1
    )


def test_questions_that_share_only_question_words_are_not_merged() -> None:
    assert similarity("バス代いくらになるんですか", "保育料いくらになるんですか？") < 0.5
    assert similarity("津波避難タワーは何基建てる予定？", "津波避難タワー何基つくるの？") >= 0.5


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("2004年の技術者数は何人？", "2007年の技術者数は何人？"),
        ("How many riders did the line have in 2019?", "How many riders did the line have in 2023?"),
        ("ｻﾌﾞﾚ", "サブレのカロリーってどれくらい？"),  # a keyword, then a question about something else
        ("工場見学", "工場見学っておみやげもらえる？"),  # the keyword's topic, then more than it asks
        ("shortbread", "how many calories in the shortbread?"),
        ("ドミニカ国の政体は？", "ドミニカ国の首都は"),  # one country, two things asked about
        ("アムハラ語を事実上の公用語としている国はどこか。", "エチオピアの事実上の公用語は？"),  # the inverse
        ("日本共産党の略称は？", "日本共産党の機関紙は？"),  # one party (in three tokens), two things asked
        ("オランダの公用語は", "日本の公用語は。"),  # one thing asked about two countries
    ],
)
def test_different_questions_are_never_merged(a: str, b: str) -> None:
    assert similarity(a, b) == 0.0
    t = Triage(stream_id="s", kb="k", source="replay", merge_window_s=180)
    assert isinstance(t.admit(RawComment(id="q1", text=a, published_at=at(0))), CommentV1)
    assert isinstance(t.admit(RawComment(id="q2", text=b, published_at=at(10))), CommentV1)


def test_admissions_beyond_the_rate_limit_are_dropped_but_super_chats_pass() -> None:
    t = Triage(stream_id="s", kb="k", source="replay", admit_per_minute=3, merge_window_s=0)
    texts = ["保育料はいくら？", "バス代は？", "期日前投票はいつ？", "避難所はどこ？", "給食費は無料？"]
    results = [t.admit(RawComment(id=f"q{i}", text=x, published_at=at(i))) for i, x in enumerate(texts)]
    assert [isinstance(r, CommentV1) for r in results] == [True, True, True, False, False]
    assert all(r.reason.startswith("rate_limited") for r in results[3:] if isinstance(r, Dropped))
    paid = t.admit(
        RawComment(id="p", text="港は？", published_at=at(6), superchat=SuperChat(amount=500, currency="JPY"))
    )
    assert isinstance(paid, CommentV1)
    later = t.admit(RawComment(id="q9", text="図書館は何時まで？", published_at=at(70)))  # a new minute of chat
    assert isinstance(later, CommentV1)


def test_priority_super_chat_then_fresh_then_stale() -> None:
    t = Triage(stream_id="s", kb="k", source="replay", stale_after_s=60)
    fresh = t.admit(RawComment(id="f", text="保育料はいくら？", published_at=at(300)))
    stale = t.admit(
        RawComment(id="s", text="バス代はいくら？", published_at=at(100))
    )  # arrives late: 200 s behind the chat
    paid = t.admit(
        RawComment(id="p", text="がんばれー！", published_at=at(301), superchat=SuperChat(amount=500, currency="JPY"))
    )
    assert isinstance(fresh, CommentV1) and isinstance(stale, CommentV1) and isinstance(paid, CommentV1)
    assert paid.priority > fresh.priority > stale.priority
    ordered = order_for_publishing([(0, stale), (1, fresh), (2, paid)])
    assert [d.comment_id for _, d in ordered] == ["p", "f", "s"]


# --- the model method --------------------------------------------------------------------------


def question_marks(path: str, body: dict) -> str:
    """A fake model that calls a comment a question when it has a question mark."""
    lines = body["messages"][-1]["content"].splitlines()
    ids = [int(line.split(".", 1)[0]) for line in lines if "?" in line]
    return json.dumps({"question_ids": ids})


async def test_a_model_classifies_comments_in_batches() -> None:
    with FakeModelServer(responder=question_marks) as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|triage", setting="KOTAE_TRIAGE_MODEL", timeout_s=5.0)
        t = Triage(stream_id="s", kb="k", source="replay", model=model, batch_size=3)
        # 'いつから' would pass the rules without a '?'; the model (here: question marks) decides instead
        raws = [
            RawComment(id=f"c{i}", text=x, published_at=at(i))
            for i, x in enumerate(
                [
                    "期日前投票いつから",
                    "保育料はいくら?",
                    "草",
                    "What time do polls close?",
                    "nice",
                    "バス代は?",
                    "hello",
                ]
            )
        ]
        results = await t.admit_batch(raws)
    assert len(fake.requests) == 3  # 7 comments in batches of 3
    assert "JSON" in fake.requests[0]["body"]["messages"][0]["content"]
    admitted = [r.comment_id for r in results if isinstance(r, CommentV1)]
    assert admitted == ["c1", "c3", "c5"]
    assert all(r.triage == "model:triage.v2" for r in results if isinstance(r, CommentV1))
    dropped = [r for r in results if isinstance(r, Dropped)]
    assert {d.comment.comment_id for d in dropped} == {"c0", "c2", "c4", "c6"}
    assert all(d.method == "model:triage.v2" and d.degraded_reason is None for d in dropped)


@pytest.mark.parametrize("fault", ["500", "garbage"])
async def test_a_failing_model_falls_back_to_the_rules_and_says_so(fault: str) -> None:
    with FakeModelServer(default=fault) as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|triage", setting="KOTAE_TRIAGE_MODEL", timeout_s=5.0)
        t = Triage(stream_id="s", kb="k", source="replay", model=model)
        results = await t.admit_batch([RawComment(id="a", text="保育料っていくら"), RawComment(id="b", text="草")])
    admitted, dropped = results
    assert isinstance(admitted, CommentV1) and admitted.triage == "question_rules"
    assert isinstance(dropped, Dropped) and dropped.method == "question_rules"
    assert dropped.degraded_reason and "offline rules used" in dropped.degraded_reason


async def test_a_model_reply_of_the_wrong_shape_falls_back() -> None:
    with FakeModelServer(default='{"questions": "all of them"}') as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|triage", setting="KOTAE_TRIAGE_MODEL", timeout_s=5.0)
        t = Triage(stream_id="s", kb="k", source="replay", model=model)
        (result,) = await t.admit_batch([RawComment(id="b", text="草")])
    assert isinstance(result, Dropped) and "BadReply" in (result.degraded_reason or "")


async def test_batches_skip_resends_and_keep_super_chats_out_of_the_model() -> None:
    with FakeModelServer(responder=question_marks) as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|triage", setting="KOTAE_TRIAGE_MODEL", timeout_s=5.0)
        t = Triage(stream_id="s", kb="k", source="replay", model=model)
        raws = [
            RawComment(id="a", text="保育料は?"),
            RawComment(id="a", text="保育料は?"),
            RawComment(id="p", text="がんばれ", superchat=SuperChat(amount=500, currency="JPY")),
        ]
        first, resend, paid = await t.admit_batch(raws)
    assert isinstance(first, CommentV1) and resend is None and isinstance(paid, CommentV1)
    assert fake.requests[0]["body"]["messages"][-1]["content"] == "1. 保育料は?"


def test_remembered_ids_are_bounded_and_the_oldest_go_first() -> None:
    from kotae.services.ingest.triage import RecentIds

    ids = RecentIds(capacity=3)
    for i in range(5):
        ids.add(f"c{i}")
    assert len(ids) == 3 and "c0" not in ids and "c1" not in ids and "c4" in ids


def test_a_long_stream_keeps_bounded_state() -> None:
    from datetime import timedelta

    t = Triage(stream_id="s", kb="k", source="replay", admit_per_minute=0, merge_window_s=60)
    for i in range(3000):  # 25 minutes of chat at 2 comments a second, every one a new question
        result = t.admit(
            RawComment(
                id=f"c{i}", text=f"what about topic{i}x and area{i}y?", published_at=T0 + timedelta(seconds=i / 2)
            )
        )
        assert isinstance(result, CommentV1)
    assert len(t._recent) <= 2 * 60 * 2 + 1  # the merge window (with its margin), not the whole stream
    assert len(t._admitted_at) <= 2 * 120 + 1


def test_questions_asking_for_other_kinds_of_answer_are_not_merged() -> None:
    t = Triage(stream_id="s", kb="k", source="replay", merge_window_s=180)
    assert isinstance(t.admit(RawComment(id="q1", text="梅雨の期間はどれくらいか？", published_at=at(0))), CommentV1)
    assert isinstance(t.admit(RawComment(id="q2", text="梅雨の期間はいつから？", published_at=at(10))), CommentV1)
    assert isinstance(
        t.admit(RawComment(id="q3", text="How long is the rainy season?", published_at=at(20))), CommentV1
    )
    assert isinstance(t.admit(RawComment(id="q4", text="When is the rainy season?", published_at=at(30))), CommentV1)
    # The same kind asked again in other words is still merged.
    again = t.admit(RawComment(id="q5", text="梅雨の期間ってどのくらい？", published_at=at(40)))
    assert isinstance(again, Dropped) and again.merged_into == "q1"
    # A statement, then the same words asking what it is about: the second asks for something.
    stated = "1991年に刑法が改正され、16歳以上の性行為が適法とされる"
    assert isinstance(t.admit(RawComment(id="q6", text=stated, published_at=at(50))), CommentV1)
    assert isinstance(t.admit(RawComment(id="q7", text=stated + "国は", published_at=at(60))), CommentV1)
