"""kotae.services.ingest.handlers: what ingest puts on a real bus."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from opentelemetry.sdk.trace import TracerProvider

from kotae.bus.topology import ensure_streams
from kotae.contracts import SuperChat
from kotae.providers import ChatModel
from kotae.runtime import make_broker
from kotae.services.ingest.handlers import Ingestor
from kotae.services.ingest.sources import RawComment
from kotae.services.ingest.triage import Triage
from kotae.settings import Settings
from tests.factories import stored
from tests.fakes.model_server import FakeModelServer

T0 = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


async def ingest(settings: Settings, url: str, triage: Triage, raws: list[RawComment]) -> list:
    broker = make_broker(settings.model_copy(update={"nats_url": url}))
    await broker.connect()
    try:
        await ensure_streams(broker.connection.jetstream(), settings)
        ingestor = Ingestor(broker, triage, TracerProvider().get_tracer("test"), session="live")
        return await ingestor.ingest_many(raws)
    finally:
        await broker.stop()


async def test_a_batch_is_published_super_chat_first_with_each_drop_explained(
    nats_url: str, settings: Settings
) -> None:
    raws = [
        RawComment(id="q1", text="給食費の無償化はいつから始まるの？", published_at=T0),
        RawComment(id="c1", text="草", published_at=T0 + timedelta(seconds=1)),
        RawComment(id="q2", text="給食費の無償化っていつからですか", published_at=T0 + timedelta(seconds=2)),
        RawComment(
            id="p1",
            text="港の再開発はいくら？",
            published_at=T0 + timedelta(seconds=3),
            superchat=SuperChat(amount=500, currency="JPY"),
        ),
        RawComment(id="q1", text="給食費の無償化はいつから始まるの？", published_at=T0),  # a resend in the same page
    ]
    triage = Triage(stream_id="s1", kb="default", source="youtube")
    results = await ingest(settings, nats_url, triage, raws)
    assert [(r.comment_id, r.status) for r in results] == [
        ("q1", "admitted"),
        ("c1", "dropped"),
        ("q2", "dropped"),
        ("p1", "admitted"),
        ("q1", "resend"),
    ]
    comments, answers = await stored(nats_url)
    assert [c.comment_id for c in comments] == ["p1", "q1"]  # the paid comment reaches the retriever first
    by_id = {a.comment_id: a for a in answers}
    assert by_id["q2"].outcome == "dropped" and by_id["q2"].merged_into == "q1" and "q1" in (by_id["q2"].reason or "")
    assert by_id["c1"].reason.startswith("not_a_question") and by_id["c1"].methods == {"ingest": "question_rules"}


async def test_a_failing_triage_model_is_named_in_the_dropped_outcome(nats_url: str, settings: Settings) -> None:
    with FakeModelServer(default="500") as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|triage", setting="KOTAE_TRIAGE_MODEL", timeout_s=5.0)
        triage = Triage(stream_id="s1", kb="default", source="replay", model=model)
        await ingest(
            settings, nats_url, triage, [RawComment(id="c1", text="草"), RawComment(id="q1", text="保育料はいくら？")]
        )
    comments, answers = await stored(nats_url)
    assert [c.comment_id for c in comments] == ["q1"] and comments[0].triage == "question_rules"
    (dropped,) = answers
    assert dropped.methods == {"ingest": "question_rules"} and dropped.degraded
    assert "triage model failed" in (dropped.degraded_reason or "")


class FlakyBroker:
    """A broker whose stream has no leader for the first ``failures`` publishes (a node lost)."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.published: list[tuple[str, dict]] = []

    async def publish(self, payload: bytes, subject: str, **options: object) -> object:
        if self.failures:
            self.failures -= 1
            raise self.error
        self.published.append((subject, options["headers"]))  # type: ignore[arg-type]

        class Ack:
            duplicate = False

        return Ack()


async def test_a_publish_during_a_leader_election_is_retried_with_the_same_message_id() -> None:
    import nats.js.errors

    broker = FlakyBroker(2, nats.js.errors.NoStreamResponseError())
    ingestor = Ingestor(broker, Triage(stream_id="s1", kb="default", source="replay"), TracerProvider().get_tracer("t"))  # type: ignore[arg-type]
    (result,) = await ingestor.ingest_many([RawComment(id="c1", text="草")])
    assert result.status == "dropped" and broker.failures == 0
    assert len(broker.published) == 1 and broker.published[0][1]["Nats-Msg-Id"].startswith("c1:s1:live:ingest:")


async def test_a_bus_that_stays_away_fails_the_publish_after_the_deadline() -> None:
    import nats.js.errors
    import pytest

    broker = FlakyBroker(10**6, nats.js.errors.NoStreamResponseError())
    ingestor = Ingestor(broker, Triage(stream_id="s1", kb="default", source="replay"), TracerProvider().get_tracer("t"))  # type: ignore[arg-type]
    ingestor.publish_deadline_s = 0.5
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await ingestor.ingest_many([RawComment(id="c1", text="草")])
