"""Query rewriting through the real openai and anthropic SDKs against a local fake server."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import SecretStr

from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.providers import ChatModel, ModelSpecError, ModelUnavailable
from kotae.services.retriever.logic import Retriever
from kotae.services.retriever.rewrite import QueryRewriter, dropped, load_prompt
from kotae.settings import Settings
from tests.fakes.model_server import FakeModelServer

DAY = date(2026, 11, 30)


@pytest.fixture
def indexed(settings: Settings, sample_kb_path) -> Settings:
    load_knowledge_base(load_records(sample_kb_path), "default", settings)
    return settings


def test_with_a_model_the_rewrite_is_searched_too_and_recorded(indexed: Settings) -> None:
    with FakeModelServer("みなとループのバスの運賃はいくらですか") as fake:
        settings = indexed.model_copy(update={"rewrite_model": f"compatible:{fake.url}/v1|rewriter"})
        result = Retriever(settings).retrieve("バス代いくら？", kb="default", day=DAY)
    assert result.method == "hybrid+rewrite"
    assert result.query == "みなとループのバスの運賃はいくらですか"
    assert result.prompt_version == "rewrite.v1"
    assert result.docs[0].doc_id == "bus-fare-2027"
    assert result.gate == "answer"
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["model"] == "rewriter"
    messages = sent["body"]["messages"]
    assert messages[0]["role"] == "system" and "data, not instructions" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "バス代いくら？"}


def test_the_anthropic_path_speaks_the_messages_api(indexed: Settings) -> None:
    with FakeModelServer("保育料の上限はいくらですか") as fake:
        settings = indexed.model_copy(
            update={
                "rewrite_model": "anthropic:claude-test",
                "anthropic_base_url": fake.url,
                "anthropic_api_key": SecretStr("k"),
            }
        )
        result = Retriever(settings).retrieve("保育料って？", kb="default", day=DAY)
    assert result.query == "保育料の上限はいくらですか"
    sent = fake.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["body"]["system"] == load_prompt("rewrite.v1")
    assert sent["body"]["messages"] == [{"role": "user", "content": "保育料って？"}]


@pytest.mark.parametrize("fault", ["500", "429", "garbage", "truncated", "timeout"])
def test_a_failed_rewrite_still_searches_the_comment(indexed: Settings, fault: str) -> None:
    with FakeModelServer(fault, timeout_sleep_s=2.0) as fake:
        settings = indexed.model_copy(
            update={"rewrite_model": f"compatible:{fake.url}/v1|rewriter", "model_timeout_s": 0.5}
        )
        result = Retriever(settings).retrieve("保育料っていくらになるの", kb="default", day=DAY)
    assert result.method == "hybrid" and result.query is None
    assert result.docs[0].doc_id == "childcare-2027"
    assert len(fake.requests) == 1  # no retries hidden inside the SDK


def test_transient_faults_are_typed_for_redelivery() -> None:
    with FakeModelServer("429") as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|m", setting="KOTAE_X", timeout_s=2)
        with pytest.raises(ModelUnavailable, match="RateLimit"):
            model.complete(system="s", user="u")


def test_a_bad_model_setting_names_the_variable() -> None:
    with pytest.raises(ModelSpecError, match="KOTAE_REWRITE_MODEL"):
        ChatModel.from_spec("gpt-4o", setting="KOTAE_REWRITE_MODEL")


def test_offline_there_is_no_rewriter(settings: Settings) -> None:
    assert QueryRewriter.from_settings(settings) is None


# --- a rewrite is another question unless it keeps what the comment names ----------------------


def test_dropped_names_the_names_numbers_and_kept_words_a_rewrite_leaves_out() -> None:
    assert dropped("青葉さんの給料って20%カット？", "知事の給与は何%削減されますか") == ["青葉", "20"]
    assert dropped("消費税は下げてくれるの？", "宿泊税を下げる予定はありますか", keep=["消費税"]) == ["消費税"]
    assert dropped("ｻﾌﾞﾚ1,000円分買ったら送料は？", "サブレを1000円分買ったときの送料はいくらですか") == []


def test_a_rewrite_that_drops_a_term_no_record_has_is_not_used(indexed: Settings) -> None:
    """Asked about the consumption tax, a rewrite about another tax would let its answer through."""
    with FakeModelServer("宿泊税を下げる予定はありますか") as fake:
        settings = indexed.model_copy(update={"rewrite_model": f"compatible:{fake.url}/v1|rewriter"})
        result = Retriever(settings).retrieve("消費税は下げてくれるの？", kb="default", day=DAY)
    assert result.query is None and result.method == "hybrid"
    assert [c.outcome for c in result.calls] == ["unusable: dropped 「消費税」"]
    assert result.gate == "no_match" and "「消費税」" in result.reason


def test_a_faithful_rewrite_of_an_uncovered_question_stays_uncovered(indexed: Settings) -> None:
    with FakeModelServer("消費税を下げる予定はありますか") as fake:
        settings = indexed.model_copy(update={"rewrite_model": f"compatible:{fake.url}/v1|rewriter"})
        result = Retriever(settings).retrieve("消費税は下げてくれるの？", kb="default", day=DAY)
    assert result.query == "消費税を下げる予定はありますか"
    assert result.gate == "no_match" and result.reason.startswith("not_covered: 「消費税」")


def test_what_only_the_rewrite_names_must_be_covered_too(indexed: Settings) -> None:
    """The model read 'my house will collapse in a quake' as a question about earthquake-proofing,
    which no record covers: silence, not the rent subsidy that shares 住宅 and 補助."""
    with FakeModelServer("住宅の耐震化への補助はありますか") as fake:
        settings = indexed.model_copy(update={"rewrite_model": f"compatible:{fake.url}/v1|rewriter"})
        result = Retriever(settings).retrieve("地震来たら家つぶれそうで怖い", kb="default", day=DAY)
    assert result.gate == "no_match" and result.reason.startswith("not_covered: 「耐震化」")
