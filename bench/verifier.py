"""The verifier's offline method against answers built from JSQuAD and JNLI.

    python bench/verifier.py [--squad PATH] [--jnli PATH] [--limit N] [--split dev|held-out|both]

Cases (JSQuAD v1.3 validation; every answer cites its question's paragraph as block [1]):

- supported, two forms: (a) the evidence sentence itself (the paragraph's sentence that holds
  the answer span); (b) a short answer that leans on the question, ``<answer>です[1]。``.
- hallucinated: (1) the answer span swapped for an entity or number of the same type from
  another paragraph of the same article; (2) the same, taken from the same paragraph, so every
  word is in the evidence and only the relation is wrong; (3) a number of the evidence
  sentence changed; (4) an invented person or organisation added; (5) the short form with a
  wrong entity of the same type (from the same paragraph when it has one). The bare-answer table
  reads (b) against those of (5) taken from the same paragraph: every word of a wrong one is in
  the evidence, and only where it stands says it does not answer.

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
from typing import Any

from sudachipy import Dictionary, SplitMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.contracts import Evidence  # noqa: E402
from kotae.language.text import split_sentences  # noqa: E402
from kotae.services.verifier.logic import CASCADE_SURE, SURE, verify  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
VARIANTS = {
    "swap_article": "(1) entity swapped, from elsewhere in the article",
    "swap_paragraph": "(2) entity swapped, from the same paragraph",
    "number": "(3) number changed",
    "invented": "(4) invented person / organisation added",
    "short_wrong": "(5) short form, wrong entity (same paragraph when it has one)",
    "negated": "(6) evidence sentence negated (〜ない)",
    "planned": "(7) evidence sentence turned into a plan (〜予定)",
}
FORMS = {
    "sentence": "(a) evidence sentence",
    "short": "(b) short answer `<answer>です。`",
    "polite": "(c) evidence sentence, politeness changed (である → です)",
    "numeral": "(d) evidence sentence, a number in kanji (3人 → 三人)",
}

# Invented names: checked against each article so none of them is real there.
PEOPLE = [
    "北原健一",
    "佐伯真理子",
    "三枝隆之",
    "柏木由美",
    "藤堂浩二",
    "真鍋香織",
    "桐生正樹",
    "早乙女恵",
    "久世英明",
    "榊原直子",
]
ORGS = [
    "東洋未来財団",
    "北辰総合研究所",
    "みなと技術協会",
    "国際気象文化学会",
    "青嶺大学",
    "日本地域史振興会",
    "大和先端科学機構",
    "株式会社ミナトラボ",
]
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
    source: str = ""  # where a swapped phrase came from: "paragraph" or "article"


def cite(sentence: str) -> str:
    """Put [1] before the closing punctuation, as the generator does."""
    m = re.search(r"[。．!?！？]+$", sentence)
    if m:
        return f"{sentence[: m.start()]}[1]{sentence[m.start() :]}"
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


@dataclass
class Paragraph:
    """One JSQuAD paragraph and what its cases are built from."""

    split: str
    context: str
    offset_fix: int  # characters of the "title [SEP]" prefix the answer offsets count
    qas: list[dict[str, Any]]
    typed: dict[str, set[str]]  # candidate phrases of the paragraph, by type
    elsewhere: dict[str, list[str]]  # candidate phrases of the rest of the article, by type
    article_text: str


def _typed_phrases(context: str, qas: list[dict[str, Any]]) -> dict[str, set[str]]:
    by_type: dict[str, set[str]] = defaultdict(set)
    for phrase in noun_phrases(context) + [q["answers"][0]["text"] for q in qas]:
        t = span_type(phrase)
        if t:
            by_type[t].add(phrase)
    return by_type


def paragraphs(squad: Path) -> list[Paragraph]:
    """Every paragraph, its article's split (even articles: dev, odd: held-out) and its candidates."""
    data = json.loads(squad.read_text(encoding="utf-8"))["data"]
    out = []
    for ai, article in enumerate(data):
        contexts = [p["context"].split("[SEP]", 1)[-1].strip() for p in article["paragraphs"]]
        typed = [_typed_phrases(c, p["qas"]) for c, p in zip(contexts, article["paragraphs"], strict=True)]
        for pi, p in enumerate(article["paragraphs"]):
            elsewhere = defaultdict(list)
            for j, other in enumerate(typed):
                if j != pi:
                    for t, phrases in other.items():
                        elsewhere[t] += sorted(c for c in phrases if c not in contexts[pi])
            out.append(
                Paragraph(
                    split="dev" if ai % 2 == 0 else "held-out",
                    context=contexts[pi],
                    offset_fix=len(p["context"]) - len(contexts[pi]),
                    qas=p["qas"],
                    typed=typed[pi],
                    elsewhere=elsewhere,
                    article_text="\n".join(contexts),
                )
            )
    return out


def _answer_span(p: Paragraph, q: dict[str, Any]) -> tuple[str, int] | None:
    ans = q["answers"][0]
    text = ans["text"].strip()
    start = ans["answer_start"] - p.offset_fix
    if not text or p.context[start : start + len(text)] != text:
        start = p.context.find(text)
    return (text, start) if text and start >= 0 else None


def _nearest(candidates: list[str], context: str, at: int) -> str:
    """The candidate whose first occurrence in ``context`` is closest to ``at``."""
    return min(candidates, key=lambda c: (abs(context.find(c) - at), c))


def question_cases(p: Paragraph, q: dict[str, Any], rng: random.Random, construction: str) -> list[Case]:
    """The cases of one question: two supported forms and up to five hallucinated variants.

    ``construction`` says where the wrong bare answer (variant 5) comes from: ``same-paragraph``
    (a random phrase of its type from the same paragraph whenever one exists there, else from the
    rest of the article) or ``nearest`` (the phrase of its type standing closest to the answer).
    """
    span = _answer_span(p, q)
    holder = [
        (s, e, sent)
        for s, e, sent in sentences_with_offsets(p.context)
        if span and s <= span[1] and span[1] + len(span[0]) <= e
    ]
    if span is None or not holder:
        return []
    text, start = span
    s0, _, sentence = holder[0]
    a, b = start - s0, start - s0 + len(text)
    cases: list[Case] = []

    def add(kind: str, group: str, answer: str, source: str = "") -> None:
        cases.append(Case(p.split, kind, group, q["question"], p.context, answer, source))

    add("supported", "sentence", cite(sentence))
    add("supported", "short", cite(f"{text.rstrip('。．.')}です。"))
    t = span_type(text)
    if t:
        here = sorted(c for c in p.typed.get(t, ()) if c != text and c not in text and text not in c and c in p.context)
        elsewhere = [c for c in p.elsewhere.get(t, []) if text not in c]
        if elsewhere:
            add("hallucinated", "swap_article", cite(sentence[:a] + rng.choice(elsewhere) + sentence[b:]))
        if here:
            add("hallucinated", "swap_paragraph", cite(sentence[:a] + rng.choice(here) + sentence[b:]))
            wrong = _nearest(here, p.context, start) if construction == "nearest" else rng.choice(here)
            add("hallucinated", "short_wrong", cite(f"{wrong}です。"), "paragraph")
        elif elsewhere:
            add("hallucinated", "short_wrong", cite(f"{rng.choice(elsewhere)}です。"), "article")
    changed = change_number(sentence, text, rng)
    if changed:
        add("hallucinated", "number", cite(changed))
    names = [n for n in PEOPLE + ORGS if n not in p.article_text]
    add("hallucinated", "invented", cite(rng.choice(TEMPLATES)(rng.choice(names), sentence)))
    cases += paraphrase_cases(p.split, q["question"], p.context, sentence, rng)
    return cases


def build_cases(squad: Path, seed: int = 7, construction: str = "same-paragraph") -> list[Case]:
    """Every case of every JSQuAD question (see the module docstring)."""
    rng = random.Random(seed)
    return [c for p in paragraphs(squad) for q in p.qas for c in question_cases(p, q, rng, construction)]


# --- paraphrased evidence -------------------------------------------------------------------

# Rewrites of a sentence's ending that keep its meaning (politeness), and that change it
# (polarity, modality). Each is (pattern at the end of the sentence, replacement).
POLITE = [
    (r"である。$", "です。"),
    (r"であった。$", "でした。"),
    (r"した。$", "しました。"),
    (r"する。$", "します。"),
    (r"いる。$", "います。"),
    (r"ある。$", "あります。"),
    (r"れた。$", "れました。"),
    (r"った。$", "りました。"),
]
NEGATED = [
    (r"である。$", "ではない。"),
    (r"した。$", "しなかった。"),
    (r"する。$", "しない。"),
    (r"いる。$", "いない。"),
    (r"ある。$", "ない。"),
    (r"れた。$", "れなかった。"),
]
PLANNED = [(r"した。$", "する予定だ。"), (r"された。$", "される予定だ。"), (r"になった。$", "になる予定だ。")]
KANJI_DIGITS = dict(zip("0123456789", "〇一二三四五六七八九", strict=True))


def _rewrite(sentence: str, rules: list[tuple[str, str]]) -> str | None:
    for pattern, repl in rules:
        if re.search(pattern, sentence):
            return re.sub(pattern, repl, sentence)
    return None


def _kanji_numerals(sentence: str) -> str | None:
    """A one-digit number written in kanji (3人 → 三人), which Sudachi reads as the same number."""
    m = re.search(r"(?<![0-9,.])([0-9])(?![0-9,.])(人|つ|回|か所|か国|位|冊|本|台|個|度)", sentence)
    if not m:
        return None
    return sentence[: m.start(1)] + KANJI_DIGITS[m.group(1)] + sentence[m.end(1) :]


def paraphrase_cases(split: str, question: str, context: str, sentence: str, rng: random.Random) -> list[Case]:
    """The evidence sentence rewritten: kept meaning (politeness, kanji numerals) is supported;
    negated or turned into a plan (〜予定) it is not."""
    out = []
    for group, kind, new in (
        ("polite", "supported", _rewrite(sentence, POLITE)),
        ("numeral", "supported", _kanji_numerals(sentence)),
        ("negated", "hallucinated", _rewrite(sentence, NEGATED)),
        ("planned", "hallucinated", _rewrite(sentence, PLANNED)),
    ):
        if new and new != sentence:
            out.append(Case(split, kind, group, question, context, cite(new)))
    return out


# --- chat-dev answers -------------------------------------------------------------------------


def chat_dev_cases(folder: Path, seed: int = 7) -> list[Case]:
    """Bare answers to the chat-dev questions: each expected fact, and another phrase of its type from
    the same expected record, as ``<fact>です[1]。``; and the record's sentence holding the fact."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for domain in sorted(p for p in folder.iterdir() if (p / "kb.jsonl").exists()):
        records = {r["id"]: r for r in map(json.loads, (domain / "kb.jsonl").read_text(encoding="utf-8").splitlines())}
        for line in (domain / "questions.jsonl").read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            record = records[q["expected_doc_ids"][0]]
            context = record.get("text") or f"{record['question']}\n{record['answer']}"
            fact = q["expected_facts"][0]
            holder = [s for s in split_sentences(context) if fact in s]
            if not holder:
                continue
            split = f"chat-dev/{domain.name}"
            cases.append(Case(split, "supported", "sentence", q["text"], context, cite(holder[0])))
            cases.append(Case(split, "supported", "short", q["text"], context, cite(f"{fact}です。")))
            t = span_type(fact)
            rivals = (
                sorted(c for c in _typed_phrases(context, []).get(t, ()) if fact not in c and c not in fact)
                if t
                else []
            )
            if rivals:
                wrong = cite(f"{rng.choice(rivals)}です。")
                cases.append(Case(split, "hallucinated", "short_wrong", q["text"], context, wrong, "paragraph"))
    return cases


# --- scoring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One case and the offline method's verdict on it."""

    case: Case
    verdict: int
    decision: str  # supported, hallucinated, unsure
    placed_nowhere: bool = False  # a bare answer the evidence could not place (unsure for that alone)

    @property
    def rejected(self) -> bool:
        """Offline mode, fail closed: anything not supported is rejected (KOTAE_VERIFIER_UNSURE=reject)."""
        return self.decision != "supported"

    @property
    def decided_wrong(self) -> bool:
        """A confident decision against the label (unsure is no decision)."""
        return (self.decision == "supported") == (self.case.kind == "hallucinated") and self.decision != "unsure"


def run(cases: list[Case], sure: float = SURE) -> list[Result]:
    out = []
    for c in cases:
        v = verify(
            c.answer, [Evidence(doc_id="ctx", chunk_id="ctx", text=c.context)], [], question=c.question, sure=sure
        )
        nowhere = any("cannot place as the answer" in reason for reason in v.reasons)
        out.append(Result(c, v.verdict, v.decision, nowhere))
    return out


def prf(results: list[Result]) -> tuple[float, float, float, int, int]:
    tp = sum(1 for r in results if r.case.kind == "hallucinated" and r.rejected)
    fp = sum(1 for r in results if r.case.kind == "supported" and r.rejected)
    fn = sum(1 for r in results if r.case.kind == "hallucinated" and not r.rejected)
    p = tp / (tp + fp) if tp + fp else 0.0
    rc = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * rc / (p + rc) if p + rc else 0.0
    kinds = Counter(r.case.kind for r in results)
    return p, rc, f, kinds["supported"], kinds["hallucinated"]


def _rate(xs: list[bool]) -> str:
    return f"{sum(xs) / len(xs):.3f}" if xs else "–"


def tables(results: list[Result], splits: list[str]) -> str:
    lines = ["| split | supported | hallucinated | precision | recall | F1 |", "|---|---:|---:|---:|---:|---:|"]
    for split in splits:
        p, r, f, ns, nh = prf([x for x in results if x.case.split == split])
        lines.append(f"| {split} | {ns} | {nh} | {p:.3f} | {r:.3f} | {f:.3f} |")
    lines += ["", "Hallucinated answers caught (offline mode: rejected unless supported) and verdict classes:", ""]
    lines.append("| variant | " + " | ".join(f"{s} n | {s} caught" for s in splits) + " | classes (all splits) |")
    lines.append("|---|" + "---:|---:|" * len(splits) + "---|")
    for key, label in VARIANTS.items():
        row = [label]
        for split in splits:
            xs = [r.rejected for r in results if r.case.group == key and r.case.split == split]
            row += [str(len(xs)), _rate(xs)]
        classes = Counter(r.verdict for r in results if r.case.group == key)
        row.append(", ".join(f"{k}: {classes[k]}" for k in sorted(classes)))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Supported answers kept (offline mode: verified only when supported) per form:", ""]
    lines.append("| form | " + " | ".join(f"{s} n | {s} kept" for s in splits) + " |")
    lines.append("|---|" + "---:|---:|" * len(splits))
    for key, label in FORMS.items():
        row = [label]
        for split in splits:
            xs = [
                not r.rejected
                for r in results
                if r.case.kind == "supported" and r.case.group == key and r.case.split == split
            ]
            row += [str(len(xs)), _rate(xs)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def bare_table(results: list[Result], splits: list[str]) -> str:
    """Bare answers ``Xです[1]。``: the right one kept (supported), and a wrong phrase of its type from
    the same paragraph (the same record on chat-dev) caught (not supported), with how each was decided."""
    lines = [
        "| split | right n | kept (supported) | unsure | hallucinated "
        "| wrong n | caught | of those unsure | of those hallucinated | placed nowhere: right / wrong |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for split in splits:
        rights = [r for r in results if r.case.split == split and r.case.group == "short"]
        wrongs = [
            r
            for r in results
            if r.case.split == split and r.case.group == "short_wrong" and r.case.source == "paragraph"
        ]
        right, wrong = Counter(r.decision for r in rights), Counter(r.decision for r in wrongs)
        nr, nw = len(rights), len(wrongs)
        if not nr and not nw:
            continue
        caught = nw - wrong["supported"]
        nowhere = f"{sum(r.placed_nowhere for r in rights)} / {sum(r.placed_nowhere for r in wrongs)}"
        lines.append(
            f"| {split} | {nr} | {right['supported'] / max(1, nr):.3f} | {right['unsure']} | {right['hallucinated']} "
            f"| {nw} | {caught / max(1, nw):.3f} | {wrong['unsure']} | {wrong['hallucinated']} | {nowhere} |"
        )
    return "\n".join(lines)


def cascade_table(results: list[Result], splits: list[str], *, model_passes: bool) -> str:
    """Cascade mode: the share the offline method decides itself, the error of those decisions, and
    the total error when the unsure rest goes to a model that passes whatever it is asked about
    (the fake server's default: a bound, not a model's quality)."""
    lines = [
        "| split | drafts | decided offline | error of those | unsure → model | total error, model passes all |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for split in splits:
        xs = [r for r in results if r.case.split == split]
        decided = [r for r in xs if r.decision != "unsure"]
        unsure = [r for r in xs if r.decision == "unsure"]
        wrong = sum(r.decided_wrong for r in decided)
        total = wrong + sum(r.case.kind == "hallucinated" for r in unsure) if model_passes else wrong
        lines.append(
            f"| {split} | {len(xs)} | {len(decided) / max(1, len(xs)):.3f} | {wrong / max(1, len(decided)):.3f} "
            f"| {len(unsure)} | {total / max(1, len(xs)):.3f} |"
        )
    lines += ["", "Per group (all splits): decided offline, and the error of those decisions:", ""]
    lines.append("| group | n | decided offline | error of those |")
    lines.append("|---|---:|---:|---:|")
    for key, label in {**FORMS, **VARIANTS}.items():
        xs = [r for r in results if r.case.group == key]
        decided = [r for r in xs if r.decision != "unsure"]
        if xs:
            err = sum(r.decided_wrong for r in decided) / max(1, len(decided))
            lines.append(f"| {label} | {len(xs)} | {len(decided) / len(xs):.3f} | {err:.3f} |")
    return "\n".join(lines)


def jnli(path: Path, limit: int | None, sure: float = SURE) -> str:
    """JNLI pairs: the premise is the cited context, the hypothesis (+ [1]) the answer, no question."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit:
        rows = rows[:limit]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        premise = unicodedata.normalize("NFKC", row["sentence1"])
        answer = cite(unicodedata.normalize("NFKC", row["sentence2"]))
        v = verify(answer, [Evidence(doc_id="p", chunk_id="p", text=premise)], [], sure=sure)
        counts[row["label"]][v.decision] += 1
    lines = [
        "| JNLI label | n | rejected (offline) | kept | supported | unsure | hallucinated | wanted |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, wanted in (("contradiction", "rejected"), ("neutral", "rejected"), ("entailment", "kept")):
        c = counts[label]
        n = sum(c.values())
        if n:
            kept = c["supported"] / n
            lines.append(
                f"| {label} | {n} | {1 - kept:.3f} | {kept:.3f} | {c['supported']} | {c['unsure']} "
                f"| {c['hallucinated']} | {wanted} |"
            )
    return "\n".join(lines)


def _content_words(tokenizer: Any, text: str) -> dict[str, set[int]]:
    """A sentence's content words (normalised form → its Sudachi synonym groups)."""
    out: dict[str, set[int]] = {}
    for m in tokenizer.tokenize(text):
        pos = m.part_of_speech()
        if pos[0] in ("名詞", "動詞", "形容詞", "形状詞", "副詞") and pos[1] != "非自立可能":
            out[m.normalized_form()] = set(m.synonym_group_ids())
    return out


def jnli_word_overlap(path: Path, limit: int | None) -> str:
    """What any word-overlap check can do on JNLI: the share of the hypothesis's content words the
    premise holds, by its own word or (second column) by a Sudachi synonym group, swept as a threshold.
    An entailment is kept, a contradiction rejected, when the share is at or above the threshold."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit:
        rows = rows[:limit]
    tokenizer = Dictionary(dict="core").tokenizer(mode=SplitMode.C)
    shares: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        premise = _content_words(tokenizer, unicodedata.normalize("NFKC", row["sentence1"]))
        hypothesis = _content_words(tokenizer, unicodedata.normalize("NFKC", row["sentence2"]))
        if not hypothesis:
            continue
        groups = set().union(*premise.values()) if premise else set()
        held = [w in premise for w in hypothesis]
        bridged = [w in premise or bool(g & groups) for w, g in hypothesis.items()]
        shares[row["label"]].append((sum(held) / len(held), sum(bridged) / len(bridged)))
    lines = [
        "| share of the hypothesis's content words in the premise ≥ | entailment kept | contradiction rejected "
        "| neutral rejected | with synonym groups: entailment kept | contradiction rejected |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for t in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0):

        def kept(label: str, i: int, t: float = t) -> float:
            xs = shares[label]
            return sum(x[i] >= t for x in xs) / max(1, len(xs))

        lines.append(
            f"| {t:.1f} | {kept('entailment', 0):.3f} | {1 - kept('contradiction', 0):.3f} "
            f"| {1 - kept('neutral', 0):.3f} | {kept('entailment', 1):.3f} | {1 - kept('contradiction', 1):.3f} |"
        )
    mean = {label: sum(x[0] for x in xs) / max(1, len(xs)) for label, xs in shares.items()}
    lines.append(
        f"\nMean share: entailment {mean.get('entailment', 0):.3f}, contradiction {mean.get('contradiction', 0):.3f}, "
        f"neutral {mean.get('neutral', 0):.3f}."
    )
    return "\n".join(lines)


def cascade_with_model(results: list[Result], limit: int, sure: float) -> str:
    """The cascade itself (``decision.decide``) on the cases the offline method is unsure of, against
    the local fake model server (its checker passes every draft it is shown): calls made and outcomes."""
    import asyncio

    from kotae.contracts import CommentV1, DraftV1
    from kotae.providers import ChatModel
    from kotae.services.verifier.decision import VerifierPolicy, decide
    from kotae.settings import load_settings

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.fakes.model_server import FakeModelServer, stage_responder

    unsure = [r for r in results if r.decision == "unsure"][:limit]

    async def go(url: str) -> Counter[tuple[str, str, str]]:
        settings = load_settings(verifier_model=f"compatible:{url}/v1|checker", verifier_mode="cascade")
        model = ChatModel.from_settings(settings, settings.verifier_model or "", setting="KOTAE_VERIFIER_MODEL")
        policy = VerifierPolicy(mode="cascade", model=model, reask=0, sure=sure)
        out: Counter[tuple[str, str, str]] = Counter()
        try:
            for r in unsure:
                c = r.case
                comment = CommentV1(comment_id="b", stream_id="b", author="b", text=c.question, normalized=c.question)
                docs = [Evidence(doc_id="ctx", chunk_id="ctx", text=c.context)]
                draft = DraftV1(
                    comment_id="b", stream_id="b", comment=comment, docs=docs, answer=c.answer,
                    speech=c.answer, citation_check={"ok": True}, method="bench",
                )  # fmt: skip
                d = await decide(draft, policy)
                out[(c.kind, d.outcome, d.decided_by)] += 1
        finally:
            await model.aclose()
        return out

    with FakeModelServer(responder=stage_responder) as fake:
        counts = asyncio.run(go(fake.url))
    lines = ["| label | outcome | decided by | n |", "|---|---|---|---:|"]
    lines += [f"| {k} | {o} | {b} | {n} |" for (k, o, b), n in sorted(counts.items())]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squad", type=Path, default=DATA / "jsquad-v1.3-valid.json")
    ap.add_argument("--jnli", type=Path, default=DATA / "jnli-v1.3-valid.jsonl")
    ap.add_argument("--chat-dev", type=Path, default=DATA / "chat-dev")
    ap.add_argument("--limit", type=int, default=None, help="cases per split (and JNLI pairs)")
    ap.add_argument("--split", choices=["dev", "held-out", "both"], default="both")
    ap.add_argument("--construction", choices=["same-paragraph", "nearest"], default="same-paragraph")
    ap.add_argument("--sure", type=float, default=SURE, help="KOTAE_VERIFIER_SURE (offline mode)")
    ap.add_argument("--cascade-sure", type=float, default=CASCADE_SURE, help="KOTAE_VERIFIER_CASCADE_SURE")
    ap.add_argument(
        "--model-cases", type=int, default=200, help="unsure cases sent through the cascade to the fake model"
    )
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    t0 = time.perf_counter()
    cases = build_cases(args.squad, args.seed, args.construction)
    splits = ["dev", "held-out"] if args.split == "both" else [args.split]
    cases = [c for c in cases if c.split in splits]
    if args.limit:
        cases = [c for s in splits for c in [x for x in cases if x.split == s][: args.limit]]
    chat = chat_dev_cases(args.chat_dev, args.seed) if args.chat_dev.exists() else []
    t1 = time.perf_counter()
    results = run(cases + chat, args.sure)
    cascade = run(cases + chat, args.cascade_sure)
    t2 = time.perf_counter()
    method = verify("x[1]。", [Evidence(doc_id="m", chunk_id="m", text="x")], []).method
    all_splits = splits + sorted({c.split for c in chat})

    print(f"Machine: {describe()}\n")
    print(
        f"Method: `{method}`, KOTAE_VERIFIER_SURE={args.sure}; construction `{args.construction}`; "
        f"{len(cases)} JSQuAD and {len(chat)} chat-dev cases built in {t1 - t0:.1f} s, verified in {t2 - t1:.1f} s "
        f"({(t2 - t1) / max(1, len(cases) + len(chat)) * 1000:.2f} ms per answer).\n"
    )
    print(tables(results, all_splits))
    print(
        "\nBare answers (`<answer>です[1]。`, offline mode): the right one kept, a phrase of its type from the "
        "same paragraph caught. SLOT_WEIGHTS and SLOT_MARGIN were fitted on dev (bench/verifier_fit.py): "
        "held-out is the split they never saw. Placed nowhere: unsure only because the evidence cannot place "
        "them as the answer (no question words to place them by; supported before that rule).\n"
    )
    print(bare_table(results, all_splits))
    print(
        f"\nCascade (KOTAE_VERIFIER_MODE=cascade, KOTAE_VERIFIER_CASCADE_SURE={args.cascade_sure}): "
        "what the offline method decides without a model call.\n"
    )
    print(cascade_table(cascade, all_splits, model_passes=True))
    if args.model_cases:
        t3 = time.perf_counter()
        print(f"\nThe cascade run on up to {args.model_cases} unsure cases, against the local fake model server:\n")
        print(cascade_with_model(cascade, args.model_cases, args.cascade_sure))
        print(f"\n({time.perf_counter() - t3:.1f} s)")
    if args.jnli.exists():
        t3 = time.perf_counter()
        print("\nJNLI v1.3 validation (premise = cited context, hypothesis = answer):\n")
        print(jnli(args.jnli, args.limit, args.sure))
        print("\nJNLI, what word overlap alone can separate (no verifier: the ceiling of a lexical check):\n")
        print(jnli_word_overlap(args.jnli, args.limit))
        print(f"\n({time.perf_counter() - t3:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
