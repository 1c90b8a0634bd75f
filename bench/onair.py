"""On air: how fast a free voice starts an answer, how much airtime a busy chat uses, what airs per minute.

    nice python bench/onair.py [--rates 0.5,2,8] [--minutes 2] [--free 10] [--write]
    nice python bench/onair.py --model-calls 1000 [--model-rate 2] [--model-speed 4] [--write]

On this machine, with the embedded stack (nats-server, every stage its own
process, one on-air process with the offline voice) and the bundled sample
knowledge base:

1. **voice** — the offline voice's real-time factor (synthesis seconds ÷ audio
   seconds) on sample answers, measured by ``bench/speech.py``'s own code.
2. **free voice** — ``--free`` answerable sample questions, each sent when the
   previous one has left the air and the voice is idle: verified → on air
   (``started_at`` − ``verified_at``) p50/p95. The answer cannot be synthesised
   before it exists, so this is the voice's synthesis of its first sentence (the
   rest is made while that one plays) plus the stage's own steps; pre-synthesis
   is what keeps the *next* answer ready (below).
3. **busy chat** — at each of ``--rates`` comments a second, ``--minutes`` of
   ``kotae.samples.busy_chat`` through ``kotae replay --onair --timing original``
   (a fresh stack each, so one rate's airings are no repeats for the next):
   comments, verified answers and aired answers per minute, the share of time
   something was on air while an answer waited (airtime used while the queue is
   non-empty), the gap between answers while one waited, and how the rest ended.

4. **model calls** (``--model-calls N``, instead of 1–3) — ``N`` comments of the busy
   chat at ``--model-rate`` a second of chat time, replayed ``--model-speed`` times
   faster than they were posted (merging and staleness read chat time), through
   the stages with hosted-model settings for the reranker, generator and verifier
   pointed at the local fake model server (``tests/fakes/model_server.py``): the
   requests that server answered per 1,000 comments, with ingest's answer cache
   off and on, and how the comments ended.

``--write`` puts the tables into docs/benchmarks.md, between this bench's markers
(the model-call table between markers of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from speech import answers as sample_answers, timings as measure_voice  # noqa: E402

from kotae.bus.permissions import REPLAY  # noqa: E402
from kotae.contracts import OnAirEventV1, subjects  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import load_records  # noqa: E402
from kotae.replay import ReplayResult, run_replay  # noqa: E402
from kotae.samples.busy_chat import busy_chat, sample_questions  # noqa: E402
from kotae.services.ingest.sources import RawComment, RawModeration  # noqa: E402
from kotae.services.onair.speech import speech_text  # noqa: E402
from kotae.services.onair.speech.offline import OfflineVoice  # noqa: E402
from kotae.settings import load_settings  # noqa: E402
from kotae.stack import STAGES, Stack  # noqa: E402

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## On air (`bench/onair.py`)"
BEGIN, END = "<!-- bench/onair.py --write: begin -->", "<!-- bench/onair.py --write: end -->"
SAMPLE_KB = ROOT / "kotae" / "samples" / "kb"
CALLS_SECTION = "## Model calls with the answer cache (`bench/onair.py --model-calls`)"
CALLS_BEGIN = "<!-- bench/onair.py --model-calls --write: begin -->"
CALLS_END = "<!-- bench/onair.py --model-calls --write: end -->"
#: The bench's own on-air settings: no FAQ while the chat is quiet (it would count as airtime).
ENV = {"KOTAE_ONAIR_IDLE_S": "0", "KOTAE_ONAIR_HTTP_PORT": "0", "KOTAE_LOG_LEVEL": "warning"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


# --- 1. the voice --------------------------------------------------------------------------


async def voice_table(limit: int) -> str:
    raw = list(sample_answers(SAMPLE_KB))
    raw = [a for lang in ("ja", "en") for a in [x for x in raw if x[0] == lang][:limit]]
    said = [(lang, speech_text(text, lang)) for lang, text in raw]  # type: ignore[arg-type]
    voice = OfflineVoice()
    for lang in ("ja", "en"):  # the dictionaries load on the first call
        await voice.synthesize("準備です。" if lang == "ja" else "Ready.", lang)  # type: ignore[arg-type]
    rows, _ = await measure_voice(voice, said, 1)
    voice.close()
    lines = [
        "| voice | answers | RTF p50 | RTF p95 | audio p50 (s) | synthesis p50 (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {len(row['rtf'])} | {pct(row['rtf'], 0.5):.3f} | {pct(row['rtf'], 0.95):.3f} | "
            f"{pct(row['audio'], 0.5):.1f} | {pct(row['synth'], 0.5):.2f} |"
        )
    return "\n".join(lines)


# --- the stack -----------------------------------------------------------------------------


async def with_stack(work: Any) -> Any:
    """A fresh embedded stack with the on-air stage and the sample knowledge base, for one measurement."""
    for name, value in ENV.items():
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory(prefix="kotae-onair-bench-") as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data")
        load_knowledge_base(load_records(SAMPLE_KB), settings.kb, settings)
        stack = Stack(settings, stages=(*STAGES, "onair"), client=REPLAY)
        await stack.start()
        try:
            return await work(stack)
        finally:
            stack.stop()


def events_of(result: ReplayResult) -> list[OnAirEventV1]:
    return [e for events in (result.air or {}).values() for e in events]


# --- 2. a free voice -------------------------------------------------------------------------


async def free_voice(n: int) -> tuple[list[float], list[int]]:
    """verified → on air, and each answer's audio, with the voice idle whenever an answer arrives."""
    texts = sample_questions()[:n]

    async def run(stack: Stack) -> tuple[list[float], list[int]]:
        waits, audio = [], []
        for i, text in enumerate(texts):
            comment = RawComment(id=f"free-{i}", author=f"viewer{i}", text=text)
            result = await run_replay(stack.settings_for(), stack.address, [comment], timeout=120, onair=True)
            events = events_of(result)
            started = [e for e in events if e.event == "started"]
            final = next((e for e in reversed(events) if e.event in subjects.AIR_OUTCOMES), None)
            if started and started[0].verified_at and started[0].started_at:
                waits.append((started[0].started_at - started[0].verified_at).total_seconds())
                # The whole answer's audio is on its final event (started carries its first sentence's).
                audio.append((final.audio_ms if final else None) or started[0].audio_ms or 0)
            await asyncio.sleep(1.0)  # the voice idle before the next arrives
        return waits, audio

    return await with_stack(run)


# --- 3. a busy chat --------------------------------------------------------------------------


def _union(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif end > start:
            merged.append((start, end))
    return merged


def _overlap(a: list[tuple[datetime, datetime]], b: list[tuple[datetime, datetime]]) -> float:
    total = 0.0
    for s1, e1 in a:
        for s2, e2 in b:
            lo, hi = max(s1, s2), min(e1, e2)
            if hi > lo:
                total += (hi - lo).total_seconds()
    return total


def airtime(events: list[OnAirEventV1]) -> dict[str, Any]:
    """Airtime used while an answer waited, and the gaps between answers meanwhile."""
    by_key: dict[str, list[OnAirEventV1]] = {}
    for e in events:
        by_key.setdefault(e.answer_message_id or e.comment_id, []).append(e)
    waiting, on_air = [], []
    for evs in by_key.values():
        queued = next((e.created_at for e in evs if e.event == "queued"), None)
        started = [e for e in evs if e.event == "started"]
        final = next((e.created_at for e in evs if e.event in subjects.AIR_OUTCOMES), None)
        if queued is None or final is None:
            continue
        first_start = started[0].started_at if started else None
        waiting.append((queued, first_start or final))
        for s in started:
            on_air.append((s.started_at, final))
    busy = _union(waiting)
    air = _union([(s, e) for s, e in on_air if s and e])
    span = sum((e - s).total_seconds() for s, e in busy)
    gaps = []
    for (_, end), (start, _) in zip(air, air[1:], strict=False):
        if any(s <= end < e for s, e in busy):  # an answer waited when this one ended
            gaps.append((start - end).total_seconds())
    return {"waiting_s": span, "used": _overlap(busy, air) / span if span else float("nan"), "gaps": gaps}


async def busy(rate: float, minutes: float) -> dict[str, Any]:
    lines = busy_chat(max(10, round(rate * 60 * minutes)), rate_per_s=rate, seed=int(rate * 1000) + 7)
    items = [RawModeration.model_validate(x) if "moderation" in x else RawComment.model_validate(x) for x in lines]
    chat_s = (lines[-1]["published_at"] - lines[0]["published_at"]).total_seconds()

    async def run(stack: Stack) -> ReplayResult:
        return await run_replay(
            stack.settings_for(), stack.address, items, timeout=900, onair=True, timing="original", speed=1.0
        )

    started = time.monotonic()
    result: ReplayResult = await with_stack(run)
    events = events_of(result)
    outcomes = Counter(e.event for e in events if e.event in subjects.AIR_OUTCOMES)
    # Per minute of the chat itself (first to last comment ingested): what was verified then, and what
    # went on air then; the queue draining after the chat ended is not counted.
    received = [a.comment.created_at for a in result.answers.values()]
    start, end = min(received), max(received)
    minutes = max((end - start).total_seconds(), 1.0) / 60
    verified = [a for a in result.answers.values() if a.outcome == "verified"]
    in_window = sum(1 for a in verified if start <= a.created_at <= end)
    aired = sum(1 for e in events if e.event == "started" and e.started_at and start <= e.started_at <= end)
    return {
        "rate": rate,
        "comments": len(result.records),
        "chat_s": chat_s,
        "minutes": minutes,
        "verified": len(verified),
        "verified_per_min": in_window / minutes,
        "aired_per_min": aired / minutes,
        "outcomes": outcomes,
        "took_s": time.monotonic() - started,
        **airtime(events),
    }


def busy_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| chat rate (comments/s) | comments | verified | verified / min | aired / min | "
        "airtime used while answers waited | gap p50 / p95 (s) | final outcomes of the verified answers |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        rest = ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes"].items()))
        lines.append(
            f"| {r['rate']:g} | {r['comments']} | {r['verified']} | {r['verified_per_min']:.1f} | "
            f"{r['aired_per_min']:.1f} | {r['used']:.3f} ({r['waiting_s']:.0f} s waited) | "
            f"{pct(r['gaps'], 0.5):.2f} / {pct(r['gaps'], 0.95):.2f} | {rest} |"
        )
    return "\n".join(lines)


# --- 4. model calls, with the answer cache off and on ---------------------------------------------


async def model_calls(n: int, rate: float, speed: float, cache: bool) -> dict[str, Any]:
    """The fake model server's requests while ``n`` busy-chat comments are answered, the cache ``cache``."""
    from tests.fakes.model_server import FakeModelServer, stage_responder

    lines = busy_chat(n, rate_per_s=rate, seed=int(rate * 1000) + 7)
    items = [RawModeration.model_validate(x) if "moderation" in x else RawComment.model_validate(x) for x in lines]
    with FakeModelServer(responder=stage_responder) as fake, tempfile.TemporaryDirectory(prefix="kotae-calls-") as tmp:
        base = f"compatible:{fake.url}/v1|"
        env = {
            "KOTAE_RERANKER_MODEL": base + "ranker",
            "KOTAE_GENERATOR_MODEL": base + "writer",
            "KOTAE_VERIFIER_MODEL": base + "checker",
            "KOTAE_ANSWER_CACHE": "true" if cache else "false",
            "KOTAE_LOG_LEVEL": "warning",
        }
        os.environ.update(env)
        settings = load_settings(data_dir=Path(tmp) / "data")
        load_knowledge_base(load_records(SAMPLE_KB), settings.kb, settings)
        stack = Stack(settings, client=REPLAY, env=env)
        await stack.start()
        started = time.monotonic()
        try:
            result = await run_replay(
                stack.settings_for(), stack.address, items, timeout=900, timing="original", speed=speed
            )
        finally:
            stack.stop()
        requests = len(fake.requests)
    answers = list(result.answers.values())
    cached = sum(1 for a in answers if a.cached_from is not None)
    comments = len(result.records)
    return {
        "cache": cache,
        "comments": comments,
        "requests": requests,
        "per_1000": 1000 * requests / max(comments, 1),
        "carried": sum(len(a.model_calls) for a in answers),
        "outcomes": Counter(a.outcome for a in answers),
        "cached": cached,
        "merged": sum(1 for a in answers if a.merged_into),
        "took_s": time.monotonic() - started,
    }


def calls_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| answer cache | comments | model requests | per 1,000 comments | verified (of them cached) | "
        "merged by triage | other outcomes | wall time (s) |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        rest = ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes"].items()) if k != "verified")
        lines.append(
            f"| {'on' if r['cache'] else 'off'} | {r['comments']} | {r['requests']} | {r['per_1000']:.0f} | "
            f"{r['outcomes'].get('verified', 0)} ({r['cached']}) | {r['merged']} | {rest} | {r['took_s']:.0f} |"
        )
    return "\n".join(lines)


def write_section(text: str, begin: str = BEGIN, end: str = END, section: str = SECTION) -> None:
    doc = DOCS.read_text(encoding="utf-8")
    generated = f"{begin}\n\n{text}\n\n{end}"
    if begin in doc and end in doc:
        doc = doc[: doc.index(begin)] + generated + doc[doc.index(end) + len(end) :]
    else:
        doc = doc.rstrip("\n") + f"\n\n{section}\n\n{generated}\n"
    DOCS.write_text(doc, encoding="utf-8")


async def calls_main(args: argparse.Namespace) -> None:
    machine, load = describe(), os.getloadavg()[0]
    rows = []
    for cache in (False, True):
        rows.append(await model_calls(args.model_calls, args.model_rate, args.model_speed, cache))
        print(calls_table(rows[-1:]), flush=True)
    table = calls_table(rows)
    before, after = rows[0]["per_1000"], rows[1]["per_1000"]
    text = (
        f"Machine: {machine}; load average at start {load:.1f}. {args.model_calls} comments of "
        f"`kotae.samples.busy_chat` at {args.model_rate:g}/s of chat time, replayed {args.model_speed:g}× faster; "
        "reranker, generator and verifier on the local fake model server (every request counted there); "
        f"merge window 180 s of chat time.\n\n{table}\n\n"
        f"Model requests per 1,000 comments: {before:.0f} without the cache, {after:.0f} with it "
        f"({after / before:.2f}×)."
    )
    print("\n" + text)
    if args.write:
        write_section(text, CALLS_BEGIN, CALLS_END, CALLS_SECTION)
        print(f"\nwrote {DOCS}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.5,2,8", help="comments a second of each busy-chat run")
    parser.add_argument("--minutes", type=float, default=2.0, help="minutes of chat at each rate")
    parser.add_argument("--free", type=int, default=10, help="answers sent one at a time to a free voice")
    parser.add_argument("--voice-answers", type=int, default=12, help="sample answers per language for the RTF")
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    parser.add_argument("--model-calls", type=int, default=0, help="comments of the model-call count (only that)")
    parser.add_argument("--model-rate", type=float, default=2.0, help="comments a second of chat time")
    parser.add_argument("--model-speed", type=float, default=4.0, help="times faster than the chat was posted")
    args = parser.parse_args()
    if args.model_calls:
        await calls_main(args)
        return

    machine = describe()
    load = os.getloadavg()[0]
    voice = await voice_table(args.voice_answers)
    print(f"Machine: {machine}\n\n{voice}\n", flush=True)
    waits, audio = await free_voice(args.free)
    free = (
        f"verified → on air with the voice free: p50 {pct(waits, 0.5):.2f} s, p95 {pct(waits, 0.95):.2f} s "
        f"(n={len(waits)}; their audio p50 {statistics.median(audio) / 1000:.1f} s)"
    )
    print(free, flush=True)
    rows = []
    for rate in (float(r) for r in args.rates.split(",")):
        rows.append(await busy(rate, args.minutes))
        print(busy_table(rows[-1:]), flush=True)
    table = busy_table(rows)
    print("\n" + table)
    text = (
        f"Machine: {machine}; load average at start {load:.1f}. Defaults (KOTAE_ONAIR_GAP_S 0.5, MAX_AGE_S 120, "
        f"MAX_QUEUE 20, PRESYNTH 3), quiet-chat FAQ off.\n\n{voice}\n\n{free}\n\n{table}"
    )
    if args.write:
        write_section(text)
        print(f"\nwrote {DOCS}")


if __name__ == "__main__":
    asyncio.run(main())
