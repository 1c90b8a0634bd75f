"""The retrieval gate: questions must pass with the right document first, what the knowledge base
does not cover must not.

    python bench/gate.py [--chat-dev DIR] [--jsquad FILE [--n 300] [--seed 0]] [--sweep]

Sets, each retrieved exactly as the retriever does it (the comment rewritten in the records'
words, hybrid search, the gate of ``kotae.services.retriever.gate``), offline:

* the bundled sample: its labelled questions, and the chat lines below as off-topic;
* ``--chat-dev DIR``: each domain's questions, off-topic comments and injection attempts,
  over its ``kb.jsonl``, by category (the note before its colon);
* ``--jsquad FILE``: JSQuAD with half the articles missing (``bench/half_missing.py``'s
  construction): answerable questions and questions from the missing articles.

Printed per set, kind and category: answer (and with an expected document first, for
answerable questions), clarify, no_match, and how many of the no_match were ``not_covered``
(a specific term in no record). ``--sweep`` also prints the share passing the gate (answer)
for a grid of KOTAE_GATE_ANSWER / KOTAE_GATE_CLARIFY, so a change of the defaults is a
reading of this table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from half_missing import build  # noqa: E402
from machine import describe  # noqa: E402

import kotae.samples  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import KBRecord, load_records  # noqa: E402
from kotae.language.text import normalize  # noqa: E402
from kotae.services.retriever.gate import Thresholds, decide  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

DAY = date(2026, 12, 15)
CHAT = [
    "今日の天気は？", "こんにちは", "草", "こんばんは〜", "初見です", "888888", "www", "かわいい",
    "おつかれさまでした", "おやすみー", "好きなアニメは？", "明日雨降るかな", "昨日のサッカー見た？",
    "お腹すいた", "ラーメン食べたい", "推しの配信者だれ？", "今何時？", "BGMの曲名なに？", "声かわいいね",
    "ゲーム配信もしてほしい", "猫飼ってる？", "誕生日いつ？", "身長何センチ？", "好きな色は？",
    "hello from Brazil!", "lol", "nice stream", "what game is this?", "first time here",
    "what's your favourite anime?", "is it raining there?", "gg", "konnichiwa", "👏👏👏", "🎉",
    "テストテスト", "マイク音小さい", "画面見えない", "遅延ある？", "また来ます",
]  # fmt: skip
SWEEP = [(0.30, 0.20), (0.35, 0.15), (0.35, 0.20), (0.40, 0.20), (0.45, 0.25)]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample_set() -> tuple[list[KBRecord], list[dict]]:
    samples = Path(kotae.samples.__file__).parent
    questions = read_jsonl(samples / "questions.jsonl")
    rows = [{**q, "note": f"{q['kind']}: sample"} for q in questions]
    rows += [
        {"id": f"chat{i}", "text": t, "kind": "offtopic", "note": "chat: a live chat line"} for i, t in enumerate(CHAT)
    ]
    return load_records(samples / "kb"), rows


def cases_of(name: str, records: list[KBRecord], rows: list[dict], folder: Path) -> list[tuple]:
    """Each comment with what the gate decides on: the text searched, the hits, the index meta."""
    settings = load_settings(data_dir=folder)
    load_knowledge_base(records, name, settings)
    retriever = Retriever(settings)
    searcher = retriever.searcher(name)
    vocab = searcher.meta.vocab()
    out = []
    try:
        for q in rows:
            searched = vocab.rewrite(normalize(q["text"]))
            docs, faq = retriever._search(searcher, searched, DAY)
            out.append((q, searched, docs[: settings.top_k], faq[: settings.top_faq], searcher.meta))
    finally:
        retriever.close()
    return out


def category(q: dict) -> str:
    head, colon, _ = q.get("note", "").partition(":")
    return head.strip() if colon else "-"


def table(name: str, cases: list[tuple], thresholds: Thresholds) -> list[str]:
    groups: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for q, searched, docs, faq, meta in cases:
        d = decide(searched, docs, faq, meta, thresholds)
        c = groups[(q["kind"], category(q))]
        c["n"] += 1
        c[d.gate] += 1
        c["not_covered"] += d.reason.startswith("not_covered")
        expected = set(q.get("expected_doc_ids") or [])
        first = {h.doc_id for h in (docs[:1] + faq[:1])}
        c["right"] += d.gate == "answer" and bool(expected & first)
    lines = []
    for (kind, cat), c in groups.items():
        right = f"{c['right']}" if kind == "answerable" else "—"
        lines.append(
            f"| {name} | {kind} | {cat} | {c['n']} | {c['answer']} | {right} | {c['clarify']} | {c['no_match']} | {c['not_covered']} |"
        )
    return lines


def sweep(name: str, cases: list[tuple], strong: float) -> list[str]:
    lines = []
    for answer, clarify in SWEEP:
        passed: dict[str, list[bool]] = defaultdict(list)
        for q, searched, docs, faq, meta in cases:
            d = decide(searched, docs, faq, meta, Thresholds(answer, clarify, strong))
            if category(q) != "chatter":  # triage drops chatter before the gate
                passed[q["kind"]].append(d.gate == "answer")
        cells = " | ".join(
            f"{sum(passed[k])}/{len(passed[k])}" if passed[k] else "—" for k in ("answerable", "offtopic", "injection")
        )
        lines.append(f"| {name} | {answer:.2f} / {clarify:.2f} | {cells} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chat-dev", type=Path, default=None)
    ap.add_argument("--jsquad", type=Path, default=None)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    settings = load_settings()
    thresholds = Thresholds(settings.gate_answer, settings.gate_clarify, settings.gate_strong)
    sets: dict[str, tuple[list[KBRecord], list[dict]]] = {"sample": sample_set()}
    if args.chat_dev:
        for folder in sorted(p for p in args.chat_dev.iterdir() if (p / "kb.jsonl").is_file()):
            rows = [r for f in ("questions", "offtopic", "injection") for r in read_jsonl(folder / f"{f}.jsonl")]
            sets[folder.name] = (load_records(folder / "kb.jsonl"), rows)
    if args.jsquad:
        kb, answerable, unanswerable = build(args.jsquad, args.n, args.seed)
        records = [KBRecord(**r) for r in kb]
        unanswerable = [{**q, "kind": "offtopic"} for q in unanswerable]
        sets["JSQuAD half missing"] = (
            records,
            [{**q, "note": "answerable: JSQuAD"} for q in answerable] + unanswerable,
        )
    with tempfile.TemporaryDirectory() as tmp:
        cases = {name: cases_of(name.replace(" ", "-"), recs, rows, Path(tmp)) for name, (recs, rows) in sets.items()}
    print(f"Machine: {describe()}\n")
    print(
        f"Gate (answer ≥ {thresholds.answer}, clarify ≥ {thresholds.clarify}, a missing focus answered only at ≥ "
        f"{thresholds.strong}), offline, {settings.embedding_model}:\n"
    )
    print(
        "| set | kind | category | n | answer | answer, right doc first | clarify | no_match | of which not_covered |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name, cs in cases.items():
        print("\n".join(table(name, cs, thresholds)))
    if args.sweep:
        print("\nPassing the gate (answer) by thresholds, chatter left out (triage drops it first):\n")
        print("| set | answer / clarify | answerable | off-topic | injection |")
        print("|---|---|---:|---:|---:|")
        for name, cs in cases.items():
            print("\n".join(sweep(name, cs, thresholds.strong)))


if __name__ == "__main__":
    main()
