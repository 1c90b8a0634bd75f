"""The airtime policy: which verified answer airs next, and which never will.

One voice says one answer at a time, and a busy chat verifies answers far
faster than it can say them, so choosing is the product. The rules, each a
plain function of an :class:`Entry` and the clock (the README's table lists
them in the order they apply):

* **rank** — tier first (Super Chat, ranked by its amount in yen; then members
  where the platform says so; then everyone), then how many viewers asked it
  (near-identical questions merged into it count), then age (the one waiting
  longest first): :func:`rank_key`;
* **already aired** — a near-identical question (content-word overlap at or
  above ``repeat_similarity``, or the very same spoken answer) aired within
  ``repeat_s``: :func:`repeat_of` (credited to the one that aired, however old);
* **expired** — older than ``max_age_s`` when its turn comes (age counts from
  when ingest received the comment, so a replayed chat is judged by its
  replay; while hold is on, ``hold_max_age_s``, by default never: an answer
  waiting for the operator's approval does not run out): :func:`expired`;
* **viewer cooldown** — a viewer answered within ``cooldown_s`` waits behind
  everyone else who is waiting, unless it is a Super Chat: :func:`cooling`;
* **shed** — a backlog longer than ``max_queue`` loses its lowest-ranked
  entries: :func:`to_shed`.

An operator's ``next`` puts an entry above every rank (and past the cooldown);
the others rules still apply to it. A Super Chat (or a membership event's
question) is never merely ``already aired``: it airs as a thanks (:mod:`kotae.services.onair.thanks`), or its answer
airs again (``superchat_repeat``), and a thanks is no repeat of anything.

Withdrawals (a deleted comment, a banned or blocked viewer, a superseded
document, an operator's rejection) are the state's business
(:mod:`kotae.services.onair.state`): they end an entry whatever its rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kotae.contracts import AnswerV1, Asker, SuperChat
from kotae.contracts.v1 import Tier
from kotae.services.onair.thanks import Thanks, thanked_viewer

TIER_RANK: dict[str, int] = {"superchat": 2, "member": 1, "everyone": 0}


@dataclass(frozen=True)
class Policy:
    """The settings the rules read (``KOTAE_ONAIR_*``)."""

    max_age_s: float = 120.0
    cooldown_s: float = 60.0
    max_queue: int = 20
    repeat_s: float = 600.0
    repeat_similarity: float = 0.6
    rates: Mapping[str, float] = field(default_factory=lambda: {"JPY": 1.0})
    hold_max_age_s: float = 0.0  # while hold is on; 0: an answer waiting for approval never expires
    superchat_repeat: str = "thank"  # a Super Chat whose question aired: "thank" the viewer, or air it "again"

    @classmethod
    def from_settings(cls, settings: Any) -> Policy:
        return cls(
            max_age_s=settings.onair_max_age_s,
            cooldown_s=settings.onair_viewer_cooldown_s,
            max_queue=settings.onair_max_queue,
            repeat_s=settings.onair_repeat_s,
            repeat_similarity=settings.onair_repeat_similarity,
            rates=dict(settings.onair_currency_rates),
            hold_max_age_s=settings.onair_hold_max_age_s,
            superchat_repeat=settings.onair_superchat_repeat,
        )

    def max_age(self, hold: bool) -> float | None:
        """The age limit now: ``max_age_s``, or while hold is on ``hold_max_age_s`` (None: no limit)."""
        if not hold:
            return self.max_age_s
        return self.hold_max_age_s or None

    def yen(self, superchat: SuperChat | None) -> float:
        """A Super Chat's amount in yen (0 for a currency without a rate: it still ranks as a Super Chat)."""
        if superchat is None:
            return 0.0
        return superchat.amount * self.rates.get(superchat.currency, 0.0)


@dataclass
class Entry:
    """A verified answer waiting for its turn, with what the rules need to know about it."""

    answer: AnswerV1
    seq: int  # its sequence in the answers stream: the last tie-break, and where a rebuild starts
    tokens: frozenset[str]  # content words of the question, for the repeat rule
    spoken: str  # the answer as it would be said, normalised, for the repeat rule
    traceparent: str | None = None
    askers: list[Asker] = field(default_factory=list)
    queued: bool = False  # a `queued` event about it is stored
    approved_by: str | None = None  # hold mode: who let it air
    next_rank: int = 0  # an operator's "air next": above 0 it goes first, the latest such command first
    thanks: Thanks | None = None  # a Super Chat that airs as a thanks instead of its answer

    @property
    def key(self) -> str:
        """The answer's message id: one entry, and one final outcome, per verified answer."""
        return self.answer.message_id

    @property
    def comment_id(self) -> str:
        return self.answer.comment_id

    @property
    def author(self) -> str:
        return self.answer.comment.author

    @property
    def received_at(self) -> datetime:
        """When ingest received the comment: the clock ``max_age_s`` runs on."""
        return self.answer.comment.created_at

    @property
    def superchat(self) -> SuperChat | None:
        return self.answer.comment.superchat

    @property
    def tier(self) -> Tier:
        comment = self.answer.comment
        if comment.superchat is not None:
            return "superchat"
        return "member" if comment.member else "everyone"

    def age_s(self, now: datetime) -> float:
        return (now - self.received_at).total_seconds()


@dataclass(frozen=True)
class Aired:
    """Something that went on air: what the repeat and cooldown rules compare with."""

    comment_id: str
    author: str | None
    tokens: frozenset[str]
    spoken: str
    at: datetime


def rank_key(entry: Entry, policy: Policy) -> tuple[Any, ...]:
    """Sort key, best first: tier, Super Chat amount, askers, then the one waiting longest."""
    return (
        -TIER_RANK[entry.tier],
        -policy.yen(entry.superchat),
        -max(1, len(entry.askers)),
        entry.received_at,
        entry.seq,
    )


def ranked(entries: Iterable[Entry], policy: Policy) -> list[Entry]:
    """Best first: what the operator said to air next, then :func:`rank_key`."""
    return sorted(entries, key=lambda e: (-e.next_rank, rank_key(e, policy)))


def expired(entry: Entry, now: datetime, policy: Policy, *, hold: bool = False) -> str | None:
    """Why ``entry`` is too old to air now, or None (``hold``: hold mode is on)."""
    limit = policy.max_age(hold)
    age = entry.age_s(now)
    if limit is not None and age > limit:
        return f"older than {limit:g} s when its turn came ({age:.0f} s since the comment arrived)"
    return None


def thanked_instead(entry: Entry, policy: Policy) -> bool:
    """Whether ``entry``, a repeat of what aired, airs as a thanks rather than ending ``already_aired``
    (a Super Chat's or a membership milestone's question)."""
    return thanked_viewer(entry.answer.comment) and policy.superchat_repeat == "thank"


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two questions' content words (0 when either has none)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def repeat_of(entry: Entry, aired: Sequence[Aired], now: datetime, policy: Policy) -> tuple[Aired, str] | None:
    """The airing within ``repeat_s`` that ``entry`` repeats, and how, or None."""
    if policy.repeat_s <= 0 or entry.thanks is not None:
        return None  # a thanks answers nothing, so it repeats nothing
    if thanked_viewer(entry.answer.comment) and policy.superchat_repeat == "again":
        return None
    for past in reversed(aired):  # the most recent first
        if (now - past.at).total_seconds() > policy.repeat_s or past.comment_id == entry.comment_id:
            continue
        if entry.spoken and entry.spoken == past.spoken:
            return past, "the same answer"
        overlap = similarity(entry.tokens, past.tokens)
        if overlap >= policy.repeat_similarity:
            return past, f"a near-identical question (overlap {overlap:.2f})"
    return None


def cooling(entry: Entry, last_aired: Mapping[str, datetime], now: datetime, policy: Policy) -> bool:
    """Whether ``entry``'s viewer was answered within ``cooldown_s`` (a Super Chat never waits)."""
    if entry.superchat is not None or policy.cooldown_s <= 0:
        return False
    at = last_aired.get(entry.author)
    return at is not None and (now - at).total_seconds() < policy.cooldown_s


def to_shed(entries: Iterable[Entry], policy: Policy) -> list[tuple[Entry, int]]:
    """The entries beyond ``max_queue`` in rank order, each with its rank (1-based)."""
    order = ranked(entries, policy)
    return [(entry, rank) for rank, entry in enumerate(order, 1) if rank > policy.max_queue]


def ended(
    entry: Entry, aired: Sequence[Aired], now: datetime, policy: Policy, *, hold: bool = False
) -> tuple[str, str, str | None] | None:
    """(outcome, reason, credited comment) when ``entry`` can never air: a repeat of what aired (credited to
    it, however old the entry), or too old."""
    repeat = repeat_of(entry, aired, now, policy)
    if repeat:
        past, how = repeat
        ago = (now - past.at).total_seconds()
        return "already_aired", f"{how} to {past.comment_id}'s, aired {ago:.0f} s ago", past.comment_id
    reason = expired(entry, now, policy, hold=hold)
    if reason:
        return "expired", reason, None
    return None


@dataclass(frozen=True)
class Choice:
    """What the scheduler decided at one turn: the entry to air (or None) and the ones that never will."""

    entry: Entry | None
    expired: list[tuple[Entry, str]] = field(default_factory=list)
    repeats: list[tuple[Entry, Aired, str]] = field(default_factory=list)


def choose(
    entries: Iterable[Entry],
    aired: Sequence[Aired],
    last_aired: Mapping[str, datetime],
    now: datetime,
    policy: Policy,
    *,
    hold: bool = False,
) -> Choice:
    """The next entry to air, after the rules in order; in hold mode only approved entries may air.

    Repeated and expired entries are ended on the way (whatever their rank: they
    never become airable; a repeat is credited even when it is also old). Among
    the rest the best-ranked airs, except that a viewer within the cooldown goes
    behind everyone else waiting; when only such viewers wait, the best of them
    airs (the voice does not idle for fairness nobody needs).
    """
    old: list[tuple[Entry, str]] = []
    repeats: list[tuple[Entry, Aired, str]] = []
    waiting: list[Entry] = []
    for entry in ranked(entries, policy):
        repeat = repeat_of(entry, aired, now, policy)
        if repeat:
            repeats.append((entry, *repeat))
            continue
        reason = expired(entry, now, policy, hold=hold)
        if reason:
            old.append((entry, reason))
            continue
        if hold and entry.approved_by is None:
            continue
        waiting.append(entry)
    fresh = [e for e in waiting if e.next_rank or not cooling(e, last_aired, now, policy)]
    pick = fresh[0] if fresh else (waiting[0] if waiting else None)
    return Choice(pick, old, repeats)
