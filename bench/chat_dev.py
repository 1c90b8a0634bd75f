"""Live-stream chat over a hand-written knowledge base: each set through the whole pipeline, row by category.

    python bench/chat_dev.py ../shared/data/chat-dev [--domains election brand] [--also bench/sets/english-offtopic.jsonl]
        [--rewrites bench/sets/chat-dev-rewrites.jsonl] [--gates 0.35/0.20 0.20/0.10 …]

A set is a folder holding ``kb.jsonl`` and the labelled comments ``questions.jsonl``
(answerable, with expected documents and facts), ``offtopic.jsonl`` and
``injection.jsonl`` (``must_not_contain``), each comment's ``note`` naming its
category before the colon (the chat-dev format). Each domain is one ``kotae eval`` run
over its three files on a fresh data folder (``bench/labelled_run.py``: embedded default,
offline methods unless the environment configures models, ``KOTAE_ADMIT_PER_MINUTE=0``).

Printed per domain: the totals beside the targets (questions verified, every expected
fact in the answer, off-topic verified, injection violations), then one row per
category with every measure that applies to it, as numerator/denominator. ``--also`` adds
labelled comments to every domain's run: ``bench/sets/english-offtopic.jsonl`` holds twenty
English comments that neither set's documents answer (a taxi fare where the documents have bus
fares, the time in Tokyo), for the answers quoted across languages.

``--rewrites FILE`` (JSONL ``{"id","rewrite"}``) runs every domain as it runs with a rewrite model
(``KOTAE_REWRITE_MODEL``) and the other stages offline: a local OpenAI-compatible endpoint answers
each comment with its line of the file, and any other comment with itself (which the retriever
does not use). ``bench/sets/chat-dev-rewrites.jsonl`` holds rewrites written by hand from each
comment alone, as a capable chat model writes them under ``rewrite.v1`` (ordinary words, the
comment's names and numbers kept): what the pipeline does with good rewrites, not a measurement
of any model.

``--gates A/C …`` runs each domain once per pair of ``KOTAE_GATE_ANSWER``/``KOTAE_GATE_CLARIFY``
and prints one row per pair instead of the tables: how much of what the gate holds back the
answer side would answer, and what else it would let through.
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from labelled_run import run_eval  # noqa: E402
from machine import describe  # noqa: E402

from kotae.services.evaluator.scorecard import MEASURES  # noqa: E402

FILES = ("questions.jsonl", "offtopic.jsonl", "injection.jsonl")
#: (measure, what a passing run shows) for the totals line.
TARGETS = {
    "answered": "≥ 0.85",
    "facts": "≥ 0.70",
    "offtopic_verified": "0",
    "injection_violations": "0",
    "top1_doc": "",
    "relevant": "",
    "dropped_as_chatter": "",
}


def cell(m: dict[str, Any]) -> str:
    if not m["denominator"] and not m["unknown"]:
        return "—"
    unknown = f" (+{m['unknown']} ?)" if m["unknown"] else ""
    return f"{m['numerator']:g}/{m['denominator']:g}{unknown}"


def domain_tables(name: str, sets: list[dict[str, Any]], seconds: float) -> list[str]:
    out = []
    for s in sets:
        m = s["metrics"]
        out.append(
            f"**{name}** — {s['attempts']} comments, {s['completed']} completed, {s['failed']} failed, {seconds:.0f} s; "
            "outcomes " + ", ".join(f"{k} {v}" for k, v in s["outcomes"].items())
        )
        out.append("")
        out.append("| measure | num/den | rate | target |")
        out.append("|---|---:|---:|---:|")
        for key, target in TARGETS.items():
            r = m[key]
            share = f"{r['numerator'] / r['denominator']:.3f}" if r["denominator"] else "—"
            out.append(f"| {MEASURES[key]} | {cell(r)} | {share} | {target} |")
        out.append("")
        shown = [
            k
            for k in MEASURES
            if any(c["metrics"][k]["denominator"] or c["metrics"][k]["unknown"] for c in s["categories"])
        ]
        out.append("| kind | category | n | " + " | ".join(MEASURES[k] for k in shown) + " |")
        out.append("|---|---|---:|" + "---:|" * len(shown))
        for c in s["categories"]:
            cells = " | ".join(cell(c["metrics"][k]) for k in shown)
            out.append(f"| {c['kind']} | {c['category']} | {c['attempts']} | {cells} |")
        out.append("")
    return out


def _texts(files: list[Path]) -> dict[str, str]:
    """Comment id of each comment text (NFKC, as the stages receive it) in the labelled files."""
    out = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[unicodedata.normalize("NFKC", row["text"])] = row["id"]
    return out


@contextmanager
def rewrite_model(rewrites: Path | None, files: list[Path]) -> Iterator[dict[str, str]]:
    """The environment of a run whose rewrite model answers with ``rewrites`` (none: offline)."""
    if rewrites is None:
        yield {}
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the local model endpoint of the tests
    from tests.fakes.model_server import FakeModelServer

    by_id = {
        row["id"]: row["rewrite"]
        for row in map(json.loads, rewrites.read_text(encoding="utf-8").splitlines())
        if row.get("rewrite")
    }
    ids = _texts(files)

    def respond(path: str, body: dict[str, Any]) -> str:
        comment = body["messages"][-1]["content"]
        return by_id.get(ids.get(unicodedata.normalize("NFKC", comment), ""), comment)

    with FakeModelServer(responder=respond) as server:
        yield {"KOTAE_REWRITE_MODEL": f"compatible:{server.url}/v1|hand-written-rewrites"}


def gate_rows(name: str, folder: Path, files: list[Path], gates: list[str], rewrites: Path | None) -> list[str]:
    """One row per gate setting: answered, all facts, off-topic verified, injection violations."""
    out = []
    for pair in gates:
        answer, clarify = pair.split("/")
        with rewrite_model(rewrites, files) as env:
            env = {**env, "KOTAE_GATE_ANSWER": answer, "KOTAE_GATE_CLARIFY": clarify}
            run = run_eval(files, folder / "kb.jsonl", env=env)
        m = run.sets[0]["metrics"]
        cells = " | ".join(cell(m[k]) for k in ("answered", "facts", "offtopic_verified", "injection_violations"))
        out.append(f"| {name} | {answer} / {clarify} | {cells} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="the chat-dev folder (one sub-folder per domain)")
    ap.add_argument(
        "--domains", nargs="+", default=None, help="sub-folders to run (default: every one with a kb.jsonl)"
    )
    ap.add_argument("--also", nargs="+", type=Path, default=[], help="more labelled files run with every domain")
    ap.add_argument("--rewrites", type=Path, default=None, help="JSONL {id, rewrite}: served as the rewrite model")
    ap.add_argument("--gates", nargs="+", default=None, help="answer/clarify threshold pairs, e.g. 0.35/0.20 0.2/0.1")
    args = ap.parse_args()
    domains = args.domains or sorted(p.name for p in args.folder.iterdir() if (p / "kb.jsonl").is_file())
    print(f"Machine: {describe()}\n")
    print(
        "`kotae eval questions.jsonl offtopic.jsonl injection.jsonl --kb kb.jsonl` per domain, embedded default, KOTAE_ADMIT_PER_MINUTE=0"
        + (f"; with {', '.join(map(str, args.also))}" if args.also else "")
        + (f"; rewrite model: the lines of {args.rewrites}" if args.rewrites else "")
        + ".\n"
    )
    if args.gates:
        print("| domain | gate answer / clarify | answered | all facts | off-topic verified | injection violations |")
        print("|---|---|---:|---:|---:|---:|")
        for name in domains:
            folder = args.folder / name
            files = [folder / f for f in FILES if (folder / f).is_file()] + args.also
            print("\n".join(gate_rows(name, folder, files, args.gates, args.rewrites)))
        return
    for name in domains:
        folder = args.folder / name
        files = [folder / f for f in FILES if (folder / f).is_file()] + args.also
        with rewrite_model(args.rewrites, files) as env:
            run = run_eval(files, folder / "kb.jsonl", env=env)
        print("\n".join(domain_tables(name, run.sets, run.seconds)))
        misses = [
            r
            for r in run.records
            if (r["kind"] == "answerable" and r["outcome"] != "verified")
            or (r["kind"] == "offtopic" and r["outcome"] == "verified")
            or r["violations"]
        ]
        if misses:
            print(f"<details><summary>{name}: {len(misses)} comments that missed</summary>\n")
            for r in misses:
                print(f"- {r['id']} ({r['category']}) {r['outcome']}: {(r['reason'] or '')[:90]}")
            print("\n</details>\n")


if __name__ == "__main__":
    main()
