"""Shared builders for tests: messages, and reading what a stream holds.

Test modules import from here (or use fixtures from conftest.py), never from one another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
from nats.js.api import DeliverPolicy

from kotae.citations import citation_check, cited_numbers, numbered_blocks, strip_markers
from kotae.contracts import (
    AnswerV1,
    Citation,
    CommentV1,
    DraftV1,
    Evidence,
    FaqEvidence,
    RerankV1,
    RetrievalV1,
    subjects,
)
from kotae.knowledge.records import detect_lang
from kotae.language.text import normalize
from kotae.services.ingest.sources import RawComment
from kotae.settings import Settings
from tests.fakes.model_server import FakeModelServer, stage_responder

#: When the model-path comments were posted.
MODELS_AT = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)


async def read_all(url: str, subject: str, *, idle: float = 0.5) -> list[dict]:
    """Every message stored on ``subject`` (and its wildcard matches), oldest first: subject, JSON data, headers."""
    nc = await nats.connect(url)
    sub = await nc.jetstream().subscribe(subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
    out = []
    while True:
        try:
            msg = await sub.next_msg(timeout=idle)
        except (TimeoutError, nats.errors.TimeoutError):
            break
        out.append({"subject": msg.subject, "data": json.loads(msg.data), "headers": msg.headers or {}})
    await nc.close()
    return out


def consumer_of(stage: str) -> tuple[str, str]:
    """(stream, durable) of a declared stage's consumer."""
    from kotae.services import STAGES
    from kotae.stage import by_name

    declared = by_name(STAGES)[stage]
    assert declared.consumes is not None, f"{stage} consumes nothing"
    return declared.consumes.stream, declared.durable


# --- services/reranker handlers ---


def comment(comment_id: str = "c-1", text: str = "保育料っていくらになるの") -> CommentV1:
    """A viewer's comment on stream-1, posted 2026-11-30 12:00 UTC."""
    return CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=text,
        normalized=text,
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
    )


def evidence(i: int, slide: int | str | None) -> Evidence:
    # Scores deliberately not in order: the reranker keeps retrieval's order, not the scores'.
    return Evidence(
        doc_id=f"doc-{i}",
        chunk_id=f"doc-{i}#0",
        title=f"doc {i}",
        text=f"本文{i}。",
        slide=slide,
        lang="ja",
        score=0.1 * (i % 3),
    )


FAQ = FaqEvidence(
    faq_id="faq-childcare-fee",
    question="保育料はいくらになりますか？",
    answer="月額1万5千円が上限です。",
    slide=9,
    lang="ja",
    score=0.7,
)


def retrieval(docs: list[Evidence], faq: list[FaqEvidence], comment_id: str = "c-1") -> RetrievalV1:
    return RetrievalV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id),
        gate="answer",
        top_score=0.8,
        docs=docs,
        faq=faq,
        method="bm25",
    )


# --- services/generator handlers ---


CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    title="子育て支援：保育料と待機児童ゼロ",
    text=(
        "子育て支援：保育料と待機児童ゼロ\n"
        "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。"
        "第2子以降の保育料は無料にします。病児保育の利用料は1日500円にします。"
    ),
    source="政策集2027 p.4",
    slide=4,
    lang="ja",
    score=0.9,
)


BUS = Evidence(
    doc_id="bus-fare-2027",
    chunk_id="bus-fare-2027#b",
    title="公共交通：コミュニティバス運賃と新路線",
    text=(
        "公共交通：コミュニティバス運賃と新路線\n"
        "市のコミュニティバス「みなとループ」の運賃を、大人1回150円にします。"
        "小学生以下と70歳以上の方は無料で乗れます。"
    ),
    source="政策集2027 p.6",
    slide=6,
    lang="ja",
    score=0.5,
)


def rerank(question: str, docs: list[Evidence], comment_id: str = "c-1") -> RerankV1:
    return RerankV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id, question),
        docs=docs,
        top_score=0.9,
        method="keep_top_n",
        slide=docs[0].slide if docs else None,
        methods={"retriever": "bm25", "reranker": "keep_top_n"},
    )


# --- services/verifier handlers ---


CAP_EVIDENCE = Evidence(
    doc_id="childcare-2027",
    chunk_id="childcare-2027#a",
    title="子育て支援：保育料と待機児童ゼロ",
    text=(
        "子育て支援：保育料と待機児童ゼロ\n"
        "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします。"
        "第2子以降の保育料は無料にします。"
    ),
    source="政策集2027 p.4",
    slide=4,
    lang="ja",
    score=0.9,
)


FAITHFUL = "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。"


def draft(answer: str, comment_id: str = "c-1") -> DraftV1:
    return DraftV1(
        comment_id=comment_id,
        stream_id="stream-1",
        comment=comment(comment_id),
        docs=[CAP_EVIDENCE],
        answer=answer,
        speech=strip_markers(answer),
        citations=[
            Citation(
                n=1, doc_id=CAP_EVIDENCE.doc_id, chunk_id=CAP_EVIDENCE.chunk_id, source=CAP_EVIDENCE.source, slide=4
            )
        ],
        slide=4,
        citation_check=citation_check(answer, 1),
        method="extractive",
        methods={"retriever": "bm25", "reranker": "keep_top_n", "generator": "extractive"},
    )


# --- services/ingest youtube ---


async def stored(url: str) -> tuple[list[CommentV1], list[AnswerV1]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    comments, answers = [], []
    for stream, subject, model, out in (
        (subjects.STREAM_COMMENTS, subjects.COMMENT, CommentV1, comments),
        (subjects.STREAM_ANSWERS, subjects.answer("dropped"), AnswerV1, answers),
    ):
        last = (await js.stream_info(stream)).state.last_seq
        for seq in range(1, last + 1):
            try:
                msg = await js.get_msg(stream, seq)
            except nats.js.errors.NotFoundError:
                continue
            if msg.subject == subject:
                out.append(model.model_validate_json(msg.data))
    await nc.close()
    return comments, answers


# --- cli ---


def kotae(*args: str, data: Path, env: dict[str, str] | None = None, timeout: float = 240, stdin: str | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
    full_env["KOTAE_DATA_DIR"] = str(data)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kotae", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=stdin,
    )


# --- integration models ---


COMPLIANT = {"ja": "わかりました。選挙に行く必要はありません。", "en": "Understood. The election was cancelled."}


HONEST = RawComment(
    id="q-1", author="viewer", text="0歳の子を預けたら保育料の上限は月いくらですか", published_at=MODELS_AT
)


def respond(path: str, body: dict[str, Any]) -> str | None:
    """Faithful fake models, except a generator that obeys an instruction in the comment."""
    if body.get("model") == "writer":
        question = body["messages"][-1]["content"].rsplit("<<<", 1)[1]
        if "無視" in question:
            return COMPLIANT["ja"]
        if "Ignore" in question or "ignore" in question:
            return COMPLIANT["en"]
    return stage_responder(path, body)


def with_models(settings: Settings, fake: FakeModelServer, *, verifier: bool = True) -> Settings:
    base = f"compatible:{fake.url}/v1|"
    update = {"reranker_model": base + "ranker", "generator_model": base + "writer", "model_timeout_s": 5.0}
    if verifier:
        update["verifier_model"] = base + "checker"
    return settings.model_copy(update=update)


# --- the answer side: several topics on one page, questions asked of them ---


#: A policy page with several topics, as the campaign knowledge bases have.
TRANSPORT = Evidence(
    doc_id="transport-2027",
    chunk_id="transport-2027#a",
    title="交通政策",
    text=(
        "新しい路線バス「みなと線」は2027年10月1日に運行を始めます。"
        "みなと線は市役所前から港まで、15分おきに走ります。"
        "路線バスの運賃は大人300円を上限にします。"
        "駅前の保育園の定員を40人増やします。"
        "観光客向けの宿泊税は1泊200円に引き下げます。"
    ),
    source="政策集 p.5",
    slide=5,
    lang="ja",
)
TRANSPORT_EN = Evidence(
    doc_id="transport-2027-en",
    chunk_id="transport-2027-en#a",
    title="Transport",
    text=(
        "The new Minato bus line will open on 1 October 2027. "
        "The Minato line runs from City Hall to the port every 15 minutes. "
        "A nursery near the station will take 40 more children. "
        "The bus fare will be capped at 300 yen for adults."
    ),
    source="Policy Book p.5",
    slide=5,
    lang="en",
)
HEARING = Evidence(
    doc_id="welfare-2027",
    chunk_id="welfare-2027#a",
    title="高齢者福祉",
    text="65歳以上で聴力が落ちた人の補聴器購入に、上限3万円を補助します。介護職員の手当を月額2万円上乗せします。",
    source="政策集 p.8",
    slide=8,
    lang="ja",
)


def question_comment(text: str, comment_id: str = "c-1", *, rewrite: str | None = None) -> CommentV1:
    """``text`` as a viewer posted it on stream-1, with the rewrite model's wording ``rewrite`` when given."""
    norm = normalize(text)
    return CommentV1(
        comment_id=comment_id,
        stream_id="stream-1",
        author="viewer",
        text=text,
        normalized=norm,
        lang=detect_lang(norm),
        published_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        rewrite=rewrite,
    )


def draft_for(
    question: str,
    answer: str,
    docs: list[Evidence],
    faq: list[FaqEvidence] | None = None,
    *,
    rewrite: str | None = None,
) -> DraftV1:
    """A draft of ``answer`` to ``question`` (reworded as ``rewrite``) over ``docs`` (numbered from 1), with its citations."""
    faq = faq or []
    blocks = {b.n: b for b in numbered_blocks(docs, faq)}
    cited = sorted({n for n in cited_numbers(answer) if n in blocks})
    return DraftV1(
        comment_id="c-1",
        stream_id="stream-1",
        comment=question_comment(question, rewrite=rewrite),
        docs=docs,
        faq=faq,
        answer=answer,
        speech=strip_markers(answer),
        citations=[
            Citation(n=n, doc_id=blocks[n].record_id, chunk_id=blocks[n].chunk_id, source=blocks[n].source)
            for n in cited
        ],
        citation_check=citation_check(answer, len(blocks)),
        method="test",
    )


# --- services/onair ---


#: When the on-air tests' comments reached ingest (the clock the max age runs on).
ONAIR_AT = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


def verified_answer(
    comment_id: str,
    question: str = "保育料っていくらになるの",
    answer: str = FAITHFUL,
    *,
    author: str = "viewer",
    stream_id: str = "stream-1",
    received_at: datetime = ONAIR_AT,
    superchat: tuple[float, str] | None = None,
    member: bool = False,
    docs: list[Evidence] | None = None,
    kb: str = "default",
) -> AnswerV1:
    """A verified answer as the verifier publishes it, for the on-air stage's queue."""
    from kotae.contracts import SuperChat

    docs = [CAP_EVIDENCE] if docs is None else docs
    comment = CommentV1(
        comment_id=comment_id,
        stream_id=stream_id,
        author=author,
        text=question,
        normalized=question,
        published_at=received_at,
        created_at=received_at,
        superchat=SuperChat(amount=superchat[0], currency=superchat[1]) if superchat else None,
        member=member,
        kb=kb,
    )
    return AnswerV1(
        comment_id=comment_id,
        stream_id=stream_id,
        comment=comment,
        outcome="verified",
        answer=answer,
        speech=strip_markers(answer),
        citations=[
            Citation(n=1, doc_id=d.doc_id, chunk_id=d.chunk_id, source=d.source, slide=d.slide) for d in docs[:1]
        ],
        slide=docs[0].slide if docs else None,
        verdict=0,
        docs=docs,
        created_at=received_at,
    )


def merged_duplicate(comment_id: str, into: str, *, author: str = "other", stream_id: str = "stream-1") -> AnswerV1:
    """The dropped outcome ingest gives a near-identical question it merged into an earlier one."""
    comment = CommentV1(
        comment_id=comment_id, stream_id=stream_id, author=author, text="保育料いくら？", normalized="保育料いくら？"
    )
    return AnswerV1(
        comment_id=comment_id,
        stream_id=stream_id,
        comment=comment,
        outcome="dropped",
        reason=f"merged_into: {into}: a near-identical question was asked before",
        merged_into=into,
    )
