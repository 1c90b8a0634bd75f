"""The verifier's offline method against answers built from JSQuAD and JNLI.

    python bench/verifier.py [--squad PATH] [--jnli PATH] [--limit N] [--split dev|held-out|both]

Cases (JSQuAD v1.3 validation; every answer cites its question's paragraph as block [1]):

- supported, two forms: (a) the evidence sentence itself (the paragraph's sentence that holds
  the answer span); (b) a short answer that leans on the question, ``<answer>です[1]。``.
- hallucinated: (1) the answer span swapped for an entity or number of the same type from
  another paragraph of the same article; (2) the same, taken from the same paragraph, so every
  word is in the evidence and only the relation is wrong; (3) a number of the evidence
  sentence changed; (4) an invented person or organisation added; (5) the short form with a
  wrong entity of the same type (from the same paragraph when it has one).

"Same type" is read from Sudachi's parts of speech: person, place and other proper names,
numbers with their counter, and common-noun terms. Articles alternate between a development
split (even positions) and a held-out split (odd positions), so thresholds tuned on one are
reported on the other. JNLI: the premise is the cited context, the hypothesis the answer.

Prints Markdown tables (and the machine), ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from sudachipy import Dictionary, SplitMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.contracts import Evidence  # noqa: E402
from kotae.knowledge.text import split_sentences  # noqa: E402
from kotae.services.verifier.logic import verify  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
VARIANTS = {
    "swap_article": "(1) entity swapped, from elsewhere in the article",
    "swap_paragraph": "(2) entity swapped, from the same paragraph",
    "number": "(3) number changed",
    "invented": "(4) invented person / organisation added",
    "short_wrong": "(5) short form, wrong entity",
}
FORMS = {"sentence": "(a) evidence sentence", "short": "(b) short answer `<answer>です。`"}

# Invented names: checked against each article so none of them is real there.
PEOPLE = ["北原健一", "佐伯真理子", "三枝隆之", "柏木由美", "藤堂浩二", "真鍋香織", "桐生正樹", "早乙女恵", "久世英明", "榊原直子"]
ORGS = ["東洋未来財団", "北辰総合研究所", "みなと技術協会", "国際気象文化学会", "青嶺大学", "日本地域史振興会", "大和先端科学機構", "株式会社ミナトラボ"]
TEMPLATES = [
    lambda name, s: f"{name}によれば、{s}",
    lambda name, s: f"{name}の調べでは、{s}",
    lambda name, s: f"{s.rstrip('。')}と{name}は述べている。",
]

_tok = Dictionary(dict="core").tokenizer(mode=SplitMode.C)


@dataclass
class Case:
    split: str
    kind: str  # "supported" or "hallucinated"
    group: str  # a form for supported answers, a variant for hallucinated ones
    question: str
    context: str
    answer: str


def cite(sentence: str) -> str:
    """Put [1] before the closing punctuation, as the generator does."""
    m = re.search(r"[。．!?！？]+$", sentence)
    if m:
        return f"{sentence[: m.start()]}[1]{sentence[m.start():]}"
    return f"{sentence}[1]"


def span_type(text: str) -> str | None:
    """The entity type of an answer span, or None when it is not a single noun phrase."""
    morphs = [m for m in _tok.tokenize(text) if m.part_of_speech()[0] != "空白"]
    if not morphs or len(morphs) > 5:
        return None
    pos = [m.part_of_speech() for m in morphs]
    if not all(p[0] in ("名詞", "接頭辞", "接尾辞") for p in pos):
        return None
    for i, p in enumerate(pos):
        if p[1] == "数詞":
            counter = morphs[i + 1].normalized_form() if i + 1 < len(morphs) else ""
            return f"number:{counter}"
    if any(p[2] == "人名" for p in pos):
        return "person"
    if any(p[2] == "地名" for p in pos):
        return "place"
    if any(p[1] == "固有名詞" for p in pos):
        return "proper"
    return "term"


def noun_phrases(text: str) -> list[str]:
    """Maximal runs of nouns (with prefixes and suffixes) in ``text``: the swap candidates."""
    out, run = [], []
    for m in _tok.tokenize(text):
        if m.part_of_speech()[0] in ("名詞", "接頭辞", "接尾辞"):
            run.append(m.surface())
            continue
        if run:
            out.append("".join(run))
        run = []
    if run:
        out.append("".join(run))
    return [p for p in out if 1 < len(p) <= 15]


def sentences_with_offsets(context: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    for s in split_sentences(context):
        start = context.find(s, pos)
        if start < 0:
            continue
        out.append((start, start + len(s), s))
        pos = start + len(s)
    return out


def change_number(sentence: str, answer: str, rng: random.Random) -> str | None:
    """The sentence with one of its numbers changed (the answer's, when it is one)."""
    morphs = list(_tok.tokenize(sentence))
    numerals = [m for m in morphs if m.part_of_speech()[1] == "数詞" and m.normalized_form().isdigit()]
    if not numerals:
        return None
    in_answer = [m for m in numerals if m.surface() in answer]
    target = (in_answer or numerals)[0]
    value = int(target.normalized_form())
    present = {m.normalized_form() for m in numerals}
    for _ in range(20):
        if 1000 <= value <= 2100:
            new = value + rng.choice([-1, 1]) * rng.randint(1, 20)
        elif value < 10:
            new = value + rng.randint(1, 5)
        else:
            new = value + rng.choice([-1, 1]) * max(1, round(value * rng.uniform(0.1, 0.6)))
        if new > 0 and str(new) not in present:
            break
    else:
        return None
    text = str(new)
    if any("０" <= ch <= "９" for ch in target.surface()):
        text = text.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    return sentence[: target.begin()] + text + sentence[target.end() :]


def build_cases(squad: Path, seed: int = 7) -> list[Case]:
    rng = random.Random(seed)
    data = json.loads(squad.read_text(encoding="utf-8"))["data"]
    cases: list[Case] = []
    for ai, article in enumerate(data):
        split = "dev" if ai % 2 == 0 else "held-out"
        contexts = [p["context"].split("[SEP]", 1)[-1].strip() for p in article["paragraphs"]]
        offset_fix = [len(p["context"]) - len(c) for p, c in zip(article["paragraphs"], contexts)]
        article_text = "\n".join(contexts)
        # Candidate entities per paragraph, by type: other questions' answers and noun phrases.
        typed: list[dict[str, set[str]]] = []
        for pi, p in enumerate(article["paragraphs"]):
            by_type: dict[str, set[str]] = defaultdict(set)
            for phrase in noun_phrases(contexts[pi]) + [q["answers"][0]["text"] for q in p["qas"]]:
                t = span_type(phrase)
                if t:
                    by_type[t].add(phrase)
            typed.append(by_type)
        for pi, p in enumerate(article["paragraphs"]):
            context = contexts[pi]
            sentences = sentences_with_offsets(context)
            for q in p["qas"]:
                ans = q["answers"][0]
                text = ans["text"].strip()
                start = ans["answer_start"] - offset_fix[pi]
                if not text or context[start : start + len(text)] != text:
                    start = context.find(text)
                    if start < 0:
                        continue
                end = start + len(text)
                holder = [(s, e, sent) for s, e, sent in sentences if s <= start and end <= e]
                if not holder:
                    continue
                s0, _, sentence = holder[0]
                question = q["question"]

                def add(kind: str, group: str, answer: str) -> None:
                    cases.append(Case(split, kind, group, question, context, answer))

                add("supported", "sentence", cite(sentence))
                add("supported", "short", cite(f"{text.rstrip('。．.')}です。"))

                a, b = start - s0, end - s0
                t = span_type(text)
                if t:
                    here = {c for c in typed[pi].get(t, ()) if c != text and c not in text and text not in c}
                    elsewhere = sorted(
                        c
                        for j, other in enumerate(typed)
                        if j != pi
                        for c in other.get(t, ())
                        if c not in context and text not in c
                    )
                    if elsewhere:
                        add("hallucinated", "swap_article", cite(sentence[:a] + rng.choice(elsewhere) + sentence[b:]))
                    in_context = sorted(c for c in here if c in context)
                    if in_context:
                        wrong = rng.choice(in_context)
                        add("hallucinated", "swap_paragraph", cite(sentence[:a] + wrong + sentence[b:]))
                        add("hallucinated", "short_wrong", cite(f"{wrong}です。"))
                    elif elsewhere:
                        add("hallucinated", "short_wrong", cite(f"{rng.choice(elsewhere)}です。"))
                changed = change_number(sentence, text, rng)
                if changed:
                    add("hallucinated", "number", cite(changed))
                names = [n for n in PEOPLE + ORGS if n not in article_text]
                add("hallucinated", "invented", cite(rng.choice(TEMPLATES)(rng.choice(names), sentence)))
    return cases


# --- scoring ---------------------------------------------------------------------------


def run(cases: list[Case]) -> list[tuple[Case, int]]:
    out = []
    for c in cases:
        v = verify(c.answer, [Evidence(doc_id="ctx", chunk_id="ctx", text=c.context)], [], question=c.question)
        out.append((c, v.verdict))
    return out


def prf(results: list[tuple[Case, int]]) -> tuple[float, float, float, int, int]:
    tp = sum(1 for c, v in results if c.kind == "hallucinated" and v != 0)
    fp = sum(1 for c, v in results if c.kind == "supported" and v != 0)
    fn = sum(1 for c, v in results if c.kind == "hallucinated" and v == 0)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f, sum(c.kind == "supported" for c, _ in results), sum(c.kind == "hallucinated" for c, _ in results)


def tables(results: list[tuple[Case, int]], splits: list[str]) -> str:
    lines = ["| split | supported | hallucinated | precision | recall | F1 |", "|---|---:|---:|---:|---:|---:|"]
    for split in splits:
        p, r, f, ns, nh = prf([x for x in results if x[0].split == split])
        lines.append(f"| {split} | {ns} | {nh} | {p:.3f} | {r:.3f} | {f:.3f} |")
    lines += ["", "Hallucinated answers caught (recall per variant) and verdict classes given:", ""]
    lines.append("| variant | " + " | ".join(f"{s} n | {s} caught" for s in splits) + " | classes (all splits) |")
    lines.append("|---|" + "---:|---:|" * len(splits) + "---|")
    for key, label in VARIANTS.items():
        row = [label]
        for split in splits:
            xs = [v for c, v in results if c.group == key and c.split == split]
            row += [str(len(xs)), f"{sum(v != 0 for v in xs) / len(xs):.3f}" if xs else "–"]
        classes = Counter(v for c, v in results if c.group == key)
        row.append(", ".join(f"{k}: {classes[k]}" for k in sorted(classes)))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Supported answers kept (verdict 0) per form:", ""]
    lines.append("| form | " + " | ".join(f"{s} n | {s} kept" for s in splits) + " |")
    lines.append("|---|" + "---:|---:|" * len(splits))
    for key, label in FORMS.items():
        row = [label]
        for split in splits:
            xs = [v for c, v in results if c.kind == "supported" and c.group == key and c.split == split]
            row += [str(len(xs)), f"{sum(v == 0 for v in xs) / len(xs):.3f}" if xs else "–"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def jnli(path: Path, limit: int | None) -> str:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit:
        rows = rows[:limit]
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        premise = unicodedata.normalize("NFKC", row["sentence1"])
        answer = cite(unicodedata.normalize("NFKC", row["sentence2"]))
        v = verify(answer, [Evidence(doc_id="p", chunk_id="p", text=premise)], [])
        counts[row["label"]][0] += 1
        counts[row["label"]][1] += v.verdict != 0
    lines = ["| JNLI label | n | rejected | kept | wanted |", "|---|---:|---:|---:|---|"]
    for label, wanted in (("contradiction", "rejected"), ("neutral", "rejected"), ("entailment", "kept")):
        n, rejected = counts[label]
        if n:
            lines.append(f"| {label} | {n} | {rejected / n:.3f} | {1 - rejected / n:.3f} | {wanted} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squad", type=Path, default=DATA / "jsquad-v1.3-valid.json")
    ap.add_argument("--jnli", type=Path, default=DATA / "jnli-v1.3-valid.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="cases per split (and JNLI pairs)")
    ap.add_argument("--split", choices=["dev", "held-out", "both"], default="both")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    t0 = time.perf_counter()
    cases = build_cases(args.squad, args.seed)
    splits = ["dev", "held-out"] if args.split == "both" else [args.split]
    cases = [c for c in cases if c.split in splits]
    if args.limit:
        cases = [c for s in splits for c in [x for x in cases if x.split == s][: args.limit]]
    t1 = time.perf_counter()
    results = run(cases)
    t2 = time.perf_counter()
    method = verify("x[1]。", [Evidence(doc_id="m", chunk_id="m", text="x")], []).method

    print(f"Machine: {describe()}\n")
    print(f"Method: `{method}`; {len(cases)} JSQuAD cases built in {t1 - t0:.1f} s, verified in {t2 - t1:.1f} s "
          f"({(t2 - t1) / max(1, len(cases)) * 1000:.2f} ms per answer).\n")
    print(tables(results, splits))
    if args.jnli.exists():
        t3 = time.perf_counter()
        print("\nJNLI v1.3 validation (premise = cited context, hypothesis = answer):\n")
        print(jnli(args.jnli, args.limit))
        print(f"\n({time.perf_counter() - t3:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
