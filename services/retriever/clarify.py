"""Answering a reply to an ask-back from the candidates the ask-back stored.

The reply picks among the stored candidates — no new search, no re-embedding of
the joined text — and the original question plus the reply becomes the question
that is answered. The store itself is :mod:`kotae.clarify`.
"""

from __future__ import annotations

import re

from kotae.clarify import PendingClarify
from kotae.contracts import Evidence, FaqEvidence
from kotae.knowledge.sparse import char_terms
from kotae.language.text import normalize, search_tokens


def _overlap(reply_words: list[str], text: str) -> float:
    """Share of the reply's content words found in ``text``, as words or as character runs.

    Character runs meet compounds that keep a word inside them (バス in コミュニティバス).
    """
    if not reply_words:
        return 0.0
    words = set(search_tokens(text))
    chars = set(char_terms(text))
    found = 0
    for w in set(reply_words):
        grams = [w[i : i + 2] for i in range(len(w) - 1)] or [w]
        if w in words or all(g in chars for g in grams):
            found += 1
    return found / len(set(reply_words))


def _bare(reply: str) -> str:
    """The reply without its trailing 「のほうです」-style ending: what it names."""
    return re.sub(r"(の?(ほう|方)|です|だよ|で(す)?|[、。!?！？\s])+$", "", normalize(reply))


def _pointed_at(words: list[str], bare: str, title: str, whole: str) -> float | None:
    """How well the reply points at one stored entry; None when it does not point at it."""
    if len(bare) >= 2 and bare in whole:  # the reply quotes the candidate ("コミュニティ")
        title_share, text_share = (1.0 if bare in title else 0.0), 1.0
    else:
        title_share, text_share = _overlap(words, title), _overlap(words, whole)
    # At least half of what the reply says must be in the candidate: one shared word
    # with a long new question is not a reply.
    if text_share < 0.5:
        return None
    return title_share + 0.5 * text_share


def pick_candidates(reply: str, pending: PendingClarify) -> list[Evidence]:
    """The stored candidates the reply points at, best first; [] when it names none of them.

    Example::

        pick_candidates("バスの方", pending)  # → [Evidence(doc_id="bus-fare-2027", …)]
    """
    words, bare = search_tokens(reply), _bare(reply)
    scored = []
    for i, d in enumerate(pending.docs):
        score = _pointed_at(words, bare, d.title, f"{d.title}\n{d.text}")
        if score is not None:
            scored.append((score, i, d))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [d for _, _, d in scored]


def pick_faq(reply: str, pending: PendingClarify) -> list[FaqEvidence]:
    """The stored FAQ entries the reply points at, in their stored order.

    The ask-back kept the FAQ of every topic it offered; the FAQ of the topics the
    viewer did not pick would only answer another question.
    """
    words, bare = search_tokens(reply), _bare(reply)
    return [f for f in pending.faq if _pointed_at(words, bare, f.question, f"{f.question}\n{f.answer}") is not None]
