"""Real-time factor and loudness of each offline voice on sample answers, as the engine speaks and as it airs.

    nice python bench/speech.py [--kb PATH ...] [--limit N] [--rounds R]

Answers are built as the generator builds them (two sentences of one document,
KOTAE_MAX_ANSWER_SENTENCES=2) from the bundled sample knowledge base and from
each ``--kb`` (a folder or a kb.jsonl, e.g. ../shared/data/chat-dev/brand/kb.jsonl),
made speakable with ``speech_text`` and said by the offline voice: Japanese by
Open JTalk's mei, English by eSpeak NG. Prints, per engine, p50/p95 of the
real-time factor, of the synthesis time and of the audio length, the first
call's time (the dictionary loads), and what making the text speakable costs.
An RTF below 1 means the voice speaks faster than real time; the on-air stage
needs the next answer ready within the current one's airtime.

Then the loudness of every clip, as the engine gave it and as it airs (made
broadcast-clean, KOTAE_ONAIR_LOUDNESS_LUFS / KOTAE_ONAIR_PEAK_DBTP): integrated
loudness (ITU-R BS.1770-4, pyloudnorm), sample and 4x true peak, samples at
full scale (clipped), each read back from the WAV, and what cleaning a clip costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.knowledge.records import detect_lang, load_records  # noqa: E402
from kotae.services.onair.speech import speech_text  # noqa: E402
from kotae.services.onair.speech.audio import Audio  # noqa: E402
from kotae.services.onair.speech.loudness import LoudnessTarget, broadcast_clean, measure  # noqa: E402
from kotae.services.onair.speech.offline import OfflineVoice  # noqa: E402
from kotae.settings import Settings  # noqa: E402

SAMPLE_KB = Path(__file__).resolve().parents[1] / "kotae" / "samples" / "kb"


def answers(path: Path, sentences: int = 2) -> list[tuple[str, str]]:
    """(lang, answer): the first ``sentences`` sentences of each document and each FAQ answer."""
    found = []
    for record in load_records(path):
        for text in (record.text, record.answer):
            parts = [p.strip() for p in re.split(r"(?<=[。!?])|(?<=[.!?])\s+|\n+", text or "") if p.strip()]
            if parts:
                answer = ("" if (record.lang or detect_lang(parts[0])) == "ja" else " ").join(parts[:sentences])
                found.append((record.lang or detect_lang(answer), answer))
    return found


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timings(
    voice: OfflineVoice, said: list[tuple[str, str]], rounds: int
) -> tuple[dict[str, dict[str, list[float]]], list[Audio]]:
    """Per engine: synthesis seconds, audio seconds and their ratio for every answer and round; the first round's clips."""
    rows: dict[str, dict[str, list[float]]] = {}
    clips: list[Audio] = []
    for round_ in range(rounds):
        for lang, text in said:
            started = time.perf_counter()
            audio = await voice.synthesize(text, lang)  # type: ignore[arg-type]
            took = time.perf_counter() - started
            row = rows.setdefault(audio.voice, {"synth": [], "audio": [], "rtf": []})
            row["synth"].append(took)
            row["audio"].append(audio.duration_ms / 1000)
            row["rtf"].append(took / (audio.duration_ms / 1000))
            if round_ == 0:
                clips.append(audio)
    return rows, clips


def loudness_table(clips: list[Audio], target: LoudnessTarget) -> None:
    """Per engine, raw and as aired: LUFS range and spread, the highest peaks, clipped samples, cleaning time."""
    print(f"\nLoudness, target {target.lufs:g} LUFS, ceiling {target.ceiling_dbtp:g} dBTP:\n")
    broadcast_clean(clips[0], target)  # the first call imports scipy's filters: not a clip's cost
    print(
        "| voice | clips | as | LUFS min / median / max | within ±1 LU | highest sample peak (dBFS) | "
        "highest true peak (dBTP) | clips at full scale | samples at full scale, most in a clip | cleaning p50 / p95 (ms) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in sorted({c.voice for c in clips}):
        raw = [c for c in clips if c.voice == name]
        spent, aired = [], []
        for clip in raw:
            started = time.perf_counter()
            aired.append(broadcast_clean(clip, target))
            spent.append((time.perf_counter() - started) * 1000)
        for label, group in (("engine", raw), ("aired", aired)):
            m = [measure(c) for c in group]
            lufs = [x.lufs for x in m]
            within = sum(abs(x - target.lufs) <= 1 for x in lufs)
            cost = f"{percentile(spent, 0.5):.0f} / {percentile(spent, 0.95):.0f}" if label == "aired" else ""
            print(
                f"| {name} | {len(group)} | {label} | {min(lufs):.1f} / {statistics.median(lufs):.1f} / {max(lufs):.1f} | "
                f"{within} | {max(x.sample_peak_db for x in m):.2f} | {max(x.true_peak_db for x in m):.2f} | "
                f"{sum(x.clipped > 0 for x in m)} | {max(x.clipped for x in m)} | {cost} |"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, action="append", default=[], help="more knowledge bases")
    parser.add_argument("--limit", type=int, default=0, help="at most this many answers per language (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="times each answer is said")
    args = parser.parse_args()

    raw = [a for path in [SAMPLE_KB, *args.kb] for a in answers(path)]
    if args.limit:
        raw = [a for lang in ("ja", "en") for a in [x for x in raw if x[0] == lang][: args.limit]]
    started = time.perf_counter()
    said = [(lang, speech_text(text, lang)) for lang, text in raw]  # type: ignore[arg-type]
    first_text = time.perf_counter() - started  # includes loading e2k and Open JTalk's dictionary
    text_ms = []
    for lang, text in raw:
        started = time.perf_counter()
        speech_text(text, lang)  # type: ignore[arg-type]
        text_ms.append((time.perf_counter() - started) * 1000)

    voice = OfflineVoice()
    first: dict[str, float] = {}
    for lang in ("ja", "en"):
        started = time.perf_counter()
        audio = await voice.synthesize("準備です。" if lang == "ja" else "Ready.", lang)  # type: ignore[arg-type]
        first[audio.voice] = time.perf_counter() - started
    load_before = os.getloadavg()[0]
    rows, clips = await timings(voice, said, args.rounds)
    load_after = os.getloadavg()[0]
    voice.close()

    print(f"Machine: {describe()}")
    print(f"Load average (1 min) before / after the synthesis: {load_before:.1f} / {load_after:.1f}\n")
    counts = {lang: sum(1 for x in said if x[0] == lang) for lang in ("ja", "en")}
    print(f"{counts['ja']} Japanese and {counts['en']} English answers, {args.rounds} rounds each\n")
    print("| voice | n | RTF p50 | RTF p95 | synthesis p50 / p95 (s) | audio p50 / p95 (s) | first synthesis (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(
            f"| {name} | {len(row['rtf'])} | {percentile(row['rtf'], 0.5):.3f} | {percentile(row['rtf'], 0.95):.3f} | "
            f"{percentile(row['synth'], 0.5):.2f} / {percentile(row['synth'], 0.95):.2f} | "
            f"{percentile(row['audio'], 0.5):.1f} / {percentile(row['audio'], 0.95):.1f} | {first[name]:.2f} |"
        )
    print(
        f"\nspeech_text: p50 {statistics.median(text_ms):.2f} ms, p95 {percentile(text_ms, 0.95):.2f} ms an answer "
        f"(the first pass over all answers, loading e2k and Open JTalk's dictionary: {first_text:.1f} s)"
    )
    settings = Settings()
    loudness_table(clips, LoudnessTarget(lufs=settings.onair_loudness_lufs, ceiling_dbtp=settings.onair_peak_dbtp))


if __name__ == "__main__":
    asyncio.run(main())
