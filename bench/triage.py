"""Ingest's triage: the question detector, merging of near-duplicates, and throughput on a real bus.

    python bench/triage.py [--chat-dev DIR] [--jsquad FILE] [--comments N] [--rounds R] [--skip-throughput]

1. Question detector: precision and recall of "drop" (the comment is certainly chatter)
   on labelled comments, Japanese and English — a dropped question is lost, so the
   questions dropped are the column to watch:
   - ``bench/data/triage_comments.jsonl`` (dev, 293 lines: the set the rules were tuned on),
   - ``bench/data/triage_heldout.jsonl`` (76 lines written after the rules were frozen),
   - the bundled ``kotae/samples/comments.jsonl`` (30 lines; its chatter as the tests list it),
   - with ``--chat-dev DIR``, each domain of the chat-dev sets: ``questions.jsonl`` are
     questions, ``offtopic.jsonl`` lines of category ``chatter`` are chatter; the other
     off-topic comments and ``injection.jsonl`` are neither (the gate decides them), and
     how many of them triage drops is shown apart;
   - with ``--jsquad FILE``, every JSQuAD question (all questions).
   With ``KOTAE_TRIAGE_MODEL`` set, the model method is measured too (batched as in production).
2. Merging: the dev set's near-duplicate groups (``group``: the same question asked again
   within two minutes, other words); share of the later askers merged into an earlier
   member of their group, and merges of questions that were not duplicates, at several
   similarity thresholds.
3. Throughput: comments through triage and publish (comment.v1, or a dropped answer.v1,
   each with its publish ack) to a real nats-server started for the run, in pages of 16
   as a live source delivers them; the process's RSS at start, after each round, at the end.

Prints Markdown tables (and the machine), ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

from kotae.bus.embedded import EmbeddedNats  # noqa: E402
from kotae.bus.topology import ensure_streams  # noqa: E402
from kotae.contracts import CommentV1  # noqa: E402
from kotae.runtime import make_broker  # noqa: E402
from kotae.services.ingest.handlers import Ingestor  # noqa: E402
from kotae.services.ingest.sources import RawComment  # noqa: E402
from kotae.services.ingest.triage import Dropped, Triage, is_question  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_CHATTER = {"c001", "c002", "c004", "c008", "c014", "c018", "c023", "c030"}


@dataclass
class Labelled:
    id: str
    text: str
    question: bool | None  # None: neither a question nor chatter (left to the gate)
    published_at: datetime
    group: str | None = None


def load_chat_dev(folder: Path) -> list[Labelled]:
    """One chat-dev domain: questions, chatter (off-topic ``chatter``), and the rest as neither."""
    start = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    rows = []
    for name in ("questions", "offtopic", "injection"):
        path = folder / f"{name}.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
            if line.strip():
                r = json.loads(line)
                category = r.get("note", "").split(":", 1)[0].strip()
                label = True if name == "questions" else (False if category == "chatter" else None)
                rows.append(Labelled(r["id"], r["text"], label, start + timedelta(seconds=4 * len(rows))))
    return rows


def load_jsquad_questions(path: Path) -> list[Labelled]:
    start = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    questions = [qa for a in data for p in a["paragraphs"] for qa in p["qas"]]
    return [Labelled(qa["id"], qa["question"], True, start + timedelta(seconds=i)) for i, qa in enumerate(questions)]


def load(path: Path) -> list[Labelled]:
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in ("question", "chatter"):
            raise SystemExit(f"{path}:{lineno}: field 'label': expected 'question' or 'chatter'")
        rows.append(
            Labelled(
                row["id"],
                row["text"],
                row["label"] == "question",
                datetime.fromisoformat(row["published_at"]),
                row.get("group"),
            )
        )
    return rows


def load_sample() -> list[Labelled]:
    rows, seen = [], set()
    for line in (ROOT / "kotae" / "samples" / "comments.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "moderation" in row or row["id"] in seen:
            continue  # a moderation event (a deletion, a ban), or the resent line
        seen.add(row["id"])
        rows.append(
            Labelled(
                row["id"], row["text"], row["id"] not in SAMPLE_CHATTER, datetime.fromisoformat(row["published_at"])
            )
        )
    return rows


# --- 1. the detector ------------------------------------------------------------------------


def score(rows: list[Labelled], kept: list[bool]) -> dict[str, float | int | None]:
    """Precision and recall of "drop" (chatter is the positive class); ``kept`` = the detector let it on."""
    pairs = list(zip(rows, kept, strict=True))
    tp = sum(1 for r, k in pairs if not k and r.question is False)
    fp = sum(1 for r, k in pairs if not k and r.question is True)
    fn = sum(1 for r, k in pairs if k and r.question is False)
    langs = sum(1 for r in rows if any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in r.text))
    return {
        "n": len(rows),
        "ja": langs,
        "questions": sum(r.question is True for r in rows),
        "chatter": sum(r.question is False for r in rows),
        "neither": sum(r.question is None for r in rows),
        "neither_dropped": sum(1 for r, k in pairs if not k and r.question is None),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


async def model_predictions(rows: list[Labelled]) -> tuple[list[bool], str]:
    settings = load_settings(data_dir=Path(tempfile.mkdtemp()))
    triage = Triage.from_settings(settings, source="bench")
    triage.merge_window_s = 0
    triage.admit_per_minute = 0
    raws = [RawComment(id=r.id, text=r.text, published_at=r.published_at) for r in rows]
    decisions = await triage.admit_batch(raws)
    method = next((d.method if isinstance(d, Dropped) else d.triage for d in decisions if d is not None), "?")
    return [isinstance(d, CommentV1) for d in decisions], str(method)


def detector_table(sets: dict[str, list[Labelled]]) -> list[str]:
    lines = [
        "| set | method | comments (ja) | questions | chatter | drop precision | drop recall | questions dropped | chatter kept | others (dropped) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def share(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    runs = [("question_rules", lambda rows: [is_question(r.text) for r in rows])]
    if os.environ.get("KOTAE_TRIAGE_MODEL"):

        def by_model(rows: list[Labelled]) -> list[bool]:
            flags, method = asyncio.run(model_predictions(rows))
            by_model.method = method  # type: ignore[attr-defined]
            return flags

        runs.append(("model", by_model))
    for name, rows in sets.items():
        for method, predict in runs:
            s = score(rows, predict(rows))
            label = getattr(predict, "method", method)
            lines.append(
                f"| {name} | {label} | {s['n']} ({s['ja']}) | {s['questions']} | {s['chatter']} | {share(s['precision'])} "
                f"| {share(s['recall'])} | {s['fp']} | {s['fn']} | {s['neither']} ({s['neither_dropped']}) |"
            )
    return lines


# --- 2. merging ----------------------------------------------------------------------------------


def merge_table(rows: list[Labelled], thresholds: list[float]) -> list[str]:
    group_of = {r.id: r.group for r in rows}
    first_in_group: dict[str, str] = {}
    duplicates = set()
    for r in rows:
        if r.group:
            if r.group in first_in_group:
                duplicates.add(r.id)
            else:
                first_in_group[r.group] = r.id
    lines = [
        "| similarity ≥ | later askers (duplicates) | merged into their group | share merged | questions merged but not duplicates |",
        "|---:|---:|---:|---:|---:|",
    ]
    for threshold in thresholds:
        triage = Triage(stream_id="bench", kb="default", source="bench", merge_window_s=180, merge_similarity=threshold)
        right = wrong = 0
        for r in rows:
            d = triage.admit(RawComment(id=r.id, text=r.text, published_at=r.published_at))
            if isinstance(d, Dropped) and d.merged_into:
                if r.id in duplicates and group_of.get(d.merged_into) == r.group:
                    right += 1
                elif r.question:  # chatter merged into chatter (both kept for the gate) loses nothing
                    wrong += 1
        lines.append(f"| {threshold:.2f} | {len(duplicates)} | {right} | {right / len(duplicates):.3f} | {wrong} |")
    return lines


# --- 3. throughput ---------------------------------------------------------------------------------


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def stream_of_comments(texts: list[str], n: int, start: datetime, offset: int, per_second: float) -> list[RawComment]:
    step = timedelta(seconds=1 / per_second)
    return [
        RawComment(
            id=f"b{offset + i}",
            author=f"viewer{(offset + i) % 500}",
            text=texts[(offset + i) % len(texts)],
            published_at=start + step * (offset + i),
        )
        for i in range(n)
    ]


async def throughput(
    texts: list[str], n: int, rounds: int, admit_per_minute: int, merge_window_s: float
) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="kotae-bench-"))
    server = EmbeddedNats(folder / "jetstream", sync_interval="2m")
    url = server.start()
    try:
        settings = load_settings(
            data_dir=folder / "data", nats_url=url, admit_per_minute=admit_per_minute, merge_window_s=merge_window_s
        )
        broker = make_broker(settings)
        await broker.connect()
        await ensure_streams(broker.connection.jetstream(), settings)
        triage = Triage.from_settings(settings, source="bench")
        ingestor = Ingestor(broker, triage, TracerProvider().get_tracer("bench"), session="bench")
        start = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
        rss = [rss_mib()]
        counts = {"admitted": 0, "dropped": 0}
        elapsed = 0.0
        for rnd in range(rounds):
            batch_all = stream_of_comments(texts, n, start, rnd * n, per_second=20.0)
            t0 = time.perf_counter()
            for i in range(0, len(batch_all), 16):
                for result in await ingestor.ingest_many(batch_all[i : i + 16]):
                    counts[result.status] = counts.get(result.status, 0) + 1
            elapsed += time.perf_counter() - t0
            rss.append(rss_mib())
        await broker.stop()
        return {"n": n * rounds, "seconds": elapsed, "rate": n * rounds / elapsed, "rss": rss, **counts}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comments", type=int, default=3000, help="comments per throughput round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--chat-dev", type=Path, default=None, help="the chat-dev folder (one sub-folder per domain)")
    parser.add_argument("--jsquad", type=Path, default=None, help="JSQuAD JSON: every question must go on")
    args = parser.parse_args()

    dev, heldout = load(DATA / "triage_comments.jsonl"), load(DATA / "triage_heldout.jsonl")
    sets = {"dev (tuned on)": dev, "held-out": heldout, "bundled sample": load_sample()}
    if args.chat_dev:
        for folder in sorted(p for p in args.chat_dev.iterdir() if (p / "questions.jsonl").is_file()):
            sets[f"chat-dev {folder.name}"] = load_chat_dev(folder)
    if args.jsquad:
        sets["JSQuAD v1.3 valid questions"] = load_jsquad_questions(args.jsquad)
    print(f"Machine: {describe()}\n")
    print("Question detector: drop (certain chatter) is the positive class; a dropped question is lost:\n")
    print("\n".join(detector_table(sets)))
    print("\nMerging near-duplicate questions (dev set, window 180 s, offline detector first):\n")
    print("\n".join(merge_table(dev, [0.4, 0.5, 0.6])))
    if args.skip_throughput:
        return
    texts = [r.text for r in dev + heldout]
    print(
        f"\nThroughput: triage + publish with ack to a real nats-server, pages of 16, {args.rounds} rounds of {args.comments}"
        " comments (chat time: 20 comments/s, 500 viewers):\n"
    )
    print("| configuration | comments | admitted | dropped | seconds | comments/s | RSS MiB: start → each round |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, limit, window in (
        ("defaults: 120 a minute, merge within 180 s", 120, 180.0),
        ("no rate limit, no merging", 0, 0.0),
    ):
        r = asyncio.run(throughput(texts, args.comments, args.rounds, limit, window))
        rss = " → ".join(f"{x:.0f}" for x in r["rss"])  # type: ignore[union-attr]
        print(
            f"| {label} | {r['n']} | {r['admitted']} | {r['dropped']} | {r['seconds']:.1f} | {r['rate']:.0f} | {rss} |"
        )


if __name__ == "__main__":
    main()
