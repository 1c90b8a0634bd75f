"""The clarify round trip across two comments, through a real nats-server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.settings import Settings
from tests.factories import read_all
from tests.integration.stages import running_stages

AT = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)


def said(cid: str, author: str, text: str, seconds: int) -> RawComment:
    return RawComment(id=cid, author=author, text=text, published_at=AT + timedelta(seconds=seconds))


async def test_a_reply_to_an_ask_back_is_answered_from_the_stored_candidates(
    nats_url: str, loaded_settings: Settings
) -> None:
    async with running_stages(loaded_settings, nats_url):
        # Three policies of the sample make something free: which one does the viewer mean?
        first = await run_replay(loaded_settings, nats_url, [said("q1", "みなと民", "無料になるの？", 0)], timeout=30)
        asked = first.records["q1"]
        assert asked["outcome"] == "clarify"
        assert "コミュニティバス" in asked["answer"]

        # Another viewer's line is not a reply to someone else's ask-back. Triage keeps keyword-only
        # lines, so it reaches retrieval, which takes it on its own.
        await run_replay(loaded_settings, nats_url, [said("x1", "通りすがり", "運賃のほうです", 5)], timeout=30)

        reply = await run_replay(loaded_settings, nats_url, [said("q2", "みなと民", "バスのほうです", 10)], timeout=30)
    answered = reply.records["q2"]
    assert answered["outcome"] == "verified", answered
    assert answered["citations"][0]["doc_id"] == "bus-fare-2027"
    assert "無料" in answered["answer"]
    retrievals = [m["data"] for m in await read_all(nats_url, "kotae.retrieval.v1", idle=0.2)]
    clarified = [r for r in retrievals if r["comment_id"] == "q2"]
    stranger = [r for r in retrievals if r["comment_id"] == "x1"]
    assert stranger and stranger[0]["clarified_from"] is None
    assert not stranger[0]["comment"]["normalized"].startswith("無料になるの")
    assert clarified and clarified[0]["clarified_from"] == "q1"
    assert clarified[0]["method"] == "hybrid+clarified"
    # The question answered is the original one joined with the reply.
    assert clarified[0]["comment"]["normalized"].startswith("無料になるの")
