"""Whether an answer's evidence still stands after the knowledge base is loaded again."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from kotae.contracts import Citation, Evidence
from kotae.knowledge.records import KBRecord
from kotae.knowledge.standing import KnowledgeStanding
from kotae.knowledge.store import KnowledgeStore, chunk_record

DAY = date(2027, 4, 1)
FEE = KBRecord(id="fee", kind="doc", title="保育料", text="保育料は月1万円です。", version="1")
BUS = KBRecord(id="bus", kind="doc", title="バス", text="運賃は150円です。", version="1")


def cited(record: KBRecord) -> tuple[list[Citation], list[Evidence]]:
    chunk = chunk_record(record)[0]
    evidence = Evidence(doc_id=record.id, chunk_id=chunk.chunk_id, text=chunk.text, version=record.version)
    return [Citation(n=1, doc_id=record.id, chunk_id=chunk.chunk_id)], [evidence]


def test_evidence_stands_until_a_record_it_cites_changes(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "default")
    store.load([FEE, BUS])
    standing = KnowledgeStanding(tmp_path)
    first = standing.version("default")
    citations, docs = cited(FEE)
    assert standing.touched("default", citations, docs, DAY) is None
    # Another record's change moves the version but leaves this evidence standing.
    store.load([BUS.model_copy(update={"text": "運賃は200円です。"})])
    assert standing.version("default") != first
    assert standing.touched("default", citations, docs, DAY) is None
    # A new version of the cited record is a change; so is new text under the same version.
    store.load([FEE.model_copy(update={"version": "2"})])
    assert "fee" in (standing.touched("default", citations, docs, DAY) or "")
    store.load([FEE.model_copy(update={"text": "保育料は無料です。"})])
    assert "fee changed" in (standing.touched("default", citations, docs, DAY) or "")


def test_a_superseded_record_stands_for_nothing_after_its_end(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "default")
    store.load([FEE.model_copy(update={"valid_to": date(2027, 3, 31)})])
    citations, docs = cited(FEE)
    reason = KnowledgeStanding(tmp_path).touched("default", citations, docs, DAY)
    assert reason == "fee is not valid on 2027-04-01"


def test_a_knowledge_base_not_loaded_here_stands_for_nothing(tmp_path: Path) -> None:
    citations, docs = cited(FEE)
    standing = KnowledgeStanding(tmp_path)
    assert standing.version("default") is None
    assert standing.touched("default", citations, docs, DAY) == "knowledge base 'default' is not loaded here"
