"""kotae.services.onair.knowledge: superseded documents and the FAQ for quiet chat, from the stored knowledge base."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from kotae.knowledge.records import KBRecord
from kotae.knowledge.store import KnowledgeStore
from kotae.services.onair.knowledge import KnowledgeView
from tests.factories import CAP_EVIDENCE, verified_answer

DOC = KBRecord(id="childcare-2027", kind="doc", title="子育て", text="保育料の上限。", version="2027.1")
FAQ_A = KBRecord(id="faq-a", kind="faq", question="Q1?", answer="A1.", valid_to=date(2026, 1, 1))
FAQ_B = KBRecord(id="faq-b", kind="faq", question="Q2?", answer="A2.")
FAQ_C = KBRecord(id="faq-c", kind="faq", question="Q3?", answer="A3.")


def test_an_answer_whose_cited_document_changed_version_or_left_is_superseded(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "default")
    store.load([DOC])
    view = KnowledgeView(tmp_path)
    answer = verified_answer("c1", docs=[CAP_EVIDENCE.model_copy(update={"version": "2027.1"})])
    assert view.superseded(answer) is None
    store.load([DOC.model_copy(update={"version": "2027.2"})])  # a reload is seen at the next look
    assert view.superseded(answer) == "superseded: childcare-2027 is now version 2027.2 (the answer used 2027.1)"
    elsewhere = verified_answer("c2", docs=[CAP_EVIDENCE.model_copy(update={"doc_id": "gone-2027"})])
    assert view.superseded(elsewhere) == "superseded: gone-2027 is no longer in the knowledge base"


def test_without_a_stored_knowledge_base_nothing_is_superseded_and_no_faq_airs(tmp_path: Path) -> None:
    view = KnowledgeView(tmp_path)
    assert view.superseded(verified_answer("c1")) is None
    assert view.faq("default", date(2026, 11, 30), set()) is None


def test_the_faq_for_quiet_chat_is_the_first_current_one_not_aired_yet(tmp_path: Path) -> None:
    KnowledgeStore(tmp_path, "default").load([DOC, FAQ_C, FAQ_B, FAQ_A])
    view = KnowledgeView(tmp_path)
    day = date(2026, 11, 30)
    assert view.faq("default", day, set()) == FAQ_B  # faq-a expired; by id, faq-b before faq-c
    assert view.faq("default", day, {"faq-b"}) == FAQ_C
    assert view.faq("default", day, {"faq-b", "faq-c"}) is None
