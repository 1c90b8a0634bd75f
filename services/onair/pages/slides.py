"""The slide shown with an answer: the image its top-1 document names in the knowledge base.

The reranker's top-1 document decides the slide (``AnswerV1.slide`` is its
``slide``; ``AnswerV1.docs`` lists the evidence in that order). Its record's
``slide_image`` is a file the knowledge base load checked (served here as
``/slides/<kb>/<record id>``) or a URL (shown as it is). An FAQ entry aired
while chat is quiet shows its own record's slide.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kotae.contracts import AnswerV1, Citation
from kotae.knowledge.records import KBRecord, is_url
from kotae.services.onair.knowledge import KnowledgeView

#: Image types the stage serves from a knowledge base (anything else is not a slide).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "image/avif"})


@dataclass(frozen=True)
class Slide:
    """What the overlay shows: where the image is, the slide's number, the document's title."""

    url: str
    number: int | str | None
    doc_id: str
    title: str

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "number": self.number, "doc_id": self.doc_id, "title": self.title}


def top_document(answer: AnswerV1) -> list[str]:
    """Record ids that may hold the answer's slide, the most likely first: the top-1 document when its
    slide is the answer's, then the cited documents with that slide, then the rest of the evidence."""
    ids: list[str] = []
    if answer.docs and (answer.slide is None or answer.docs[0].slide == answer.slide):
        ids.append(answer.docs[0].doc_id)
    ids += [c.doc_id for c in answer.citations if answer.slide is not None and c.slide == answer.slide]
    ids += [d.doc_id for d in answer.docs if answer.slide is not None and d.slide == answer.slide]
    ids += [d.doc_id for d in answer.docs]
    return list(dict.fromkeys(ids))


def image_url(kb: str, record: KBRecord) -> str | None:
    if not record.slide_image:
        return None
    if is_url(record.slide_image):
        return record.slide_image
    return f"/slides/{quote(kb, safe='')}/{quote(record.id, safe='')}"


class SlideFinder:
    """Slides of answers and FAQ entries, read from the knowledge bases the stage already follows.

    Example::

        slides = SlideFinder(KnowledgeView(settings.kb_dir))
        slides.for_answer(answer)          # Slide(url='/slides/default/bus-fare-2027', number=6, …) or None
        slides.image_file("default", "bus-fare-2027")   # Path to serve, or None
    """

    def __init__(self, kb: KnowledgeView) -> None:
        self.kb = kb

    def _slide(self, kb: str, record: KBRecord) -> Slide | None:
        url = image_url(kb, record)
        if url is None:
            return None
        return Slide(url, record.slide, record.id, record.title or record.question or "")

    def for_answer(self, answer: AnswerV1) -> Slide | None:
        records = self.kb.records(answer.comment.kb)
        for doc_id in top_document(answer):
            record = records.get(doc_id)
            if record is not None and record.slide_image:
                return self._slide(answer.comment.kb, record)
        return None

    def for_citations(self, kb: str, citations: list[Citation], slide: int | str | None) -> Slide | None:
        """From an on-air event alone (a speaker that took over may no longer hold the answer): the cited
        document whose slide is the answer's."""
        records = self.kb.records(kb)
        ids = [c.doc_id for c in citations if slide is not None and c.slide == slide] + [c.doc_id for c in citations]
        for doc_id in dict.fromkeys(ids):
            record = records.get(doc_id)
            if record is not None and record.slide_image:
                return self._slide(kb, record)
        return None

    def for_record(self, kb: str, record_id: str) -> Slide | None:
        record = self.kb.records(kb).get(record_id)
        return self._slide(kb, record) if record is not None else None

    def image_file(self, kb: str, record_id: str) -> tuple[Path, str] | None:
        """(the image file of a record's slide, its content type); None when it has none (or a URL)."""
        try:
            record = self.kb.records(kb).get(record_id)
        except ValueError:  # not a knowledge base name
            return None
        if record is None or not record.slide_image or is_url(record.slide_image):
            return None
        path = Path(record.slide_image)
        kind = mimetypes.guess_type(path.name)[0]
        if kind not in IMAGE_TYPES or not path.is_file():
            return None
        return path, kind
