"""bench/oracle.py's label-answering model, on the prompts the reranker, generator and verifier really send."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kotae.citations import numbered_blocks
from kotae.contracts import Evidence, FaqEvidence
from kotae.services.generator.logic import NOT_FOUND
from kotae.services.generator.model import render_user as generator_prompt
from kotae.services.reranker.logic import render_candidates
from kotae.services.verifier.model import render_user as verifier_prompt
from tests.factories import comment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from oracle import MODEL, LabelOracle  # noqa: E402

TRANSPORT = (
    "路線バスの運賃は、県内どこまで乗っても上限300円にします。高校生以下は一律100円です。"
    "フェリーの便数は1日4便から6便に増やします。"
)
TOURISM = "観光振興のため、宿泊税を1人1泊200円で導入します。税収は年間およそ12億円を見込みます。"
KB = [
    {"id": "el-tourism", "kind": "doc", "title": "観光と宿泊税", "text": TOURISM, "lang": "ja"},
    {"id": "el-transport", "kind": "doc", "title": "バスとフェリー", "text": TRANSPORT, "lang": "ja"},
    {
        "id": "el-faq-04",
        "kind": "faq",
        "title": "よくある質問",
        "question": "宿泊税は県民も払うのですか？",
        "answer": "はい。県民も1人1泊200円がかかります。",
        "lang": "ja",
    },
]
QUESTIONS = [
    {
        "id": "q-fare",
        "text": "ﾊﾞｽ代いくら？",
        "kind": "answerable",
        "expected_doc_ids": ["el-transport"],
        "expected_facts": ["300円", "100円"],
        "note": "short: half-width katakana",
    },
]
OFFTOPIC = [{"id": "o-weather", "text": "明日って雨？", "kind": "offtopic", "note": "unrelated: weather"}]


@pytest.fixture
def oracle(tmp_path: Path) -> LabelOracle:
    for name, rows in (("kb", KB), ("questions", QUESTIONS), ("offtopic", OFFTOPIC)):
        lines = [json.dumps(r, ensure_ascii=False) for r in rows]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return LabelOracle.from_set(tmp_path)


def _evidence(record_id: str) -> Evidence:
    r = next(r for r in KB if r["id"] == record_id)
    return Evidence(doc_id=r["id"], chunk_id=f"{r['id']}#0", title=r["title"], text=r["text"], lang="ja")


FAQ = FaqEvidence(faq_id="el-faq-04", question=KB[2]["question"], answer=KB[2]["answer"], lang="ja")


def _ask(oracle: LabelOracle, user: str) -> str:
    reply = oracle.respond("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": user}]})
    assert reply is not None
    return reply


def test_the_reranker_keeps_only_the_expected_document_whatever_its_place(oracle: LabelOracle) -> None:
    blocks = numbered_blocks([_evidence("el-tourism"), _evidence("el-transport")], [FAQ])
    # The comment as the viewer typed it; the labels hold it in full width: matched after NFKC.
    user = render_candidates("ﾊﾞｽ代いくら？", blocks)
    assert json.loads(_ask(oracle, user)) == {"ids": [2]}
    assert json.loads(_ask(oracle, render_candidates("明日って雨？", blocks))) == {"ids": []}


def test_the_generator_says_the_record_sentences_holding_the_facts_with_their_citation(oracle: LabelOracle) -> None:
    blocks = numbered_blocks([_evidence("el-tourism"), _evidence("el-transport")], [FAQ])
    reply = _ask(oracle, generator_prompt(comment(text="ﾊﾞｽ代いくら？"), blocks))
    assert reply == "路線バスの運賃は、県内どこまで乗っても上限300円にします[2]。高校生以下は一律100円です[2]。"
    off = _ask(oracle, generator_prompt(comment(text="明日って雨？"), blocks))
    assert off == NOT_FOUND["ja"]
    # Without the expected document among the blocks, a perfect model finds nothing to say.
    assert _ask(oracle, generator_prompt(comment(text="ﾊﾞｽ代いくら？"), blocks[:1])) == NOT_FOUND["ja"]
    assert "no expected document among the candidates" in oracle.seen["q-fare"]


def test_the_verifier_passes_answerable_drafts_and_judges_the_rest_unanswered(oracle: LabelOracle) -> None:
    blocks = numbered_blocks([_evidence("el-transport")], [])
    draft = "路線バスの運賃は、県内どこまで乗っても上限300円にします[1]。"
    assert json.loads(_ask(oracle, verifier_prompt(draft, blocks, "ﾊﾞｽ代いくら？")))["verdict"] == 0
    assert json.loads(_ask(oracle, verifier_prompt(draft, blocks, "明日って雨？")))["verdict"] == 4


def test_an_faq_block_is_mapped_to_its_entry_and_quoted_from_its_answer(oracle: LabelOracle) -> None:
    blocks = numbered_blocks([_evidence("el-tourism")], [FAQ])
    shown = oracle.blocks(render_candidates("x", blocks), "Candidates / 候補:")
    assert [(b.n, b.record_id) for b in shown] == [(1, "el-tourism"), (2, "el-faq-04")]
    assert shown[1].claims() == KB[2]["answer"]
