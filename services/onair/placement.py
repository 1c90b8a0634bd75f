"""Why a queue entry is where it is, and what its verifier found, in words an operator reads at a glance.

The queue is sorted by :func:`kotae.services.onair.policy.ranked`; an entry's
place is explained by the first thing that sets it apart from the one before it
(an operator's "air next", the tier, the Super Chat's amount, how many viewers
asked, how long it has waited), so the console says "after c12: fewer viewers
asked (1 against 3)" instead of a tuple of numbers.
"""

from __future__ import annotations

from datetime import datetime

from kotae.services.onair.policy import TIER_RANK, Entry, Policy

#: The verifier's classes (``answer.v1`` ``verdict``), as the operator reads them.
VERDICTS: dict[int, str] = {
    0: "supported: the check found nothing against the documents",
    1: "contradicts the knowledge base",
    2: "says what the knowledge base does not",
    3: "invents people, events or things",
}
_TIER_WORDS = {"superchat": "a Super Chat", "member": "a member", "everyone": "a viewer"}


def verdict_words(entry: Entry) -> str:
    """The verdict in words, with who decided it (the offline check, the model, or the programmatic floor)."""
    if entry.thanks is not None:
        return f"a thanks (fixed text, no answer): {entry.thanks.reason}"
    answer = entry.answer
    if answer.verdict is None:
        return "not checked"
    words = VERDICTS.get(answer.verdict, f"class {answer.verdict}")
    return f"{words} ({answer.decided_by} check)" if answer.decided_by else words


def _tier(entry: Entry, policy: Policy) -> str:
    if entry.superchat is not None:
        sc = entry.superchat
        return f"a Super Chat of {sc.amount:g} {sc.currency} (¥{policy.yen(sc):,.0f})"
    return _TIER_WORDS[entry.tier]


def placement(entry: Entry, previous: Entry | None, policy: Policy, now: datetime) -> str:
    """Why ``entry`` ranks where it does: first, or after ``previous`` and for what reason."""
    askers = max(1, len(entry.askers))
    if previous is None:
        if entry.next_rank:
            return "first: the operator chose to air it next"
        return f"first: {_tier(entry, policy)}, {askers} asked, waiting {entry.age_s(now):.0f} s"
    after = f"after {previous.comment_id}"
    if previous.next_rank and not entry.next_rank:
        return f"{after}: the operator chose that one to air next"
    if entry.next_rank:
        return f"{after}: both chosen to air next, that one later"
    if TIER_RANK[entry.tier] != TIER_RANK[previous.tier]:
        return f"{after}: {_tier(entry, policy)} ranks below {_tier(previous, policy)}"
    if policy.yen(entry.superchat) != policy.yen(previous.superchat):
        return f"{after}: a smaller Super Chat (¥{policy.yen(entry.superchat):,.0f} against ¥{policy.yen(previous.superchat):,.0f})"
    previous_askers = max(1, len(previous.askers))
    if askers != previous_askers:
        return f"{after}: fewer viewers asked ({askers} against {previous_askers})"
    return f"{after}: the same rank, waiting less long ({entry.age_s(now):.0f} s against {previous.age_s(now):.0f} s)"
