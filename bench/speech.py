"""Real-time factor of each offline voice on sample answers: synthesis seconds ÷ seconds of audio.

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
from kotae.services.onair.speech.offline import OfflineVoice  # noqa: E402

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


async def measure(voice: OfflineVoice, said: list[tuple[str, str]], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per engine: synthesis seconds, audio seconds and their ratio for every answer and round."""
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for lang, text in said:
            started = time.perf_counter()
            audio = await voice.synthesize(text, lang)  # type: ignore[arg-type]
            took = time.perf_counter() - started
            row = rows.setdefault(audio.voice, {"synth": [], "audio": [], "rtf": []})
            row["synth"].append(took)
            row["audio"].append(audio.duration_ms / 1000)
            row["rtf"].append(took / (audio.duration_ms / 1000))
    return rows


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
    rows = await measure(voice, said, args.rounds)
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


if __name__ == "__main__":
    asyncio.run(main())
