"""The answer cache on a real nats-server with every stage running: hits, misses, a knowledge-base change, a
new show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats

from kotae.bus.topology import ensure_streams_at
from kotae.contracts import Evidence, subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import KBRecord, load_records
from kotae.knowledge.store import KnowledgeStore, chunk_record
from kotae.replay import ReplayResult, run_replay
from kotae.services.evaluator.report import collect_evaluations, render_report
from kotae.services.ingest.answer_cache import AnswerCache
from kotae.services.ingest.current_show import show_key
from kotae.services.ingest.sources import RawComment
from kotae.services.ingest.triage import MergeKey
from kotae.services.onair.lease import key_for
from kotae.services.onair.service import open_bucket
from kotae.services.onair.shows import establish
from kotae.settings import Settings
from tests.factories import comment, read_all, verified_answer
from tests.integration.stages import running_stages

AT = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
QUESTION = "保育料っていくらになるの"


def asked(cid: str, text: str, minutes: float) -> RawComment:
    # Each comment well after the merge window: triage alone would answer it again.
    return RawComment(id=cid, author=f"viewer-{cid}", text=text, published_at=AT + timedelta(minutes=minutes))


async def ask(settings: Settings, url: str, comment: RawComment, **kw: object) -> ReplayResult:
    # One show: the same ingest session for every comment, as a live source keeps it.
    result = await run_replay(settings, url, [comment], timeout=60, session="show-1", **kw)  # type: ignore[arg-type]
    assert result.missing == []
    return result


async def retrieved(url: str) -> set[str]:
    return {m["data"]["comment_id"] for m in await read_all(url, subjects.RETRIEVAL)}


async def test_a_question_asked_again_is_answered_from_the_cache_and_a_different_one_is_not(
    nats_url: str, loaded_settings: Settings
) -> None:
    async with running_stages(loaded_settings, nats_url):
        original = await ask(loaded_settings, nats_url, asked("q1", QUESTION, 0))
        again = await ask(loaded_settings, nats_url, asked("q2", QUESTION + "？", 10), wait_for_evaluations=20)
        other = (await ask(loaded_settings, nats_url, asked("q3", "保育園の待機児童はどうなるの", 20))).answers["q3"]
        evaluations = await collect_evaluations(loaded_settings, nats_url)
    first = original.answers["q1"]
    assert first.outcome == "verified" and first.cached_from is None
    cached = again.answers["q2"]
    # Verified, with the original's answer, citations and verdict, and the link back to it.
    assert cached.outcome == "verified"
    assert cached.methods["cache"] == "cached"
    assert (cached.answer, cached.citations, cached.verdict) == (first.answer, first.citations, first.verdict)
    assert cached.cached_from is not None
    assert cached.cached_from.comment_id == "q1"
    assert cached.cached_from.trace_id == original.records["q1"]["trace_id"]
    assert cached.trace_id == again.records["q2"]["trace_id"] != cached.cached_from.trace_id
    assert cached.model_calls == [] and cached.comment.comment_id == "q2"
    # No retrieval for it, while the first and the different question went through the pipeline.
    assert await retrieved(nats_url) == {"q1", "q3"}
    assert other.cached_from is None
    # The evaluator scored the cached answer, and the report counts it as cached.
    assert again.evaluations["q2"].cached_from == "q1"
    assert again.evaluations["q2"].faithfulness.value is not None
    assert "cached 1;" in render_report(evaluations)


async def test_a_new_version_of_a_cited_document_empties_what_it_touched(
    nats_url: str, loaded_settings: Settings, sample_kb_path: Path
) -> None:
    async with running_stages(loaded_settings, nats_url):
        first = (await ask(loaded_settings, nats_url, asked("v1", QUESTION, 0))).answers["v1"]
        cited = {c.doc_id for c in first.citations}
        records = load_records(sample_kb_path)
        changed = [r.model_copy(update={"version": "2027.2"}) if r.id in cited else r for r in records]
        load_knowledge_base(changed, "default", loaded_settings)
        again = (await ask(loaded_settings, nats_url, asked("v2", QUESTION, 10))).answers["v2"]
        third = (await ask(loaded_settings, nats_url, asked("v3", QUESTION, 20))).answers["v3"]
    assert first.outcome == "verified" and cited
    # The next identical question runs the pipeline again, on the new version ...
    assert again.cached_from is None and again.outcome == "verified"
    assert {d.version for d in again.docs if d.doc_id in cited} == {"2027.2"}
    # ... and its answer is the one kept from then on.
    assert third.cached_from is not None and third.cached_from.comment_id == "v2"
    assert await retrieved(nats_url) == {"v1", "v2"}


async def test_with_the_cache_off_every_question_runs_the_pipeline(nats_url: str, loaded_settings: Settings) -> None:
    off = loaded_settings.model_copy(update={"answer_cache": False})
    async with running_stages(off, nats_url):
        await ask(off, nats_url, asked("o1", QUESTION, 0))
        again = (await ask(off, nats_url, asked("o2", QUESTION, 10))).answers["o2"]
    assert again.cached_from is None and "cache" not in again.methods
    assert await retrieved(nats_url) == {"o1", "o2"}


def test_questions_the_merge_rule_keeps_apart_are_never_one_cached_question() -> None:
    # The cache matches by triage's own rule: one party, two things asked.
    a, b = MergeKey.of("日本共産党の略称は?"), MergeKey.of("日本共産党の機関紙は?")
    assert not a.same_question(b, 0.5)
    assert a.same_question(MergeKey.of("日本共産党の略称は"), 0.5)


async def test_the_cache_answers_only_what_the_merge_rule_calls_the_same_question(
    nats_url: str, settings: Settings
) -> None:
    """The cache on its own, against a real nats-server: one party, two things asked (as in triage's tests)."""
    record = KBRecord(
        id="jcp", kind="doc", title="日本共産党", text="日本共産党の略称は共産党です。機関紙はしんぶん赤旗です。"
    )
    KnowledgeStore(settings.kb_dir, "default").load([record])
    chunk = chunk_record(record)[0]
    evidence = Evidence(doc_id="jcp", chunk_id=chunk.chunk_id, text=chunk.text)
    await ensure_streams_at(nats_url, settings)
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        opened = dict(stream_id="stream-1", kb="default", threshold=0.5)
        cache = await AnswerCache.open(js, settings, session="show-1", **opened)  # type: ignore[arg-type]
        asked = comment("a1", "日本共産党の略称は？")
        cache.expect(asked)
        verified = verified_answer("a1", asked.text, "日本共産党の略称は共産党です[1]。", docs=[evidence])
        await js.publish(
            subjects.answer("verified"), verified.model_copy(update={"comment": asked}).model_dump_json().encode()
        )
        await cache.close()  # returns once the verified answer is kept
        assert await cache.answer_for(comment("a2", "日本共産党の機関紙は？"), None) is None
        hit = await cache.answer_for(comment("a3", "日本共産党の略称は"), "trace-a3")
        assert hit is not None and hit.cached_from is not None and hit.cached_from.comment_id == "a1"
        assert (hit.comment_id, hit.trace_id, hit.citations) == ("a3", "trace-a3", verified.citations)
        # Kept in the bucket: a later process of the same show finds it; another session's does not.
        later = await AnswerCache.open(js, settings, session="show-1", **opened)  # type: ignore[arg-type]
        assert await later.answer_for(comment("a4", "日本共産党の略称は？"), None) is not None
        other = await AnswerCache.open(js, settings, session="replay-2", **opened)  # type: ignore[arg-type]
        assert await other.answer_for(comment("a5", "日本共産党の略称は？"), None) is None
        await later.close()
        await other.close()
    finally:
        await nc.close()


async def begin_show(settings: Settings, url: str, show_id: str) -> None:
    """The on-air stage begins ``show_id`` (``kotae up --onair --show ID``), as its own code writes it."""
    nc = await nats.connect(url)
    try:
        kv = await open_bucket(nc.jetstream(), settings)
        await establish(kv, key_for("show", settings.stream_id), show_id, first_since=datetime.now(UTC))
    finally:
        await nc.close()


async def test_an_answer_cached_in_one_show_is_not_served_in_the_next(nats_url: str, loaded_settings: Settings) -> None:
    async with running_stages(loaded_settings, nats_url):
        await begin_show(loaded_settings, nats_url, "show-a")
        first = (await ask(loaded_settings, nats_url, asked("a1", QUESTION, 0))).answers["a1"]
        again = (await ask(loaded_settings, nats_url, asked("a2", QUESTION + "？", 10))).answers["a2"]
        await begin_show(loaded_settings, nats_url, "show-b")
        in_b = (await ask(loaded_settings, nats_url, asked("b1", QUESTION, 20))).answers["b1"]
        again_in_b = (await ask(loaded_settings, nats_url, asked("b2", QUESTION + "？", 30))).answers["b2"]
    assert first.outcome == "verified" and again.cached_from is not None and again.cached_from.comment_id == "a1"
    # Show B answers afresh (the pipeline runs), then from its own cache.
    assert in_b.outcome == "verified" and in_b.cached_from is None
    assert again_in_b.cached_from is not None and again_in_b.cached_from.comment_id == "b1"
    assert await retrieved(nats_url) == {"a1", "b1"}


def test_ingest_spells_the_show_key_as_the_on_air_stage_does() -> None:
    for stream in ("stream-1", "UC_x=y", "a stream/with spaces", "x" * 80):
        assert show_key(stream) == key_for("show", stream)


async def test_closing_while_the_bus_elects_a_leader_never_fails_the_run() -> None:
    """A node lost at the end of a replay: the cache's last look at its consumer times out. The run's
    outcomes have all arrived; closing says so in the log and lets go of the subscription."""
    import nats.errors

    from kotae.services.ingest.answer_cache import AnswerCache

    class ElectingSubscription:  # what nats-py gives while the stream has no leader
        unsubscribed = False

        async def consumer_info(self) -> None:
            raise nats.errors.TimeoutError

        async def unsubscribe(self) -> None:
            self.unsubscribed = True

    cache = AnswerCache(None, None, stream_id="s", kb="default", session="replay-1", threshold=0.5)  # type: ignore[arg-type]
    sub = ElectingSubscription()
    cache._sub, cache._expected = sub, {"m-1": None}
    await cache.close(timeout=1.0)
    assert sub.unsubscribed and cache._sub is None
