"""The on-air stage's state: the same in every replica, built from what the streams say.

Every replica reads every verified answer, every merged duplicate, every
moderation event, every operator command and every on-air event (its own and the
speaker's), and applies them here, so a standby knows the queue, what is on air
and what already aired when it takes over. Only the speaker decides
(:mod:`kotae.services.onair.airing`); what it decides comes back here as events,
applied at once by the speaker and again (ignored, by message id) when the
stream delivers them.

Operator state that outlives the rebuild window (pause, hold, the end of the
stream, blocked viewers, approvals, the FAQ already aired) is a :class:`Session`,
which the speaker keeps in the stage's key-value bucket with the sequence of the
last command it includes.

All of it belongs to a :class:`Show`: an answer verified (or a comment received)
before the show began, an on-air event or a command sent before it, is of an
earlier show (a rehearsal, yesterday's stream) and never airs or applies in it.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from kotae.citations import strip_markers
from kotae.contracts import AnswerV1, Asker, ControlV1, ModerationV1, OnAirEventV1, subjects
from kotae.contracts.v1 import SpokenSentence
from kotae.language.text import normalize, search_tokens
from kotae.services.onair.placement import placement, verdict_words
from kotae.services.onair.policy import Aired, Entry, Policy, cooling, rank_key, ranked
from kotae.services.onair.question import shown_question
from kotae.services.onair.shows import Show
from kotae.services.onair.spoken import SpokenText
from kotae.services.onair.thanks import Thanks, ThanksWords, thanks_due
from kotae.services.onair.waiting import first_of

log = structlog.get_logger("kotae.onair")

FINAL = frozenset(subjects.AIR_OUTCOMES)
#: Event ids remembered to recognise the speaker's own events when the stream delivers them.
_APPLIED_KEPT = 50_000
#: Final outcomes shown by ``status``.
_RECENT_KEPT = 50
#: A skip that names nothing is for what is on air when it is sent; older than this it is stale.
SKIP_FRESH_S = 30.0


def now_utc() -> datetime:
    return datetime.now(UTC)


def spoken_form(answer: AnswerV1) -> str:
    """An answer's words as they would be said, normalised: equal for the same reply whatever its markers."""
    return normalize(answer.speech or strip_markers(answer.answer or "")).replace(" ", "")


#: Commands that outlive a show: a blocked viewer stays blocked, and hold stays as the operator set it.
_KEPT_ACROSS_SHOWS = frozenset({"block", "hold"})


@dataclass
class Session:
    """What the operator set for this stream, kept across restarts (the stage's KV bucket)."""

    paused: bool = False
    hold: bool = False
    ended: bool = False
    blocked: dict[str, str] = field(default_factory=dict)  # author -> operator who blocked them
    approved: dict[str, str] = field(default_factory=dict)  # comment id -> operator
    rejected: dict[str, str] = field(default_factory=dict)  # comment id -> operator
    faq_aired: list[str] = field(default_factory=list)
    next_up: dict[str, str] = field(default_factory=dict)  # comment id -> operator, the latest "air next" last
    control_seq: int = 0  # the last command (control stream sequence) this session includes

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> Session:
        if not data:
            return cls()
        raw = json.loads(data)
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})


@dataclass
class OnAir:
    """What is on air now (or was, when its speaker stopped before saying how it ended)."""

    key: str
    event: OnAirEventV1  # its `started` event
    entry: Entry | None  # None for an FAQ entry
    attempt: int = 1
    #: Its sentences announced so far (``started``'s, then each ``sentence`` event's), first first.
    sentences: list[SpokenSentence] = field(default_factory=list)
    latest: OnAirEventV1 | None = None  # its last ``sentence`` event

    def __post_init__(self) -> None:
        if not self.sentences and self.event.sentence is not None:
            self.sentences = [self.event.sentence]

    @property
    def ends_at(self) -> datetime:
        """When what has been announced of it ends (the last sentence announced)."""
        if self.latest is not None and self.latest.ends_at is not None:
            return self.latest.ends_at
        return self.event.ends_at or self.event.created_at

    @property
    def complete(self) -> bool:
        """Whether every sentence it says has been announced (an airing in one clip always is)."""
        return self.event.sentence is None or len(self.sentences) >= self.event.sentence.of

    def add_sentence(self, event: OnAirEventV1) -> None:
        """A ``sentence`` event of this airing: its clip is on air next."""
        if event.sentence is not None and all(s.n != event.sentence.n for s in self.sentences):
            self.sentences.append(event.sentence)
            self.latest = event


@dataclass(frozen=True)
class Ban:
    source: str
    until: datetime | None  # None: permanent


class OnAirState:
    """Queue, on-air answer, history and operator session of one live stream.

    Example::

        state = OnAirState("default", Policy())
        state.on_answer(verified_answer, seq=41)
        state.on_moderation(ModerationV1(stream_id="default", action="message_deleted", comment_id="c9", source="youtube"))
        state.withdrawal(state.entries[key])      # 'message_deleted (youtube)'
        state.on_event(started_event)             # what the speaker did
    """

    def __init__(
        self,
        stream_id: str,
        policy: Policy,
        *,
        clock: Callable[[], datetime] = now_utc,
        window_s: float | None = None,
        spoken: SpokenText | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.policy = policy
        self.clock = clock
        #: What the voice will say for an entry (the speaker's text, shown for approval).
        self.spoken = spoken or SpokenText(read_question=False, thanks=ThanksWords.load())
        #: The show on air; None until the process names it (then nothing of an earlier show applies).
        self.show: Show | None = None
        #: How long finals, withdrawals and airings are remembered (what a rebuild reads back).
        self.window_s = window_s or max(policy.max_age_s, policy.repeat_s, policy.cooldown_s) + 60.0
        self.entries: dict[str, Entry] = {}
        self.on_air: OnAir | None = None
        self.session = Session()
        self.finals: OrderedDict[str, tuple[str, datetime]] = OrderedDict()
        self.queued_keys: set[str] = set()
        self.starts: dict[str, int] = {}
        self.merged: dict[str, list[Asker]] = {}
        self._merged_at: dict[str, datetime] = {}
        self.deleted: dict[str, tuple[str, datetime]] = {}
        self.banned: dict[str, Ban] = {}
        self.aired: deque[Aired] = deque()
        self.last_aired: dict[str, datetime] = {}
        self.last_finished_at: datetime | None = None
        self.idle_since: datetime | None = clock()
        self.skip_requested: tuple[str, str] | None = None  # (key on air, operator)
        self.recent: deque[OnAirEventV1] = deque(maxlen=_RECENT_KEPT)
        self._applied: OrderedDict[str, None] = OrderedDict()
        self._by_comment: dict[str, str] = {}
        self.version = 0
        self._next_change = asyncio.Event()  # set by the change that ends the current version

    def begin_show(self, show: Show, *, new: bool) -> None:
        """Air ``show`` from now on; a ``new`` one starts with a fresh session (blocked viewers and hold kept)."""
        self.show = show
        if new:
            old = self.session
            self.session = Session(hold=old.hold, blocked=dict(old.blocked), control_seq=old.control_seq)
        log.info("onair.show", show_id=show.id, started_at=show.started_at.isoformat(), new=new)
        self._changed()

    def of_this_show(self, at: datetime | None) -> bool:
        return self.show is None or self.show.has(at)

    # --- inputs -------------------------------------------------------------------

    def on_answer(self, answer: AnswerV1, seq: int, traceparent: str | None = None) -> Entry | None:
        """A verified answer joins the queue; a merged duplicate credits its asker to the earlier question."""
        if answer.stream_id != self.stream_id:
            return None
        if answer.outcome == "dropped" and answer.merged_into:
            self._credit(answer.merged_into, _asker(answer))
            return None
        thanks = None
        if answer.outcome != "verified":
            thanks = thanks_due(answer)
            if thanks is None:
                return None
        if not (self.of_this_show(answer.created_at) and self.of_this_show(answer.comment.created_at)):
            return None  # verified before this show began: it belonged to an earlier one
        key = answer.message_id
        if key in self.finals or key in self.entries:
            return None
        entry = Entry(
            answer=answer,
            seq=seq,
            tokens=frozenset(search_tokens(answer.comment.normalized)),
            spoken=spoken_form(answer),
            traceparent=traceparent,
            askers=[_asker(answer), *self.merged.get(answer.comment_id, [])],
            queued=key in self.queued_keys,
            thanks=thanks,
        )
        self._by_comment[answer.comment_id] = key
        if self.on_air is not None and self.on_air.key == key:
            self.on_air.entry = entry  # its `started` came first (a rebuild reads the streams side by side)
            return entry
        self.entries[key] = entry
        self._changed()
        return entry

    def _credit(self, target: str, asker: Asker) -> None:
        askers = self.merged.setdefault(target, [])
        self._merged_at[target] = self.clock()
        if any(a.comment_id == asker.comment_id for a in askers):
            return
        askers.append(asker)
        key = self._by_comment.get(target)
        entry = self.entries.get(key) if key else None
        if entry is not None and all(a.comment_id != asker.comment_id for a in entry.askers):
            entry.askers.append(asker)
            self._changed()

    def on_moderation(self, event: ModerationV1) -> None:
        """A deleted comment or a banned viewer: nothing of theirs airs from now on."""
        if event.stream_id != self.stream_id:
            return
        at = event.at or event.created_at
        if event.action == "message_deleted" and event.comment_id:
            self.deleted[event.comment_id] = (event.source, at)
        elif event.action == "user_banned" and event.author:
            until = None
            if event.ban_type == "temporary" and event.ban_duration_s is not None:
                until = at + timedelta(seconds=event.ban_duration_s)
            self.banned[event.author] = Ban(event.source, until)
        log.info(
            "onair.moderation",
            action=event.action,
            comment_id=event.comment_id,
            author=event.author,
            source=event.source,
        )
        self._changed()

    def on_control(self, command: ControlV1, sender: str, seq: int = 0) -> None:
        """An operator's command, from the NATS user ``sender`` (the subject says who sent it)."""
        if command.stream_id != self.stream_id:
            return
        if seq and seq <= self.session.control_seq:
            return  # already in the session this process started from
        self.session.control_seq = max(self.session.control_seq, seq)
        if command.command not in _KEPT_ACROSS_SHOWS and not self.of_this_show(command.created_at):
            return  # sent to an earlier show
        session = self.session
        name, target = command.command, command.target
        if name == "skip":
            self._request_skip(command, sender)
        elif name == "pause":
            session.paused = True
        elif name == "resume":
            if session.ended:  # a new stream on the same id: what aired before may air again
                session.faq_aired.clear()
            session.paused = session.ended = False
        elif name == "hold":
            session.hold = target == "on"
        elif name in ("next", "approve", "reject", "block") and target:
            self._on_target(name, target, sender)
        elif name == "end":
            session.ended = True
        log.info(
            "onair.command", command=name, target=target, user=sender, issued_by=command.issued_by, via=command.via
        )
        self._changed()

    def _on_target(self, name: str, target: str, sender: str) -> None:
        """A command about one comment (next, approve, reject) or one viewer (block)."""
        session = self.session
        if name == "reject":
            session.rejected[target] = sender
        elif name == "block":
            session.blocked[target] = sender
        else:
            if name == "next":
                session.next_up.pop(target, None)
                session.next_up[target] = sender  # the latest "air next" goes first
            session.approved.setdefault(target, sender)  # in hold mode, what the operator chose may air
            self._approve(target, sender)

    def _request_skip(self, command: ControlV1, sender: str) -> None:
        on_air = self.on_air
        if on_air is None:
            return
        if command.target is not None:
            if on_air.event.comment_id == command.target:
                self.skip_requested = (on_air.key, sender)
        elif (self.clock() - command.created_at).total_seconds() <= SKIP_FRESH_S:
            self.skip_requested = (on_air.key, sender)

    def _approve(self, comment_id: str, sender: str) -> None:
        key = self._by_comment.get(comment_id)
        entry = self.entries.get(key) if key else None
        if entry is not None:
            entry.approved_by = sender

    def on_event(self, event: OnAirEventV1) -> bool:
        """What the speaker did (this process, or another). False when it was applied already."""
        if event.message_id in self._applied or event.stream_id != self.stream_id:
            return False
        if not self._of_this_show_event(event):
            return False  # what an earlier show did
        self._applied[event.message_id] = None
        while len(self._applied) > _APPLIED_KEPT:
            self._applied.popitem(last=False)
        key = key_of(event)
        if event.event == "queued":
            self.queued_keys.add(key)
            if key in self.entries:
                self.entries[key].queued = True
        elif event.event == "started":
            self._started(key, event)
        elif event.event == "sentence":
            if self.on_air is not None and self.on_air.key == key and self.on_air.attempt == event.attempt:
                self.on_air.add_sentence(event)
        elif event.event in FINAL:
            self._final(key, event)
        self._changed()
        return True

    def _of_this_show_event(self, event: OnAirEventV1) -> bool:
        if self.show is None:
            return True
        if event.show_id is not None and event.show_id != self.show.id:
            return False
        return self.of_this_show(event.created_at)

    def _started(self, key: str, event: OnAirEventV1) -> None:
        self.starts[key] = max(self.starts.get(key, 0), event.attempt)
        entry = self.entries.pop(key, None)
        if entry is None and self.on_air is not None and self.on_air.key == key:
            entry = self.on_air.entry
        if entry is not None and event.kind == "thanks" and entry.thanks is None:
            entry.thanks = Thanks(event.reason or "thanked", event.credited_to)  # what a standby rebuilds
        self.on_air = OnAir(key, event, entry, event.attempt)
        at = event.started_at or event.created_at
        tokens = entry.tokens if entry else frozenset(search_tokens(event.question or ""))
        spoken = entry.spoken if entry else normalize(event.speech or "").replace(" ", "")
        if event.kind == "thanks":
            tokens, spoken = frozenset(), ""  # a thanks answered nothing: no later question repeats it
        self.aired.append(Aired(event.comment_id, event.author, tokens, spoken, at))
        if event.author:
            self.last_aired[event.author] = at
        if event.kind == "faq":
            faq_id = event.comment_id.removeprefix("faq:")
            if faq_id not in self.session.faq_aired:
                self.session.faq_aired.append(faq_id)

    def _final(self, key: str, event: OnAirEventV1) -> None:
        self.finals[key] = (event.event, event.created_at)
        self.session.next_up.pop(event.comment_id, None)
        self.entries.pop(key, None)
        if self.on_air is not None and self.on_air.key == key:
            self.on_air = None
            self.last_finished_at = event.created_at
        if self.skip_requested and self.skip_requested[0] == key:
            self.skip_requested = None
        self.recent.append(event)

    def restore(self, session: Session) -> None:
        """Start from the session the speaker last kept (before the commands sent since)."""
        self.session = session
        self._changed()

    # --- what the rules ask of the state ------------------------------------------

    def withdrawal(self, entry: Entry) -> tuple[str, str | None] | None:
        """(reason, operator) when ``entry`` must not air: deleted, banned, blocked or rejected."""
        comment = entry.answer.comment
        deleted = self.deleted.get(comment.comment_id)
        if deleted:
            return f"message_deleted ({deleted[0]})", None
        ban = self.banned.get(comment.author)
        if ban is not None and (ban.until is None or comment.published_at <= ban.until):
            return f"user_banned ({ban.source}{'' if ban.until else ', permanent'})", None
        by = self.session.blocked.get(comment.author)
        if by is not None:
            return f"blocked by {by}", by
        by = self.session.rejected.get(comment.comment_id)
        if by is not None:
            return f"rejected by {by}", by
        return None

    def approved(self, entry: Entry) -> str | None:
        return entry.approved_by or self.session.approved.get(entry.comment_id)

    def waiting(self) -> list[Entry]:
        """The queue in rank order (hold mode's approvals applied)."""
        pins = {cid: rank for rank, cid in enumerate(self.session.next_up, 1)}
        for entry in self.entries.values():
            if entry.approved_by is None and entry.comment_id in self.session.approved:
                entry.approved_by = self.session.approved[entry.comment_id]
            entry.next_rank = pins.get(entry.comment_id, 0)
        return ranked(self.entries.values(), self.policy)

    def recent_aired(self, now: datetime) -> list[Aired]:
        horizon = now - timedelta(seconds=self.window_s)
        while self.aired and self.aired[0].at < horizon:
            self.aired.popleft()
        return list(self.aired)

    def prune(self, now: datetime) -> None:
        """Forget what no rule can need any more (older than the window)."""
        horizon = now - timedelta(seconds=self.window_s)
        while self.finals and next(iter(self.finals.values()))[1] < horizon:
            key, _ = self.finals.popitem(last=False)
            self.queued_keys.discard(key)
            self.starts.pop(key, None)
        self.deleted = {cid: v for cid, v in self.deleted.items() if v[1] >= horizon}
        self.last_aired = {a: t for a, t in self.last_aired.items() if t >= horizon}
        self._by_comment = {
            cid: key for cid, key in self._by_comment.items() if key in self.entries or key in self.finals
        }
        old = [cid for cid, at in self._merged_at.items() if at < horizon and cid not in self._by_comment]
        for cid in old:
            self.merged.pop(cid, None)
            self._merged_at.pop(cid, None)

    def touch(self) -> None:
        """Something about an entry changed outside the inputs (the speaker made it a thanks)."""
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        now = self.clock()
        if not self.entries and self.on_air is None:
            self.idle_since = self.idle_since or now
        else:
            self.idle_since = None
        # Wake whoever waits on the version that just ended; the new version gets an event of its own.
        # An event that is never cleared cannot lose a change made between a check and a wait.
        self._next_change.set()
        self._next_change = asyncio.Event()

    async def wait_changed(self, timeout: float, since: int | None = None) -> bool:
        """Wait until the state is newer than version ``since`` or ``timeout`` passes; True when it is.

        Read ``state.version`` before the work whose outcome may depend on a change, then pass it
        here: a change made during that work (during any await in it) returns at once instead of
        being noticed when the timeout ends. ``since=None`` waits for the next change from now.

        Example::

            seen = state.version
            await settle()                          # publishes, awaits: events may arrive meanwhile
            await state.wait_changed(5.0, since=seen)
        """
        if since is not None and self.version != since:
            return True
        if timeout <= 0:
            return False
        change = self._next_change  # the version's event, taken with no await since the check above
        return await first_of(change.wait(), timeout=timeout)

    # --- what an operator sees ----------------------------------------------------

    def snapshot(self, now: datetime | None = None) -> dict[str, Any]:
        """The status ``kotae onair status`` prints and the HTTP server serves: mode, on air, queue with why, recent."""
        now = now or self.clock()
        session = self.session
        on_air = None
        if self.on_air is not None:
            ev = self.on_air.event
            on_air = {
                "comment_id": ev.comment_id,
                "kind": ev.kind,
                "author": ev.author,
                "author_name": ev.author_name,
                "question": ev.question,
                "answer": ev.answer,
                "slide": ev.slide,
                "askers": len(ev.askers),
                "started_at": _iso(ev.started_at),
                "ends_at": _iso(self.on_air.ends_at),  # of the sentences announced so far
                "left_s": round(max(0.0, (self.on_air.ends_at - now).total_seconds()), 1),
                "sentences": f"{len(self.on_air.sentences)}/{ev.sentence.of}" if ev.sentence else None,
                "audio_url": ev.audio_url,
                "attempt": ev.attempt,
                "resumed": ev.resumed,
            }
        queue = []
        previous: Entry | None = None
        for rank, entry in enumerate(self.waiting(), 1):
            question, withheld = shown_question(entry.answer.comment)
            speech, lang = self.spoken(entry)
            if entry.next_rank:
                waits = f"air next (by {session.next_up.get(entry.comment_id)})"
            elif session.hold and self.approved(entry) is None:
                waits = "hold: waiting for approval"
            elif cooling(entry, self.last_aired, now, self.policy):
                waits = "viewer cooldown"
            else:
                waits = None
            queue.append(
                {
                    "rank": rank,
                    "comment_id": entry.comment_id,
                    "author": entry.author,
                    "author_name": entry.answer.comment.author_name,
                    "tier": entry.tier,
                    "superchat": entry.superchat.model_dump() if entry.superchat else None,
                    "askers": len(entry.askers),
                    "age_s": round(entry.age_s(now), 1),
                    "score": [-x if isinstance(x, int | float) else str(x) for x in rank_key(entry, self.policy)[:3]],
                    "verdict": entry.answer.verdict,
                    "verdict_words": verdict_words(entry),
                    "citations": [c.doc_id for c in entry.answer.citations],
                    "documents": _documents(entry),
                    "slide": None if entry.thanks else entry.answer.slide,
                    "question": question,
                    "question_withheld": withheld,
                    "answer": entry.answer.answer,
                    "kind": "thanks" if entry.thanks else "answer",
                    "speech": speech,
                    "lang": lang,
                    "approved_by": self.approved(entry),
                    "waits": waits,
                    "why": placement(entry, previous, self.policy, now),
                }
            )
            previous = entry
        return {
            "stream_id": self.stream_id,
            "show": {"id": self.show.id, "started_at": _iso(self.show.started_at)} if self.show else None,
            "mode": {"paused": session.paused, "hold": session.hold, "ended": session.ended},
            "on_air": on_air,
            "queue": queue,
            "recent": [
                {"comment_id": e.comment_id, "outcome": e.event, "reason": e.reason, "at": _iso(e.created_at)}
                for e in reversed(self.recent)
            ],
            "blocked": dict(session.blocked),
            "updated_at": _iso(now),
        }


def key_of(event: OnAirEventV1) -> str:
    """The entry an event is about: its answer's message id, or the FAQ's comment id."""
    return event.answer_message_id or event.comment_id


def _documents(entry: Entry) -> list[dict[str, Any]]:
    """The documents an entry cites, by title (the record id where the evidence has none), each once."""
    if entry.thanks is not None:
        return []
    titles = {doc.doc_id: doc.title for doc in entry.answer.docs if doc.title}
    seen: dict[str, dict[str, Any]] = {}
    for citation in entry.answer.citations:
        if citation.doc_id not in seen:
            seen[citation.doc_id] = {
                "n": citation.n,
                "doc_id": citation.doc_id,
                "title": titles.get(citation.doc_id) or citation.doc_id,
                "slide": citation.slide,
            }
    return list(seen.values())


def _asker(answer: AnswerV1) -> Asker:
    comment = answer.comment
    return Asker(comment_id=comment.comment_id, author=comment.author, author_name=comment.author_name)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None
