"""CPU the language layer spends on one comment: what the answer side reads of it, offline.

    python bench/language.py ../shared/data/chat-dev [--repeat 3]

For every comment of every chat-dev domain (questions, off-topic comments, injection attempts),
each against the sentences of its expected record (the domain's first record when it has none),
the calls the retriever, the extractive generator and the verifier make of the language layer:
the comment's search tokens, key terms, analysis and focus; relevance of each sentence of the
record to the comment; the offline verifier's check of each sentence as a cited answer. The
records' own sentences are read once first, as a running stage has them cached; each comment is
new text, as on a stream. Prints CPU milliseconds per comment (p50, p95, mean) per domain, with
the machine. Process CPU time, not wall time, so a busy machine changes it less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.citations import Block  # noqa: E402
from kotae.language.question_focus import question_focus  # noqa: E402
from kotae.language.relevance import relevance  # noqa: E402
from kotae.language.sentence_analysis import analyse, evidence_sentences  # noqa: E402
from kotae.language.terms import key_terms  # noqa: E402
from kotae.language.text import search_tokens, split_sentences  # noqa: E402
from kotae.services.verifier.logic import check_answer  # noqa: E402

FILES = ("questions.jsonl", "offtopic.jsonl", "injection.jsonl")


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _record_text(record: dict) -> str:
    return record.get("text") or f"{record.get('question', '')} {record.get('answer', '')}"


def one_comment(text: str, record: dict) -> None:
    """The language layer's work for one comment against one record."""
    body = _record_text(record)
    search_tokens(text)
    key_terms(text)
    analyse(text)
    question_focus(text)
    block = Block(1, "doc", record["id"], None, record.get("title", ""), body, None, None, None)
    for sentence in split_sentences(body):
        relevance(text, [sentence], [(block.title, body)])
        check_answer(f"{sentence}[1]", [block], text)


def domain_cpu(folder: Path) -> list[float]:
    records = {r["id"]: r for r in _read(folder / "kb.jsonl")}
    first = next(iter(records.values()))
    for record in records.values():  # the records' sentences, read once as a running stage has them
        evidence_sentences(_record_text(record))
        search_tokens(_record_text(record))
    out = []
    for name in FILES:
        for comment in _read(folder / name):
            expected = [records[d] for d in comment.get("expected_doc_ids", []) if d in records]
            record = expected[0] if expected else first
            start = time.process_time()
            one_comment(comment["text"], record)
            out.append((time.process_time() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chat_dev", type=Path, help="the chat-dev folder (one folder a domain)")
    args = parser.parse_args()
    domains = sorted(p for p in args.chat_dev.iterdir() if (p / "kb.jsonl").exists())
    if not domains:
        parser.error(f"{args.chat_dev}: no domain folder with a kb.jsonl")
    one_comment(
        "ウォームアップ", {"id": "w", "text": "ウォームアップの文です。"}
    )  # dictionaries loaded outside the timing
    print(f"Machine: {describe()}\n")
    print("| domain | comments | CPU ms p50 | p95 | mean |")
    print("|---|---:|---:|---:|---:|")
    every: list[float] = []
    for folder in domains:
        ms = domain_cpu(folder)
        every += ms
        p95 = statistics.quantiles(ms, n=20)[-1]
        print(f"| {folder.name} | {len(ms)} | {statistics.median(ms):.1f} | {p95:.1f} | {statistics.fmean(ms):.1f} |")
    p95 = statistics.quantiles(every, n=20)[-1]
    print(f"| all | {len(every)} | {statistics.median(every):.1f} | {p95:.1f} | {statistics.fmean(every):.1f} |")


if __name__ == "__main__":
    main()
