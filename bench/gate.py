"""The retrieval gate on the bundled sample: off-topic chat must not be answered,
real questions must be.

    python bench/gate.py

Off-topic: the sample's labelled off-topic questions plus the chat lines below
(greetings, reactions, questions about other things). Real questions: the
sample's labelled answerable questions. Prints the share of each gated
answer / clarify / no_match with the current thresholds, for the current fusion
weights and for ranking without the dense search (``KOTAE_FUSION_DENSE=0``, the
cosine the gate weighs then read from the kept hits' stored vectors).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

import kotae.samples  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import load_records  # noqa: E402
from kotae.knowledge.text import normalize  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

CHAT = [
    "今日の天気は？", "こんにちは", "草", "こんばんは〜", "初見です", "888888", "www", "かわいい",
    "おつかれさまでした", "おやすみー", "好きなアニメは？", "明日雨降るかな", "昨日のサッカー見た？",
    "お腹すいた", "ラーメン食べたい", "推しの配信者だれ？", "今何時？", "BGMの曲名なに？", "声かわいいね",
    "ゲーム配信もしてほしい", "猫飼ってる？", "誕生日いつ？", "身長何センチ？", "好きな色は？",
    "hello from Brazil!", "lol", "nice stream", "what game is this?", "first time here",
    "what's your favourite anime?", "is it raining there?", "gg", "konnichiwa", "👏👏👏", "🎉",
    "テストテスト", "マイク音小さい", "画面見えない", "遅延ある？", "また来ます",
]


def main() -> None:
    samples = Path(kotae.samples.__file__).parent
    questions = [json.loads(line) for line in (samples / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    answerable = [q["text"] for q in questions if q["kind"] == "answerable"]
    offtopic = [q["text"] for q in questions if q["kind"] == "offtopic"] + CHAT
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp))
        load_knowledge_base(load_records(samples / "kb"), "default", settings)
        day = date(2026, 11, 30)
        rows = []
        variants = (
            (f"fusion {settings.fusion_words:g} / {settings.fusion_chars:g} / {settings.fusion_dense:g}", settings),
            (f"fusion {settings.fusion_words:g} / {settings.fusion_chars:g} / 0", settings.model_copy(update={"fusion_dense": 0.0})),
        )
        for name, variant in variants:
            retriever = Retriever(variant)
            try:
                for label, texts in (("real questions", answerable), ("off-topic chat", offtopic)):
                    gates = Counter(retriever.retrieve(normalize(t), kb="default", day=day).gate for t in texts)
                    n = len(texts)
                    rows.append((name, label, n, gates["answer"] / n, gates["clarify"] / n, gates["no_match"] / n))
            finally:
                retriever.close()
    print(f"Machine: {describe()}\n")
    print(f"Gate on the bundled sample (answer ≥ {settings.gate_answer}, clarify ≥ {settings.gate_clarify}):\n")
    print("| ranking (words / chars / dense) | comments | n | answer | clarify | no_match |")
    print("|---|---|---:|---:|---:|---:|")
    for name, label, n, a, c, m in rows:
        print(f"| {name} | {label} | {n} | {a:.1%} | {c:.1%} | {m:.1%} |")


if __name__ == "__main__":
    main()
