"""A busy chat through ``kotae replay --onair --timing original``: what aired keeps every promise.

The command runs every stage and the on-air stage as processes against a real
nats-server (``KOTAE_NATS_URL``), so after it returns the test reads the on-air
events from the server beside the records the command wrote. The bounded run is
100 comments over about 50 s of chat (played twice as fast); ``KOTAE_SLOW=1``
plays 600 over four minutes at their own pace.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kotae.contracts import ModerationV1, OnAirEventV1, subjects
from kotae.samples.busy_chat import BANNED_AUTHOR, DELETED_AUTHOR, busy_chat, to_jsonl
from tests.factories import kotae, read_all

SLOW = os.environ.get("KOTAE_SLOW") == "1"
MAX_AGE_S = 30.0


@pytest.mark.slow
async def test_a_busy_chat_airs_one_answer_at_a_time_and_keeps_every_rule(
    nats_server: str, tmp_path: Path, sample_kb_path: Path
) -> None:
    n, rate, speed = (600, 2.5, 1.0) if SLOW else (100, 2.0, 2.0)
    chat = tmp_path / "busy.jsonl"
    lines = busy_chat(n, rate_per_s=rate)
    chat.write_text(to_jsonl(lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    env = {
        "KOTAE_NATS_URL": nats_server,
        "KOTAE_ONAIR_MAX_AGE_S": str(MAX_AGE_S),
        "KOTAE_ONAIR_IDLE_S": "0",
        "KOTAE_MERGE_WINDOW_S": "10",  # repeats a little apart reach the voice: it must not air them twice
        "KOTAE_ADMIT_PER_MINUTE": "0",
    }
    run = kotae(
        "replay", str(chat), "--kb", str(sample_kb_path), "--onair", "--timing", "original", "--speed", str(speed),
        "--out", str(out), "--timeout", "600", data=tmp_path / "data", env=env, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    records = {r["comment_id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    events = [OnAirEventV1.model_validate(m["data"]) for m in await read_all(nats_server, subjects.ONAIR_ALL, idle=1.0)]
    comments = {line["id"]: line for line in lines if "moderation" not in line}
    verified = [cid for cid, r in records.items() if r["outcome"] == "verified"]
    assert len(records) == len(comments) and len(verified) >= 20

    by_comment: dict[str, list[OnAirEventV1]] = {}
    for event in events:
        by_comment.setdefault(event.comment_id, []).append(event)
    finals = {cid: [e for e in evs if e.event in subjects.AIR_OUTCOMES] for cid, evs in by_comment.items()}

    # Every verified answer ends in exactly one air outcome, and its record says which.
    for cid in verified:
        assert len(finals.get(cid, [])) == 1, (cid, finals.get(cid))
        assert records[cid]["air"]["outcome"] == finals[cid][0].event
    # A comment that was not verified airs nothing, unless it is a Super Chat: that one is thanked.
    for cid, record in records.items():
        if record["outcome"] != "verified" and record["outcome"] != "dropped":
            paid = comments[cid].get("superchat") is not None
            assert (record["air"] is not None) is paid, (cid, record["outcome"], record["air"])
            if paid:
                assert {e.kind for e in by_comment[cid]} == {"thanks"}, (cid, by_comment[cid])
        elif record["outcome"] == "dropped":
            assert record["air"] is None, cid
    aired = [e for e in events if e.event == "started" and e.kind == "answer"]
    assert len(aired) >= 3

    _never_two_on_air([e for e in events if e.event == "started" and e.kind in ("answer", "thanks")], finals)
    _super_chats_before_others_waiting(aired, by_comment, finals)
    moderation = [ModerationV1.model_validate(m["data"]) for m in await read_all(nats_server, subjects.MODERATION_ALL)]
    _withdrawn_never_air(moderation, by_comment, finals, comments)
    _repeats_air_once(comments, aired)
    for start in aired:  # nothing airs older than the max age
        assert start.started_at is not None and start.received_at is not None
        assert (start.started_at - start.received_at).total_seconds() <= MAX_AGE_S + 0.5, start.comment_id
    outcomes = sorted({r["air"]["outcome"] for r in records.values() if r["air"]})
    print(f"\n{len(verified)} verified, {len(aired)} aired; outcomes {outcomes}")


def _final_at(finals: dict[str, list[OnAirEventV1]], cid: str) -> datetime:
    return finals[cid][0].created_at


def _never_two_on_air(aired: list[OnAirEventV1], finals: dict[str, list[OnAirEventV1]]) -> None:
    spans = sorted((s.started_at, _final_at(finals, s.comment_id), s.comment_id) for s in aired)  # type: ignore[type-var]
    for (_, end, cid), (start, _, nxt) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"{nxt} went on air before {cid} came off"


def _super_chats_before_others_waiting(
    aired: list[OnAirEventV1], by_comment: dict[str, list[OnAirEventV1]], finals: dict[str, list[OnAirEventV1]]
) -> None:
    """When a non-paid answer was chosen, no Super Chat was waiting (queued then, still without an outcome)."""
    paid = [cid for cid, evs in by_comment.items() if evs[0].tier == "superchat" and evs[0].kind == "answer"]
    previous_end: datetime | None = None
    for start in sorted(aired, key=lambda e: e.started_at):  # type: ignore[arg-type, return-value]
        queued = next(e.created_at for e in by_comment[start.comment_id] if e.event == "queued")
        chosen_at = max(queued, previous_end) if previous_end else queued
        if start.tier != "superchat":
            for cid in paid:
                q = next((e.created_at for e in by_comment[cid] if e.event == "queued"), None)
                if q is None or q >= chosen_at - timedelta(milliseconds=50):
                    continue
                assert _final_at(finals, cid) <= start.started_at, f"{start.comment_id} aired while {cid} (paid) waited"  # type: ignore[operator]
        previous_end = _final_at(finals, start.comment_id)


def _withdrawn_never_air(
    moderation: list[ModerationV1],
    by_comment: dict[str, list[OnAirEventV1]],
    finals: dict[str, list[OnAirEventV1]],
    comments: dict[str, dict],
) -> None:
    """Nothing of a deleted comment or a banned viewer starts after the moderator acted; what was on air then
    came off as withdrawn."""
    assert {m.action for m in moderation} == {"message_deleted", "user_banned"}
    for mod in moderation:
        if mod.action == "message_deleted":
            targets = [mod.comment_id]
            assert comments[mod.comment_id]["author"] == DELETED_AUTHOR  # type: ignore[index]
        else:
            assert mod.author == BANNED_AUTHOR
            targets = [cid for cid, c in comments.items() if c["author"] == BANNED_AUTHOR]
        for cid in targets:
            for start in (e for e in by_comment.get(cid or "", []) if e.event == "started"):
                assert start.started_at is not None and start.started_at < mod.created_at, (
                    f"{cid} aired after {mod.action}"
                )
                if _final_at(finals, cid or "") > mod.created_at:
                    assert finals[cid or ""][0].event == "withdrawn", (cid, finals[cid or ""])


def _repeats_air_once(comments: dict[str, dict], aired: list[OnAirEventV1]) -> None:
    texts: dict[str, list[str]] = {}
    for start in aired:
        texts.setdefault(comments[start.comment_id]["text"], []).append(start.comment_id)
    twice = {text: cids for text, cids in texts.items() if len({c for c in cids}) > 1}
    assert not twice, f"the same question aired more than once: {twice}"
