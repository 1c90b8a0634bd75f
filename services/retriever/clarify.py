"""Answering a reply to an ask-back from the candidates the ask-back stored.

The reply picks among the stored candidates — no new search, no re-embedding of
the joined text — and the original question plus the reply becomes the question
that is answered. The store itself is :mod:`kotae.clarify`.
"""

from __future__ import annotations

import re

from kotae.clarify import PendingClarify
from kotae.contracts import Evidence
from kotae.knowledge.sparse import char_terms
from kotae.knowledge.text import normalize, search_tokens


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


def pick_candidates(reply: str, pending: PendingClarify) -> list[Evidence]:
    """The stored candidates the reply points at, best first; [] when it names none of them.

    Example::

        pick_candidates("バスの方", pending)  # → [Evidence(doc_id="bus-fare-2027", …)]
    """
    words = search_tokens(reply)
    bare = re.sub(r"(の?(ほう|方)|です|だよ|で(す)?|[、。!?！？\s])+$", "", normalize(reply))
    scored = []
    for i, d in enumerate(pending.docs):
        whole = f"{d.title}\n{d.text}"
        if len(bare) >= 2 and bare in whole:  # the reply quotes the candidate ("コミュニティ")
            title, text = (1.0 if bare in d.title else 0.0), 1.0
        else:
            title, text = _overlap(words, d.title), _overlap(words, whole)
        # At least half of what the reply says must be in the candidate: one shared word
        # with a long new question is not a reply.
        if text >= 0.5:
            scored.append((title + 0.5 * text, i, d))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [d for _, _, d in scored]
