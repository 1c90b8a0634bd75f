"""A perfect model through the whole pipeline: what the offline floors and checks do to correct answers.

    python bench/oracle.py SET_DIR [SET_DIR …] [--keep DIR]

A set is a chat-dev folder (``kb.jsonl``, ``questions.jsonl``, ``offtopic.jsonl``,
``injection.jsonl``). A local OpenAI-compatible endpoint (``tests/fakes/model_server.py``)
answers from the set's labels, as a model that is never wrong would:

- as the **reranker** it keeps the candidates of the comment's expected documents (each
  numbered block mapped back to its knowledge-base record by title and text), the one holding
  most expected facts first, and none for an off-topic or injection comment;
- as the **generator** it says, from the numbered blocks of an expected document, the record
  sentences that hold the expected facts, each with its ``[N]`` (the sentence with most facts
  first); the generator's fixed not-found sentence for an off-topic or injection comment, or when
  no expected document is among the blocks;
- as the **verifier** it answers ``{"verdict": 0}`` for an answerable comment's draft, and class 4
  (does not answer) for any other comment's.

Each prompt's comment is found by its text (NFKC), as ``bench/chat_dev.py``'s rewrite endpoint
finds it. The set runs once through ``kotae eval`` (``bench/labelled_run.py``: embedded default,
``KOTAE_ADMIT_PER_MINUTE=0``) with ``KOTAE_RERANKER_MODEL``, ``KOTAE_GENERATOR_MODEL`` and
``KOTAE_VERIFIER_MODEL`` at ``compatible:<url>/v1|oracle`` and ``KOTAE_VERIFIER_RELEVANCE=model`` (the
model, not the offline check, judges whether a draft answers). Every answerable comment that is not
verified was stopped by something other than the model: its reasons are printed grouped by the
check that gave them (the retriever's gate, triage, the citation check, the lexical floor, the
relevance floor …), beside what the oracle saw (an expected document missing from the candidates
is the retriever's miss, not a check's veto); ``--keep DIR`` writes each set's per-comment records
with what the oracle saw of each (``oracle_saw``). Last line:
``oracle answerable verified N/M off-topic verified K/L``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the local model endpoint of the tests
from chat_dev import FILES, domain_tables  # noqa: E402
from labelled_run import run_eval  # noqa: E402
from machine import describe  # noqa: E402

from kotae.contracts import DraftV1, RerankV1, RetrievalV1  # noqa: E402
from kotae.language.text import split_sentences  # noqa: E402
from kotae.services import STAGES  # noqa: E402
from kotae.services.evaluator.labelled import fact_found, normalize_fact  # noqa: E402
from kotae.services.generator.logic import NOT_FOUND  # noqa: E402

MODEL = "oracle"


def _stage_taking(contract: type) -> str:
    """The name of the stage that consumes ``contract``, as the registry declares it."""
    return next(stage.name for stage in STAGES if stage.consumes is not None and stage.consumes.contract is contract)


#: The three stages whose prompts the oracle answers, named as the registry names them.
RERANKER, GENERATOR, VERIFIER = (_stage_taking(c) for c in (RetrievalV1, RerankV1, DraftV1))
#: A numbered block as the reranker, generator and verifier prompts show it.
_HEAD = re.compile(r"^\[(\d+)\] \((document|FAQ)\) ?(.*?)(?: — source: .*)?$", re.M)
#: The end of the last block in each prompt: the generator's question, the verifier's draft.
_TAIL = re.compile(r"\n\n(?:Question \(|Draft answer / )")


def plain(text: str) -> str:
    """Text as compared here: NFKC, no white space."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text) if not ch.isspace())


@dataclass(frozen=True)
class Shown:
    """One numbered block of a prompt, with the knowledge-base record it came from."""

    n: int
    kind: str  # "document" or "FAQ"
    record_id: str | None
    text: str

    def claims(self) -> str:
        """The text a claim may come from: an FAQ block's answer, not the question heading it."""
        return self.text.split("\n", 1)[1] if self.kind == "FAQ" and "\n" in self.text else self.text


@dataclass(frozen=True)
class Label:
    id: str
    kind: str
    docs: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fenced(user: str, after: str) -> str | None:
    """The text between ``<<<`` and ``>>>`` that follows ``after`` in a prompt."""
    start = user.find(after)
    if start < 0:
        return None
    m = re.search(r"<<<\n(.*?)\n>>>", user[start:], re.S)
    return m.group(1) if m else None


def with_citation(sentence: str, n: int) -> str:
    """``sentence`` with ``[n]`` before its closing punctuation."""
    sentence = sentence.strip()
    m = re.search(r"[。．.!?！？]+$", sentence)
    return f"{sentence[: m.start()]}[{n}]{m.group(0)}" if m else f"{sentence}[{n}]。"


@dataclass
class LabelOracle:
    """Answers the reranker, generator and verifier prompts of one labelled set as a perfect model would.

    Example::

        oracle = LabelOracle.from_set(Path("../shared/data/chat-dev/election"))
        with FakeModelServer(responder=oracle.respond) as server:
            ...  # KOTAE_GENERATOR_MODEL=compatible:{server.url}/v1|oracle

    ``seen`` keeps, per comment id, what the oracle saw (an expected document missing from the
    candidates, no expected fact in the expected blocks), so a miss can be told from a veto.
    """

    records: list[dict[str, Any]]
    labels: dict[str, Label]  # by the comment's text (NFKC, no white space)
    seen: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def from_set(cls, folder: Path, extra: list[Path] = ()) -> LabelOracle:  # type: ignore[assignment]
        labels = {}
        for path in [folder / f for f in FILES if (folder / f).is_file()] + list(extra):
            for row in read_jsonl(path):
                label = Label(
                    row["id"],
                    row["kind"],
                    tuple(row.get("expected_doc_ids") or ()),
                    tuple(row.get("expected_facts") or ()),
                )
                labels[plain(row["text"])] = label
        return cls(read_jsonl(folder / "kb.jsonl"), labels)

    # --- reading a prompt ---------------------------------------------------------------

    def record_of(self, kind: str, title: str, text: str) -> str | None:
        """The knowledge-base record a block shows: same kind and title, most of its sentences in the record."""
        faq = kind == "FAQ"
        said = [plain(s) for s in split_sentences(text.split("\n", 1)[-1] if faq else text) if plain(s)]
        best, held = None, 0
        for r in self.records:
            if (r.get("kind") == "faq") != faq:
                continue
            body = plain(r.get("answer") or "" if faq else r.get("text") or "")
            named = plain(r.get("question") if faq else r.get("title") or "") == plain(title)
            count = sum(s in body for s in said) + (len(said) + 1 if named else 0)
            if count > held:
                best, held = r["id"], count
        return best

    def blocks(self, user: str, start: str) -> list[Shown]:
        """The numbered blocks after ``start`` in a prompt, each mapped to its record."""
        body = user[user.find(start) + len(start) :]
        cut = _TAIL.search(body)
        body = body[: cut.start()] if cut else body
        heads = list(_HEAD.finditer(body))
        out = []
        for i, h in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
            text = body[h.end() : end].strip()
            out.append(Shown(int(h.group(1)), h.group(2), self.record_of(h.group(2), h.group(3), text), text))
        return out

    def label(self, comment: str | None, role: str) -> Label | None:
        """The labels of the comment a prompt holds; notes that the comment reached ``role``."""
        label = self.labels.get(plain(comment)) if comment is not None else None
        if label is not None:
            self.seen[label.id].add(f"reached the {role}")
        return label

    # --- answering ----------------------------------------------------------------------

    def respond(self, path: str, body: dict[str, Any]) -> str | None:
        """The reply to one chat request (FakeModelServer's responder); None for a request it does not know."""
        if body.get("model") != MODEL:
            return None
        user = body["messages"][-1]["content"]
        if "Draft answer / 検査する回答:" in user:
            return self.verify(user)
        if "Candidates / 候補:" in user:
            return self.rerank(user)
        if user.startswith("Documents / 資料:"):
            return self.generate(user)
        return None

    def _facts_held(self, block: Shown, label: Label) -> int:
        said = normalize_fact(block.claims())
        return sum(fact_found(said, f) for f in label.facts)

    def expected(self, blocks: list[Shown], label: Label) -> list[Shown]:
        """The blocks of the comment's expected documents, the one holding most expected facts first."""
        mine = [b for b in blocks if b.record_id in label.docs]
        if not mine:
            self.seen[label.id].add("no expected document among the candidates")
        return sorted(mine, key=lambda b: (-self._facts_held(b, label), b.n))

    def rerank(self, user: str) -> str:
        label = self.label(fenced(user, "Question / 質問:"), RERANKER)
        if label is None or label.kind != "answerable":
            return json.dumps({"ids": []})
        return json.dumps({"ids": [b.n for b in self.expected(self.blocks(user, "Candidates / 候補:"), label)]})

    def generate(self, user: str) -> str:
        m = re.search(r"Question \((\w+)\) / 質問:", user)
        lang = m.group(1) if m and m.group(1) in NOT_FOUND else "ja"
        label = self.label(fenced(user, "Question ("), GENERATOR)
        if label is None or label.kind != "answerable":
            return NOT_FOUND[lang]
        blocks = self.expected(self.blocks(user, "Documents / 資料:"), label)
        if not blocks:
            return NOT_FOUND[lang]
        sentences = [(b.n, s) for b in blocks for s in split_sentences(b.claims()) if s.strip()]
        chosen = self.covering(sentences, label.facts)
        if not chosen:
            self.seen[label.id].add("no expected fact in the expected blocks: said their first sentence")
            chosen = sentences[:1]
        return "".join(with_citation(s, n) for n, s in chosen)

    @staticmethod
    def covering(sentences: list[tuple[int, str]], facts: tuple[str, ...]) -> list[tuple[int, str]]:
        """Fewest sentences that hold every expected fact they can, the one holding most first."""
        held = [{f for f in facts if fact_found(normalize_fact(s), f)} for _, s in sentences]
        left, chosen = set(facts), []
        while left:
            k = max(range(len(sentences)), key=lambda i: (len(held[i] & left), -i), default=None)
            if k is None or not held[k] & left:
                break
            chosen.append(sentences[k])
            left -= held[k]
        return chosen

    def verify(self, user: str) -> str:
        label = self.label(fenced(user, "Question / 質問:"), VERIFIER)
        if label is not None and label.kind == "answerable":
            return json.dumps({"verdict": 0, "findings": []})
        problem = "the labels say the knowledge base does not answer this comment"
        return json.dumps({"verdict": 4, "findings": [{"problem": problem}]}, ensure_ascii=False)


@contextmanager
def oracle_models(oracle: LabelOracle) -> Iterator[dict[str, str]]:
    """The environment of a run whose reranker, generator and verifier models are ``oracle``."""
    from tests.fakes.model_server import FakeModelServer

    with FakeModelServer(responder=oracle.respond) as server:
        spec = f"compatible:{server.url}/v1|{MODEL}"
        # A perfect model judges relevance itself: the offline relevance check's doubt goes to it.
        yield {
            "KOTAE_RERANKER_MODEL": spec,
            "KOTAE_GENERATOR_MODEL": spec,
            "KOTAE_VERIFIER_MODEL": spec,
            "KOTAE_VERIFIER_RELEVANCE": "model",
        }


#: The check a reason names, by its opening words (first match wins).
_CHECKS = (
    ("merged_into", "merged into an earlier comment (its outcome)"),
    ("no_match", "retriever gate: no match"),
    ("clarify", "retriever gate: clarify"),
    ("not_covered", "retriever gate: not covered"),
    ("rerank_empty", "reranker: no candidate kept"),
    ("not_found: the model", "verifier model: does not answer"),
    ("not_found", "relevance floor: does not answer"),
    ("hallucination class", "verifier floors"),
    ("unsure", "verifier: unsure"),
    ("verifier_unavailable", "verifier unavailable"),
)


def check_of(record: dict[str, Any]) -> str:
    """The check that stopped an answerable comment, read from its outcome and reason."""
    reason = record.get("reason") or ""
    if record["outcome"] == "dropped":
        return "triage: dropped"
    return next((name for prefix, name in _CHECKS if reason.startswith(prefix)), f"{record['outcome']}: other")


def stopped(records: list[dict[str, Any]], oracle: LabelOracle) -> list[str]:
    """Markdown: the answerable comments not verified, grouped by the check that stopped them."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["kind"] == "answerable" and r["outcome"] != "verified":
            groups[check_of(r)].append(r)
    out = []
    for check, rows in sorted(groups.items(), key=lambda g: -len(g[1])):
        out.append(f"- **{check}** ({len(rows)})")
        for r in rows:
            seen = "; ".join(sorted(oracle.seen.get(r["id"], ()))) or "reached no model"
            out.append(f"  - {r['id']} ({r['category']}) [{seen}]: {(r['reason'] or '')[:160]}")
    return out


def tally(records: list[dict[str, Any]], kind: str) -> tuple[int, int]:
    rows = [r for r in records if r["kind"] == kind]
    return sum(r["outcome"] == "verified" for r in rows), len(rows)


def run_set(folder: Path, keep: Path | None = None) -> tuple[list[str], Counter[str]]:
    """One whole-pipeline run of ``folder`` under the oracle: its tables and the totals
    (``keep``: a folder to write its per-comment records to, with what the oracle saw of each)."""
    oracle = LabelOracle.from_set(folder)
    files = [folder / f for f in FILES if (folder / f).is_file()]
    with oracle_models(oracle) as env:
        run = run_eval(files, folder / "kb.jsonl", env=env)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        rows = [{**r, "oracle_saw": sorted(oracle.seen.get(r["id"], ()))} for r in run.records]
        lines = [json.dumps(r, ensure_ascii=False) for r in rows]
        (keep / f"{folder.name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (a, m), (k, n) = tally(run.records, "answerable"), tally(run.records, "offtopic")
    lines = domain_tables(folder.name, run.sets, run.seconds)
    drafted = [
        r for r in run.records if r["kind"] == "answerable" and f"reached the {GENERATOR}" in oracle.seen[r["id"]]
    ]
    lines += [
        f"{folder.name}: answerable verified {a}/{m}, off-topic verified {k}/{n}; "
        f"of the {len(drafted)} answerable comments that reached the models, "
        f"{sum(r['outcome'] == 'verified' for r in drafted)} verified",
        "",
    ]
    lines += stopped(run.records, oracle) or ["- every answerable comment verified"]
    return lines + [""], Counter({"a": a, "m": m, "k": k, "n": n})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="+", type=Path, help="labelled set folders (kb.jsonl, questions.jsonl, …)")
    ap.add_argument("--keep", type=Path, default=None, help="a folder for each set's per-comment records (JSONL)")
    args = ap.parse_args()
    print(f"Machine: {describe()}\n")
    total: Counter[str] = Counter()
    for folder in args.sets:
        lines, counts = run_set(folder, args.keep)
        print("\n".join(lines), flush=True)
        total += counts
    print(f"oracle answerable verified {total['a']}/{total['m']} off-topic verified {total['k']}/{total['n']}")


if __name__ == "__main__":
    main()
