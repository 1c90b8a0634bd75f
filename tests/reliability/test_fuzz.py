"""Bad input to every stage, interleaved with valid comments: each bad message is dead-lettered, every comment answered.

Hypothesis makes the bad input: random bytes, JSON cut short, golden messages
with a field of the wrong type or the wrong schema version, messages over
``KOTAE_MAX_PAYLOAD_BYTES``, and invalid UTF-8 inside otherwise valid JSON.
Each is published straight to a stage's input subject on a stack whose stages
are separate processes; between them, valid comments — some full of Unicode
oddities (zero-width joiners, combining marks, bidi overrides) — go through
ingest. Whether a payload is bad is decided the way the stage decides it:
FastStream's JSON decoding, then the stage's input model.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from faststream._internal._compat import json_loads  # the decoder the stages use
from hypothesis import HealthCheck, Phase, given, settings as hsettings, strategies as st
from pydantic import BaseModel

from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, DraftV1, RerankV1, RetrievalV1, subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.settings import Settings
from kotae.stack import Stack
from tests.integration.stages import running_stages
from tests.reliability.harness import (
    AT,
    CHAOS_ENV,
    ROOT,
    SAMPLES,
    SLOW,
    chaos_settings,
    checked,
    environment,
    last_sequence,
    read_ledger,
    read_stream,
)

pytestmark = pytest.mark.slow

#: Room for the evidence a retrieval carries between stages (see the xfail test below), small enough
#: that oversized input stays cheap.
MAX_PAYLOAD = 32 * 1024
GOLDEN = ROOT / "contracts" / "golden"

#: Each stage's input: subject, model, and a golden message of that model.
INPUTS: dict[str, tuple[str, type[BaseModel], str]] = {
    "retriever": (subjects.COMMENT, CommentV1, "comment.v1.json"),
    "reranker": (subjects.RETRIEVAL, RetrievalV1, "retrieval.v1.json"),
    "generator": (subjects.RERANK, RerankV1, "rerank.v1.json"),
    "verifier": (subjects.DRAFT, DraftV1, "draft.v1.json"),
    "evaluator": (subjects.answer("verified"), AnswerV1, "answer.v1.verified.json"),
}

WRONG_VALUES = [123, -1.5, True, None, [], {}, [1, "x"], {"nested": "object"}, ""]
WRONG_VERSIONS = ["v1", "comment.v2", "answer.v2", "", None, 1, "COMMENT.V1"]
BAD_UTF8 = [b"\xed\xa0\x80", b"\xc0\xaf", b"\xff\xfe", b"\x80", b"\xf4\x90\x80\x80"]

#: Valid comments that look odd: they must be answered (or triaged) like any other.
ODD_BUT_VALID = [
    "保育料っていくらになるの\u200b\u200b？",
    "ﾊﾞｽ代いくらになるんですか？",
    "\u202e？るなにらくいて料育保",
    "期日前投票っていつから？👩\u200d👩\u200d👧\u200d👦",
    "Ｗｈａｔ ｔｉｍｅ ｄｏ ｔｈｅ ｐｏｌｌｓ ｃｌｏｓｅ？",
    "避難所って何か所に増えるの？" + "\u0301" * 30,
    "Is there any support for small shops?\x00",
]


def golden(stage: str) -> dict[str, Any]:
    return json.loads((GOLDEN / INPUTS[stage][2]).read_text(encoding="utf-8"))


def limit(stage: str) -> int:
    """Largest input a stage accepts: a viewer's comment is held to the limit, messages between
    stages (which carry their evidence) to four times it, as the streams are."""
    return MAX_PAYLOAD if stage == "retriever" else 4 * MAX_PAYLOAD


def is_bad(stage: str, body: bytes) -> bool:
    """What the stage will reject: too large, not decodable, or not its input model."""
    if len(body) > limit(stage):
        return True
    try:
        decoded: Any = json_loads(body)
    except (ValueError, UnicodeDecodeError):
        decoded = body
    try:
        INPUTS[stage][1].model_validate(decoded)
    except Exception:
        return True
    return False


def letter_payload(body: bytes) -> str:
    """The payload as a dead letter keeps it: UTF-8 text, else base64, cut at the payload limit."""
    body = body[:MAX_PAYLOAD]
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii")


@st.composite
def bad_message(draw: st.DrawFn) -> tuple[str, bytes]:
    stage = draw(st.sampled_from(sorted(INPUTS)))
    message = golden(stage)
    kind = draw(st.sampled_from(["bytes", "cut", "wrong_type", "version", "huge", "utf8"]))
    if kind == "bytes":
        body = draw(st.binary(min_size=1, max_size=300))
    elif kind == "cut":
        text = json.dumps(message, ensure_ascii=False).encode()
        body = text[: draw(st.integers(1, len(text) - 1))]
    elif kind == "wrong_type":
        key = draw(st.sampled_from(sorted(k for k in message if k != "schema_version")))
        message[key] = draw(st.sampled_from(WRONG_VALUES))
        body = json.dumps(message, ensure_ascii=False).encode()
    elif kind == "version":
        message["schema_version"] = draw(st.sampled_from(WRONG_VERSIONS))
        body = json.dumps(message, ensure_ascii=False).encode()
    elif kind == "huge":
        # Only a comment can arrive over its limit: a larger message between stages is
        # refused by its stream before any stage sees it.
        stage, message = "retriever", golden("retriever")
        size = len(json.dumps(message, ensure_ascii=False).encode())
        message["padding"] = "あ" * draw(st.integers((MAX_PAYLOAD - size) // 3 + 10, MAX_PAYLOAD))
        body = json.dumps(message, ensure_ascii=False).encode()
    else:
        # Invalid UTF-8 in the version field; inside the comment id it loses the letter
        # (test_invalid_utf8_inside_a_json_message_is_dead_lettered).
        marker = "@@ODD@@"
        message["schema_version"] = marker
        raw = json.dumps(message, ensure_ascii=False).encode()
        body = raw.replace(
            marker.encode(), INPUTS[stage][2].removesuffix(".json").encode() + draw(st.sampled_from(BAD_UTF8)), 1
        )
    return stage, body


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Settings]]:
    """Every stage as its own process, with a small payload limit so oversized input is cheap."""
    env = {**CHAOS_ENV, "KOTAE_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD), "KOTAE_LOG_LEVEL": "warning"}
    with environment(env):
        settings = chaos_settings(tmp_path_factory.mktemp("fuzz") / "data", env)
        load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
        stack = Stack(settings)
        asyncio.run(stack.start())
        try:
            yield stack, settings
        finally:
            stack.stop()


_round = iter(range(10**6))


@hsettings(
    max_examples=40 if SLOW else 8,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # each example runs the whole stack: report it, don't shrink it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    bad=st.lists(bad_message(), min_size=1, max_size=6).filter(lambda items: all(is_bad(s, b) for s, b in items)),
    odd=st.sampled_from(ODD_BUT_VALID),
)
def test_every_bad_message_is_dead_lettered_with_a_reason_and_valid_comments_are_answered(
    fuzz_stack: tuple[Stack, Settings], bad: list[tuple[str, bytes]], odd: str
) -> None:
    stack, settings = fuzz_stack
    n = next(_round)
    valid = [
        RawComment(id=f"fuzz-{n}-a", author=f"fuzz-a-{n}", text="保育料っていくらになるの", published_at=AT),
        RawComment(id=f"fuzz-{n}-b", author=f"fuzz-b-{n}", text=odd, published_at=AT),
    ]
    letters, ledger, result = asyncio.run(publish_and_collect(stack.url, settings, bad, valid))

    # Every bad message is on its own stage's dead-letter subject, as poison, with the error and the payload.
    expected = Counter((stage, letter_payload(body)) for stage, body in bad)
    got = Counter((letter.stage, letter.payload) for letter in letters)
    assert got == expected, f"expected letters {expected}, got {got}"
    for letter in letters:
        assert letter.error_type == "poison" and letter.error, letter
        assert letter.subject == INPUTS[letter.stage][0]
    # Valid traffic around it is answered, once, and nothing unchecked is verified.
    assert result.missing == []
    figures = ledger.figures()
    assert figures.lost == 0 and figures.duplicates == 0, ledger.problems()
    assert all(checked(a) for cid in ledger.sent for a in ledger.answers[cid] if a.outcome == "verified")
    assert ledger.final(f"fuzz-{n}-a").outcome == "verified"


async def publish_and_collect(
    url: str, settings: Settings, bad: list[tuple[str, bytes]], valid: list[RawComment]
) -> tuple[list[DeadLetterV1], Any, Any]:
    start = await last_sequence(url, subjects.STREAM_DEADLETTER)
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        half = len(bad) // 2
        for stage, body in bad[:half]:
            await js.publish(INPUTS[stage][0], body)
        replay = asyncio.create_task(run_replay(settings, url, valid, timeout=60))
        for stage, body in bad[half:]:
            await js.publish(INPUTS[stage][0], body)
        result = await replay
    finally:
        await nc.close()
    letters: list[DeadLetterV1] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        letters = [
            DeadLetterV1.model_validate_json(m.data)
            for m in await read_stream(url, subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL, after=start)
        ]
        if len(letters) >= len(bad):
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.3)  # a letter too many would show up now
    letters = [
        DeadLetterV1.model_validate_json(m.data)
        for m in await read_stream(url, subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL, after=start)
    ]
    ledger = await read_ledger(url, [c.id for c in valid])
    return letters, ledger, result


async def test_a_retrieval_bigger_than_the_payload_limit_still_ends_in_an_outcome(
    nats_url: str, loaded_settings: Settings
) -> None:
    """An ordinary question, with the payload limit at 4 KiB (a valid setting; the default 64 KiB is reached the
    same way by a knowledge base whose top_k chunks are long)."""
    settings = loaded_settings.model_copy(update={"max_payload_bytes": 4096})
    question = RawComment(id="long-evidence", author="viewer", text="保育料っていくらになるの", published_at=AT)
    async with running_stages(settings, nats_url):
        await run_replay(settings, nats_url, [question], timeout=30)
        ledger = await read_ledger(nats_url, [question.id])
    assert ledger.figures().lost == 0, ledger.problems()


async def test_invalid_utf8_inside_a_json_message_is_dead_lettered(nats_url: str, loaded_settings: Settings) -> None:
    body = json.dumps({"comment_id": "@@", "stream_id": "default"}).encode().replace(b"@@", b"odd\xed\xa0\x80")
    async with running_stages(loaded_settings, nats_url, stages=("reranker",)):
        nc = await nats.connect(nats_url)
        await nc.jetstream().publish(subjects.RETRIEVAL, body)
        await nc.close()
        letters: list[Any] = []
        deadline = time.monotonic() + 8  # a dozen poison letters would have been written by now
        while not letters and time.monotonic() < deadline:
            letters = await read_stream(nats_url, subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL)
            await asyncio.sleep(0.2)
    assert len(letters) == 1, "the poison message left no dead letter"
    letter = DeadLetterV1.model_validate_json(letters[0].data)
    assert letter.stage == "reranker" and letter.error_type == "poison"
    assert base64.b64decode(letter.payload) == body


async def test_a_comment_the_retriever_gives_up_on_still_gets_a_failed_outcome(
    nats_url: str, loaded_settings: Settings
) -> None:
    """A stream bound to a knowledge base nobody loaded: the retriever retries, then gives up."""
    settings = loaded_settings.model_copy(
        update={"stream_id": "late-stream", "kb_bindings": {"late-stream": "not-loaded-yet"}}
    )
    question = RawComment(id="no-kb-1", author="viewer", text="保育料っていくらになるの", published_at=AT)
    async with running_stages(settings, nats_url):
        result = await run_replay(settings, nats_url, [question], timeout=30)
        await asyncio.sleep(0.5)
        ledger = await read_ledger(nats_url, [question.id])
    assert result.records[question.id]["outcome"] == "failed"
    assert [x.error_type for x in ledger.letters[question.id]] == ["exhausted"]
    assert [a.outcome for a in ledger.answers.get(question.id, [])] == ["failed"], ledger.problems()
