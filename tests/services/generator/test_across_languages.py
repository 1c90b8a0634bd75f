"""An English question over Japanese evidence, offline: quote the sentence the embedding puts
nearest among those giving the kind asked for, or say nothing and why. The real USE model."""

from __future__ import annotations

import pytest

from kotae.contracts import CommentV1, Evidence, RerankV1
from kotae.knowledge.embeddings import LazyEmbedder, OpenAIEmbedder
from kotae.language.relevance import numbers_not_said
from kotae.language.text import normalize
from kotae.services.generator.logic import NOT_FOUND, Draft, extractive_answer
from kotae.services.verifier.logic import verify

TRANSPORT = Evidence(
    doc_id="transport",
    chunk_id="transport#a",
    title="交通：バス・鉄道・フェリー",
    text=(
        "県内の路線バスの運賃に上限を設け、1回の乗車で大人300円、高校生以下と75歳以上は100円にする。"
        "臨海鉄道の赤字は年3億円で、県と沿線の市町で半分ずつ負担して路線を残す。"
        "青凪島と本土を結ぶフェリーの運賃を、島民は半額にする。"
        "新しいバス路線は2027年10月に開業する。"
    ),
    lang="ja",
)
DISASTER = Evidence(
    doc_id="disaster",
    chunk_id="disaster#a",
    title="防災：津波と地震への備え",
    text=(
        "県の被害想定では、最大14メートルの津波が来る。"
        "津波避難タワーを、現在の38基から2030年度までに60基に増やす。"
        "古い木造住宅の耐震改修に最大150万円を補助する。"
    ),
    lang="ja",
)


@pytest.fixture(scope="module")
def use() -> LazyEmbedder:
    return LazyEmbedder("use-multilingual-v3")


def draft(text: str, docs: list[Evidence], embedder: object) -> tuple[Draft, RerankV1]:
    norm = normalize(text)
    comment = CommentV1(comment_id="c1", stream_id="s1", author="v", text=text, normalized=norm, lang="en")
    rerank = RerankV1(comment_id="c1", stream_id="s1", comment=comment, docs=docs, method="keep_top_n")
    return extractive_answer(comment, rerank, max_sentences=2, embedder=embedder), rerank  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("question", "docs", "quoted"),
    [
        ("What is the bus fare cap for adults?", [TRANSPORT], "大人300円"),
        ("What's the bus fare cap for adults?", [TRANSPORT], "大人300円"),  # contracted, still asks
        ("When does the new bus line open?", [TRANSPORT], "2027年10月"),
        ("How many tsunami evacuation towers will there be by 2030?", [DISASTER, TRANSPORT], "60基"),
        ("How much is the subsidy for making an old wooden house earthquake-proof?", [DISASTER], "150万円"),
    ],
)
def test_an_english_question_quotes_the_japanese_sentence_that_answers_it(
    use: LazyEmbedder, question: str, docs: list[Evidence], quoted: str
) -> None:
    d, rerank = draft(question, docs, use)
    assert not d.not_found, d.reason
    assert quoted in d.answer and d.answer.endswith("[1]。")
    assert d.method == "extractive" and [c.doc_id for c in d.citations] == [docs[0].doc_id]
    verdict = verify(d.answer, rerank.docs, rerank.faq)
    assert verdict.verdict == 0, verdict.reasons  # supported (a verbatim quote) and of the kind asked for


def test_a_number_the_question_names_must_be_in_the_sentence_quoted() -> None:
    assert numbers_not_said("How many doctors per 100,000 people?", ["医師数は人口10万人あたり214人。"]) == []
    assert numbers_not_said("How many towers by 2030?", ["最大14メートルの津波が来る。"]) == ["2030"]


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        # Shares a kind (an amount) and a topic (fares) with the evidence, asks about something else.
        ("How much is a taxi from the station?", "too far from the question"),
        ("Where is the nearest Starbucks?", "too far from the question"),
        # No wh-word: nothing about it can be checked in a Japanese sentence offline.
        ("Tell me about the ferry for islanders", "only a question asking for a kind of answer"),
    ],
)
def test_an_english_question_the_japanese_evidence_does_not_answer_stays_silent(
    use: LazyEmbedder, question: str, reason: str
) -> None:
    d, _ = draft(question, [TRANSPORT], use)
    assert d.not_found and d.answer == NOT_FOUND["en"]
    assert reason in d.not_found_reason


def test_an_embedding_model_with_no_calibrated_bound_does_not_quote_across_languages() -> None:
    # The bound is looked up before anything is embedded, so no server need answer.
    hosted = OpenAIEmbedder(model="text-embedding-3-small", base_url="http://127.0.0.1:9/v1")
    d, _ = draft("What is the bus fare cap for adults?", [TRANSPORT], hosted)
    assert d.not_found and "text-embedding-3-small has no calibrated bound" in d.not_found_reason


def test_without_an_embedder_evidence_in_another_language_is_not_quoted() -> None:
    d, _ = draft("What is the bus fare cap for adults?", [TRANSPORT], None)
    assert d.not_found and d.answer == NOT_FOUND["en"]
