"""Shows: a rehearsal's answers never air in the show after it (a real nats-server, the real stage and voice)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from kotae.contracts import subjects
from tests.factories import verified_answer
from tests.services.onair.conftest import OnAirFactory


def now() -> datetime:
    return datetime.now(UTC)


async def test_a_show_started_after_a_rehearsal_airs_none_of_its_answers(onair_stage: OnAirFactory) -> None:
    harness = await onair_stage(onair_show="rehearsal")
    await harness.answer(
        verified_answer("r-aired", "保育料はいくら？", "月額1万5千円が上限です[1]。", received_at=now())
    )
    assert (await harness.finals("r-aired", timeout=30))["r-aired"].event == "finished"
    await harness.command("pause")  # what the rehearsal verified and never aired, still young enough to air
    for cid in ("r-left-1", "r-left-2"):
        await harness.answer(verified_answer(cid, f"{cid}の質問は？", "第2子以降は無料です[1]。", received_at=now()))
    await harness.until(lambda: harness.of("r-left-2", "queued"), 20, "the rehearsal's answers queued")
    await harness.stop_stage()

    harness.settings = harness.settings.model_copy(update={"onair_show": "live"})
    await harness.start_stage()
    # The rehearsal aired this question; the live audience never heard it, so it airs (not already_aired).
    await harness.answer(
        verified_answer("live-1", "保育料はいくら？", "月額1万5千円が上限です[1]。", received_at=now())
    )
    finals = await harness.finals("live-1", timeout=30)
    assert finals["live-1"].event == "finished" and finals["live-1"].show_id == "live"
    await asyncio.sleep(1.5)  # time enough for anything left waiting to air, had it been queued in this show
    for cid in ("r-left-1", "r-left-2"):
        assert not harness.of(cid, "started"), f"{cid}, verified in the rehearsal, aired in the live show"
        assert all(e.show_id == "rehearsal" for e in harness.of(cid))
    status = await harness.bucket_status()
    assert status is not None and status["show"]["id"] == "live"
    assert status["mode"]["paused"] is False  # the rehearsal's pause belongs to the rehearsal
    assert [item["comment_id"] for item in status["queue"]] == []

    # Continuing the live show (a restart with --show live) keeps what waits in it.
    await harness.command("pause")
    await harness.answer(verified_answer("live-2", "バスの運賃は？", "運賃は無料です[1]。", received_at=now()))
    await harness.until(lambda: harness.of("live-2", "queued"), 20, "live-2 queued")
    await harness.stop_stage()
    await harness.start_stage()
    await harness.command("resume")
    finals = await harness.finals("live-2", timeout=30)
    assert finals["live-2"].event == "finished" and finals["live-2"].show_id == "live"
    assert all(e.event != "started" for cid in ("r-left-1", "r-left-2") for e in harness.of(cid))
    assert set(subjects.AIR_OUTCOMES) >= {e.event for e in harness.events if e.event not in ("queued", "started")}
