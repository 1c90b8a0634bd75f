"""The stream's knowledge base as the on-air stage reads it: superseded documents, and FAQ for quiet chat.

The records are those ``kotae kb load`` stored in ``KOTAE_DATA_DIR/kb/<name>``
(:class:`kotae.knowledge.store.KnowledgeStore`), read again only when its
manifest changes (a stat per look), so a reload is seen at the next turn. A
process without a local copy of the knowledge base (a deployment that indexes
elsewhere) sees no records: nothing is withdrawn as superseded and no FAQ airs,
and it says so once in its log.
"""

from __future__ import annotations

from datetime import date

import structlog

from kotae.contracts import AnswerV1
from kotae.knowledge.records import KBRecord
from kotae.knowledge.store import KnowledgeStore

log = structlog.get_logger("kotae.onair")


class KnowledgeView:
    """Current records of each knowledge base, by id.

    Example::

        kb = KnowledgeView(settings.kb_dir)
        kb.superseded(answer)                    # 'bus-fare-2027 is now version 2027.2 (was 2027.1)' or None
        kb.faq("default", date.today(), aired={"faq-party"})   # the next FAQ record to air, or None
    """

    def __init__(self, root: object) -> None:
        self.root = root
        self._cache: dict[str, tuple[tuple[int, int, int], dict[str, KBRecord]]] = {}
        self._missing_said: set[str] = set()

    def records(self, kb: str) -> dict[str, KBRecord]:
        store = KnowledgeStore(self.root, kb)  # type: ignore[arg-type]
        try:
            st = store.manifest_path.stat()
        except OSError:
            if kb not in self._missing_said:
                self._missing_said.add(kb)
                log.info("onair.kb_absent", kb=kb, path=str(store.dir), effect="no superseded check, no idle FAQ")
            return {}
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._cache.get(kb)
        if cached is None or cached[0] != stamp:
            cached = (stamp, {record.id: record for record in store.records()})
            self._cache[kb] = cached
        return cached[1]

    def superseded(self, answer: AnswerV1) -> str | None:
        """Why ``answer`` no longer stands: a document it cites was replaced, removed or expired since."""
        records = self.records(answer.comment.kb)
        if not records:
            return None
        day = answer.comment.published_at.date()
        versions = {doc.doc_id: doc.version for doc in answer.docs}
        for doc_id in dict.fromkeys(c.doc_id for c in answer.citations):
            record = records.get(doc_id)
            if record is None:
                return f"superseded: {doc_id} is no longer in the knowledge base"
            was = versions.get(doc_id)
            if was is not None and record.version != was:
                return f"superseded: {doc_id} is now version {record.version} (the answer used {was})"
            if not record.valid_on(day):
                return f"superseded: {doc_id} is not valid on {day.isoformat()} any more"
        return None

    def faq(self, kb: str, day: date, aired: set[str] | frozenset[str]) -> KBRecord | None:
        """The first FAQ entry (by id) valid on ``day`` that has not aired in this stream."""
        for record in sorted(self.records(kb).values(), key=lambda r: r.id):
            if record.kind == "faq" and record.id not in aired and record.valid_on(day):
                return record
        return None
