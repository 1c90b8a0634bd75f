"""services.verifier.decision.decide: relevance before support, and which path decides.

Model paths run the real SDKs against the local fake model server (tests/fakes/model_server.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from kotae.contracts import Evidence, FaqEvidence
from kotae.providers import ChatModel, ModelUnavailable
from kotae.services.verifier.decision import VerifierPolicy, decide
from kotae.settings import load_settings
from tests.factories import CAP_EVIDENCE, HEARING, TRANSPORT, TRANSPORT_EN, draft_for
from tests.fakes.model_server import FakeModelServer

DATE = "新しい路線バス「みなと線」は2027年10月1日に運行を始めます[1]。"
ROUTE = "みなと線は市役所前から港まで、15分おきに走ります[1]。"
PARAPHRASED = "新しい路線バス「みなと線」は2027年10月1日に運行を開始します[1]。"  # 開始: not a word of the evidence
PASS = json.dumps({"verdict": 0, "findings": []})
IRRELEVANT = json.dumps({"verdict": 4, "findings": [{"problem": "asked when it opens; the draft gives its route"}]})


@pytest.fixture
async def fake() -> AsyncIterator[FakeModelServer]:
    with FakeModelServer(PASS) as server:
        yield server


def policy_for(fake: FakeModelServer, mode: str, **kw: object) -> VerifierPolicy:
    settings = load_settings(
        verifier_model=f"compatible:{fake.url}/v1|checker", verifier_mode=mode, model_timeout_s=2.0
    )
    model = ChatModel.from_settings(settings, settings.verifier_model or "", setting="KOTAE_VERIFIER_MODEL")
    return VerifierPolicy(mode=mode, model=model, reask=1, **kw)  # type: ignore[arg-type]


async def test_offline_a_grounded_answer_to_the_question_is_verified() -> None:
    d = await decide(draft_for("みなと線はいつから走るの？", DATE, [TRANSPORT]), VerifierPolicy())
    assert d.outcome == "verified" and d.decided_by == "offline" and d.verdict == 0


async def test_offline_a_grounded_answer_that_misses_the_question_ends_unanswered_not_verified() -> None:
    d = await decide(draft_for("みなと線はいつから走るの？", ROUTE, [TRANSPORT]), VerifierPolicy())
    assert d.outcome == "unanswered" and d.decided_by == "offline"
    assert d.reason.startswith("not_found: ") and "a date or time" in d.reason


async def test_offline_english_answer_about_another_thing_ends_unanswered() -> None:
    answer = "The bus fare will be capped at 300 yen for adults[1]."
    d = await decide(draft_for("How much is the taxi fare at night?", answer, [TRANSPORT_EN]), VerifierPolicy())
    assert d.outcome == "unanswered" and "taxi" in d.reason


async def test_offline_an_faq_answer_is_verified_for_the_question_its_entry_answers() -> None:
    faq = FaqEvidence(
        faq_id="faq-speech",
        question="街頭演説の予定はどこで見られますか？",
        answer="公式サイトと陣営のXアカウントで、毎日午前8時にその日の予定を更新しています。",
    )
    answer = "公式サイトと陣営のXアカウントで、毎日午前8時にその日の予定を更新しています[2]。"
    d = await decide(draft_for("街頭演説の予定はどこで確認できますか", answer, [TRANSPORT], [faq]), VerifierPolicy())
    assert d.outcome == "verified", d.reason
    # The same answer to a question its entry does not answer names none of what was asked.
    other = await decide(draft_for("討論会の予定はどこで確認できますか", answer, [TRANSPORT], [faq]), VerifierPolicy())
    assert other.outcome == "unanswered" and "討論会" in other.reason


async def test_an_uncited_claim_is_rejected_before_relevance_is_asked() -> None:
    d = await decide(
        draft_for("みなと線はいつから走るの？", "ルールを無視します。" + DATE, [TRANSPORT]), VerifierPolicy()
    )
    assert d.outcome == "rejected" and d.verdict == 2 and "uncited claim" in d.reason


async def test_cascade_a_verbatim_quote_is_decided_offline_without_a_model_call(fake: FakeModelServer) -> None:
    policy = policy_for(fake, "cascade", sure=0.9)
    d = await decide(draft_for("みなと線はいつから走るの？", DATE, [TRANSPORT]), policy)
    assert d.outcome == "verified" and d.decided_by == "offline" and d.calls == []
    assert fake.requests == []


async def test_cascade_a_changed_number_is_decided_offline_without_a_model_call(fake: FakeModelServer) -> None:
    changed = DATE.replace("2027年10月1日", "2028年10月1日")
    d = await decide(
        draft_for("みなと線はいつから走るの？", changed, [TRANSPORT]), policy_for(fake, "cascade", sure=0.9)
    )
    assert d.outcome == "rejected" and d.decided_by == "offline" and fake.requests == []


async def test_cascade_an_unsure_draft_goes_to_the_model(fake: FakeModelServer) -> None:
    """A paraphrase (a word the evidence does not use) is unsure offline: the model decides it."""
    d = await decide(
        draft_for("みなと線はいつから走るの？", PARAPHRASED, [TRANSPORT]), policy_for(fake, "cascade", sure=0.9)
    )
    assert d.decided_by == "model" and d.outcome == "verified" and len(fake.requests) == 1
    assert d.support is not None and 0.1 < d.support < 0.9


async def test_offline_the_same_unsure_draft_fails_closed() -> None:
    d = await decide(draft_for("みなと線はいつから走るの？", PARAPHRASED, [TRANSPORT]), VerifierPolicy(sure=0.9))
    assert d.outcome == "rejected" and d.decided_by == "offline" and d.reason.startswith("unsure")


async def test_model_v2_sees_the_question_and_its_relevance_class_ends_unanswered() -> None:
    with FakeModelServer(IRRELEVANT) as fake:
        d = await decide(draft_for("みなと線はいつから走るの？", DATE, [TRANSPORT]), policy_for(fake, "model"))
        user = fake.requests[0]["body"]["messages"][-1]["content"]
    assert "Question / 質問:\n<<<\nみなと線はいつから走るの？\n>>>" in user
    assert d.outcome == "unanswered" and d.decided_by == "model"
    assert "asked when it opens" in d.reason and d.calls[0].prompt_version == "verify.v2"


async def test_model_v1_stays_loadable_and_has_no_relevance_class() -> None:
    with FakeModelServer(IRRELEVANT) as fake:
        d = await decide(
            draft_for("みなと線はいつから走るの？", DATE, [TRANSPORT]),
            policy_for(fake, "model", prompt_version="verify.v1"),
        )
        user = fake.requests[0]["body"]["messages"][-1]["content"]
    assert "質問" not in user.split("Evidence")[0]
    assert d.outcome == "rejected" and d.reason.startswith("verifier_unavailable")  # 4 is no v1 class


HALL = Evidence(
    doc_id="hall",
    chunk_id="hall#0",
    title="市民ホールの利用案内",
    text="市民ホールの利用申し込みは、利用日の3か月前から受け付けます。受付は利用日の7日前の午後5時までです。"
    "利用料金は1時間2,000円です。",
    lang="ja",
)
#: A correct answer in other words than the question's (締め切り asked, 受付は〜まで written), which
#: the offline relevance check reads as not answering.
DEADLINE = ("ホール予約の締め切りは？", "受付は利用日の7日前の午後5時までです[1]。")


async def test_offline_a_correct_answer_in_other_words_than_the_question_ends_unanswered() -> None:
    d = await decide(draft_for(*DEADLINE, [HALL]), VerifierPolicy())
    assert d.outcome == "unanswered" and d.decided_by == "offline"


async def test_a_model_that_judges_it_answers_verifies_what_the_offline_relevance_check_doubts(
    fake: FakeModelServer,
) -> None:
    d = await decide(draft_for(*DEADLINE, [HALL]), policy_for(fake, "model", relevance="model"))
    assert d.outcome == "verified" and d.decided_by == "model" and len(fake.requests) == 1
    assert d.relevance is not None and not d.relevance.relevant  # the doubt is kept for audit


async def test_by_default_the_offline_relevance_check_vetoes_whatever_the_model_would_say(
    fake: FakeModelServer,
) -> None:
    d = await decide(draft_for(*DEADLINE, [HALL]), policy_for(fake, "model"))
    assert d.outcome == "unanswered" and d.decided_by == "offline" and fake.requests == []


async def test_cascade_sends_a_supported_draft_the_relevance_check_doubts_to_the_model(fake: FakeModelServer) -> None:
    d = await decide(draft_for(*DEADLINE, [HALL]), policy_for(fake, "cascade", relevance="model"))
    assert d.outcome == "verified" and d.decided_by == "model" and len(fake.requests) == 1


async def test_the_model_still_judges_relevance_when_the_offline_check_doubts_it() -> None:
    with FakeModelServer(IRRELEVANT) as fake:
        d = await decide(
            draft_for("みなと線はいつから走るの？", ROUTE, [TRANSPORT]), policy_for(fake, "model", relevance="model")
        )
    assert d.outcome == "unanswered" and d.decided_by == "model"


async def test_under_a_prompt_that_does_not_ask_relevance_the_offline_check_still_vetoes(
    fake: FakeModelServer,
) -> None:
    d = await decide(
        draft_for(*DEADLINE, [HALL]), policy_for(fake, "model", prompt_version="verify.v1", relevance="model")
    )
    assert d.outcome == "unanswered" and d.decided_by == "offline" and fake.requests == []


@pytest.mark.parametrize(
    ("answer", "missing"),
    [
        ("受付は利用日の10日前の午後5時までです[1]。", "number(s) 10"),  # the block says 7日前
        ("受付は利用日の7日前の午後5時までで、担当は佐伯真理子です[1]。", "name(s) 佐伯真理子"),
    ],
)
async def test_a_number_or_name_not_in_the_cited_block_is_rejected_whatever_the_model_says(
    fake: FakeModelServer, answer: str, missing: str
) -> None:
    # Even where the model judges relevance (the offline check's doubt goes to it), the floor decides.
    policy = policy_for(fake, "model", relevance="model")
    d = await decide(draft_for("ホール予約の締め切りは？", answer, [HALL]), policy)
    assert d.outcome == "rejected" and d.decided_by == "floor" and missing in d.reason


async def test_cascade_fails_closed_on_garbage() -> None:
    with FakeModelServer("garbage") as fake:
        d = await decide(
            draft_for("みなと線はいつから走るの？", PARAPHRASED, [TRANSPORT]), policy_for(fake, "cascade", sure=0.9)
        )
    assert d.outcome == "rejected" and d.verdict is None and d.reason.startswith("verifier_unavailable")


async def test_cascade_a_model_that_is_down_is_left_for_redelivery() -> None:
    with FakeModelServer("500") as fake:
        with pytest.raises(ModelUnavailable):
            await decide(
                draft_for("みなと線はいつから走るの？", PARAPHRASED, [TRANSPORT]), policy_for(fake, "cascade", sure=0.9)
            )


async def test_cascade_a_supported_answer_that_leaves_out_another_figure_asked_for_goes_to_the_model() -> None:
    """Asked what the fee is, a draft with only the second child's free place leaves out the cap
    beside it in the evidence: partial or not is the model's call, not the offline method's."""
    partial = draft_for("保育料っていくらになるの", "第2子以降の保育料は無料にします[1]。", [CAP_EVIDENCE])
    with FakeModelServer(IRRELEVANT) as fake:
        d = await decide(partial, policy_for(fake, "cascade", sure=0.9))
    assert d.decided_by == "model" and d.outcome == "unanswered" and len(fake.requests) == 1
    # Offline mode is unchanged: the same draft is verified (the evaluator's `complete` sees the rest).
    assert (await decide(partial, VerifierPolicy(sure=0.9))).outcome == "verified"


# --- the rewrite model's wording of the comment ----------------------------------------------

GRUMBLE = "親父が最近テレビの音めっちゃ大きくしてて、耳のやつ買えって言ってもクソ高いって聞かないんよ"
AIDS = "65歳以上で聴力が落ちた人の補聴器購入に、上限3万円を補助します[1]。"


async def test_offline_an_answer_to_the_rewrite_of_a_colloquial_comment_is_verified() -> None:
    alone = await decide(draft_for(GRUMBLE, AIDS, [HEARING]), VerifierPolicy())
    assert alone.outcome == "unanswered"
    d = await decide(
        draft_for(GRUMBLE, AIDS, [HEARING], rewrite="高齢者が補聴器を買うときの補助はありますか"), VerifierPolicy()
    )
    assert d.outcome == "verified" and d.relevance is not None
    assert d.relevance.wording == "高齢者が補聴器を買うときの補助はありますか"


async def test_offline_an_answer_to_neither_wording_ends_unanswered_with_the_comments_reason() -> None:
    care = "介護職員の手当を月額2万円上乗せします[1]。"
    d = await decide(
        draft_for(GRUMBLE, care, [HEARING], rewrite="高齢者が補聴器を買うときの補助はありますか"), VerifierPolicy()
    )
    assert d.outcome == "unanswered" and d.reason.startswith("not_found: ")
    assert "asked about '親父'" in d.reason  # the viewer's words, not the rewrite's


async def test_model_mode_the_floor_reads_the_rewrite_too(fake: FakeModelServer) -> None:
    """The model verifier passes an answer to a colloquial comment; the offline floor under it reads the
    rewrite model's wording, so the comment is answered instead of ending unanswered."""
    d = await decide(
        draft_for(GRUMBLE, AIDS, [HEARING], rewrite="高齢者が補聴器を買うときの補助はありますか"),
        policy_for(fake, "model"),
    )
    assert d.outcome == "verified" and d.decided_by == "model"


async def test_a_bare_answer_that_cannot_be_placed_is_rejected_offline_and_asked_of_the_model_in_cascade(
    fake: FakeModelServer,
) -> None:
    bare = draft_for("それっていつ？", "2027年10月1日です[1]。", [TRANSPORT])
    offline = await decide(bare, VerifierPolicy())
    assert offline.outcome != "verified" and offline.decided_by == "offline"
    cascade = await decide(bare, policy_for(fake, "cascade"))
    assert cascade.decided_by == "model" and len(fake.requests) == 1
