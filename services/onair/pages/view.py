"""What the overlay and the console show, as JSON, built from the state every replica keeps.

The overlay gets one object: what is on air (its asker, its question once the
filters passed it, its subtitles with their times, its slide, its audio and when
it started and ends by the server's clock), whether the next answer is being
prepared, and the server's time, so a page that loads or reconnects mid-answer
knows where in the answer it is. The console gets the status ``kotae onair
status`` prints, with each answer's slide and the stages' health.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

from kotae.contracts import OnAirEventV1
from kotae.services.onair.pages.slides import Slide, SlideFinder
from kotae.services.onair.pages.subtitles import Cue, cues, split_sentences
from kotae.services.onair.state import OnAirState, key_of, now_utc
from kotae.services.onair.web import AudioShelf

#: Airings whose subtitles are kept computed (the one on air, and a few a reload may still ask for).
_CUES_KEPT = 16


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def _audio_id(url: str | None) -> str | None:
    if not url or not url.startswith("/audio/") or not url.endswith(".wav"):
        return None
    return url.removeprefix("/audio/").removesuffix(".wav")


class PageViews:
    """The overlay's and the console's view of one stream's state.

    Example::

        views = PageViews(state, shelf, SlideFinder(KnowledgeView(settings.kb_dir)), faq_kb="default")
        views.overlay()      # {"on_air": {...}, "preparing": False, "server_time": "...", ...}
    """

    def __init__(
        self, state: OnAirState, audio: AudioShelf, slides: SlideFinder, *, faq_kb: str, read_question: bool = False
    ) -> None:
        self.state = state
        self.read_question = read_question
        self.audio = audio
        self.slides = slides
        self.faq_kb = faq_kb
        self._cues: OrderedDict[tuple[str, int], list[dict[str, Any]]] = OrderedDict()

    def _slide(self, event: OnAirEventV1) -> Slide | None:
        if event.kind == "thanks":
            return None  # a thanks cites nothing: the slide of the answer it points to aired with that answer
        if event.kind == "faq":
            return self.slides.for_record(self.faq_kb, event.comment_id.removeprefix("faq:"))
        on_air = self.state.on_air
        if on_air is not None and on_air.entry is not None:
            return self.slides.for_answer(on_air.entry.answer)
        return self.slides.for_citations(self.faq_kb, event.citations, event.slide)

    def _cues_of(self, key: str, event: OnAirEventV1) -> list[dict[str, Any]]:
        known = self._cues.get((key, event.attempt))
        if known is not None:
            return known
        audio_id = _audio_id(event.audio_url)
        audio = self.audio.get(audio_id) if audio_id else None
        duration = event.audio_ms
        if duration is None and event.ends_at and event.started_at:
            duration = round((event.ends_at - event.started_at).total_seconds() * 1000)
        made = cues(
            answer=event.answer or "",
            speech=event.speech,
            lang=event.lang,
            wav=audio.wav if audio else None,
            duration_ms=duration or 0,
            question_read=self.read_question and event.kind == "answer" and event.question is not None,
        )
        found = [cue.as_dict() for cue in made]
        self._cues[(key, event.attempt)] = found
        while len(self._cues) > _CUES_KEPT:
            self._cues.popitem(last=False)
        return found

    def _sentence_cues(self, event: OnAirEventV1, said: list[Any]) -> list[dict[str, Any]]:
        """One cue per sentence announced, timed by its own clip: the displayed sentence (with its [N]
        markers) when the answer's sentences line up with the spoken ones, else what the voice says."""
        shown = split_sentences(event.answer or "") if event.kind != "thanks" else []
        of = said[0].of
        lead = of - len(shown) if self.read_question and event.kind == "answer" and event.question else 0
        lines_up = bool(shown) and of == len(shown) + max(0, lead)
        made = []
        for s in said:
            part = "question" if s.n <= lead else "answer"
            text = shown[s.n - lead - 1] if lines_up and part == "answer" else s.text
            made.append(Cue(text, s.offset_ms, s.offset_ms + s.audio_ms, part).as_dict())
        return made

    def on_air(self) -> dict[str, Any] | None:
        on_air = self.state.on_air
        if on_air is None:
            return None
        ev = on_air.event
        slide = self._slide(ev)
        others = max(0, len(ev.askers) - 1)
        return {
            "key": f"{on_air.key}:{ev.attempt}",
            "comment_id": ev.comment_id,
            "kind": ev.kind,
            "lang": ev.lang,
            "asker": (ev.author_name or ev.author) if ev.kind == "answer" else None,
            "question": ev.question,
            "others": others,
            "tier": ev.tier,
            "superchat": ev.superchat.model_dump() if ev.superchat else None,
            "answer": ev.answer,
            "cues": self._sentence_cues(ev, on_air.sentences) if on_air.sentences else self._cues_of(on_air.key, ev),
            "sentences": [s.model_dump() for s in on_air.sentences],
            "slide": slide.as_dict() if slide else None,
            "audio_url": ev.audio_url,
            "audio_ms": (on_air.latest or ev).audio_ms,
            "started_at": _iso(ev.started_at or ev.created_at),
            "ends_at": _iso(on_air.ends_at),
            "attempt": ev.attempt,
            "resumed": ev.resumed,
            "voice": ev.voice,
        }

    def preparing(self) -> bool:
        """Whether an answer is waiting to go on air and may (so the overlay says one is coming)."""
        session = self.state.session
        if self.state.on_air is not None or session.paused or session.ended:
            return False
        waiting = self.state.waiting()
        if session.hold:
            return any(self.state.approved(e) for e in waiting)
        return bool(waiting)

    def last_outcome(self) -> dict[str, Any] | None:
        """How the last airing (or answer) ended: the overlay lets a finished answer's audio play out,
        and cuts one that was skipped or withdrawn at once."""
        if not self.state.recent:
            return None
        event = self.state.recent[-1]
        return {"key": f"{key_of(event)}:{event.attempt}", "outcome": event.event, "reason": event.reason}

    def overlay(self) -> dict[str, Any]:
        session = self.state.session
        return {
            "server_time": now_utc().isoformat(),
            "stream_id": self.state.stream_id,
            "on_air": self.on_air(),
            "last": self.last_outcome(),
            "preparing": self.preparing(),
            "mode": {"paused": session.paused, "hold": session.hold, "ended": session.ended},
        }

    def console(self, health: dict[str, Any], replica: str) -> dict[str, Any]:
        status = self.state.snapshot()
        on_air = self.on_air()
        if status.get("on_air") and on_air:
            status["on_air"].update(slide=on_air["slide"], cues=on_air["cues"], tier=on_air["tier"])
        return {
            "server_time": now_utc().isoformat(),
            "replica": replica,
            "status": status,
            "health": health,
        }
