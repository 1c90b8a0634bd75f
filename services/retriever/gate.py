"""The retrieval gate: answer, ask back between covered topics, or stay silent — and say why.

Three questions, in this order:

1. **Is the comment's focus covered?** Its specific key terms — proper nouns and
   compounds (:mod:`kotae.language.terms`: 消費税, 初乗り運賃, ラオス) — are looked up in
   the knowledge base's vocabulary under any spelling (word, part of a word, reading,
   synonym, stem). A term no record has is *missing*. When every specific term the comment
   names is missing, or one is and the evidence is not strong (below ``strong``), the
   knowledge base does not cover what was asked: ``no_match``, with the reason naming the
   term (``not_covered: 「消費税」 is in no record of the knowledge base``).
2. **How well does the best document or FAQ entry match?** Its score is
   ``0.5 × coverage + 0.5 × similarity`` (coverage: the IDF-weighted share of the comment's
   words it holds; similarity: the embedding cosine). Across languages — an English
   comment, a Japanese record — words cannot be shared, so the score is the cosine alone.
   At or above ``answer``: ``answer``.
3. **Between ``clarify`` and ``answer``, is it ambiguous between covered topics?** Only
   candidates that plausibly match are named: each scores at least ``clarify`` and holds
   at least half of what the comment says (IDF-weighted; across languages, where no word
   can be shared, its cosine is at least ``clarify``). Two topics or more: ask back naming them (``clarify``); one: that is the
   topic (``answer``); none: the comment only brushed the knowledge base (``no_match``).
   A comment that asks for a kind of answer with a wh-word (いくら, いつ, どこ, 誰 …) names only
   the topics with a sentence holding both its words (nearly as many as the best such sentence
   holds) and that kind: asked a product's price, the allergens page is no candidate; at or
   above ``strong``, when only the best topic can answer, it is answered (首相は誰ですか over
   two countries' articles is still asked back).
   Below ``clarify``: ``no_match``.

Example::

    decision = decide("消費税は下げてくれるの？", docs, faq, meta, Thresholds(answer=0.3, clarify=0.2))
    decision.gate, decision.reason   # 'no_match', 'not_covered: 「消費税」 is in no record of the knowledge base'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kotae.knowledge.index import Hit, IndexMeta
from kotae.knowledge.records import detect_lang
from kotae.language.question_focus import holds_kind, names_only_the_kind, question_focus
from kotae.language.terms import KeyTerm, key_terms
from kotae.language.text import search_tokens, split_sentences
from kotae.services.retriever.gate_model import GateModel, GateSignals, signals

#: Most topics an ask-back names.
MAX_CANDIDATES = 3
#: Share of the comment's words (IDF-weighted) a candidate must hold to be named in an ask-back.
PLAUSIBLE_COVERAGE = 0.5
#: Below the answer threshold, one topic is the answer when it scores this many times the next
#: topic and holds at least this share of what the comment says (chosen on the chat-dev and the
#: half-missing JSQuAD sets: bench/gate.py).
STANDOUT = 1.3
STANDOUT_COVERAGE = 0.3
#: A topic can answer a wh-question when one of its sentences holds the kind asked for and at least
#: this share of the comment's words that the best such sentence of any topic holds.
ABLE_SHARE = 0.6
#: ... or, far ahead of the next topic, holds at least a little of it (a complaint in the viewer's words).
FAR_AHEAD = 2.0
FAR_COVERAGE = 0.15


@dataclass(frozen=True)
class Thresholds:
    """Gate thresholds: answer at or above ``answer``, ask back from ``clarify``; a missing
    focus term is answered only at or above ``strong``. ``ask_back`` False: topics that match about
    as well are not asked back but sent on together, for the reranker to choose between."""

    answer: float = 0.35
    clarify: float = 0.20
    strong: float = 0.60
    ask_back: bool = True


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided, the score it decided on, and the reason an outcome carries."""

    gate: str  # answer | clarify | no_match
    top_score: float
    reason: str
    candidates: list[str] = field(default_factory=list)  # topics named by an ask-back
    missing: list[str] = field(default_factory=list)  # specific terms no record has


def hit_text(hit: Hit) -> str:
    p = hit.payload
    if p.get("kind") == "doc" and p.get("title"):
        return f"{p['title']}\n{p['text']}"
    return p["text"]


def _topic(hit: Hit) -> str:
    p = hit.payload
    return (p.get("title") if p.get("kind") == "doc" else p.get("question")) or ""


def _crosses_languages(comment_lang: str, hit: Hit) -> bool:
    lang = hit.payload.get("lang")
    return bool(lang) and lang != comment_lang


def hit_score(meta: IndexMeta, words: list[str], comment_lang: str, hit: Hit | None) -> float:
    """The gate's score of one hit (see the module docstring)."""
    if hit is None:
        return 0.0
    cosine = max(0.0, hit.signals.get("dense", 0.0))
    if _crosses_languages(comment_lang, hit):
        return cosine
    return 0.5 * meta.coverage(words, hit_text(hit)) + 0.5 * cosine


def plausible(
    meta: IndexMeta, words: list[str], lang: str, hits: list[Hit], at_least: float
) -> list[tuple[str, float]]:
    """Distinct topics of the hits that plausibly match the comment, with their scores, best first.

    A hit plausibly matches when it is in the comment's language, scores at least
    ``at_least`` and holds most of what the comment says (at least :data:`PLAUSIBLE_COVERAGE`
    of its words, IDF-weighted).
    """
    out: list[tuple[str, float]] = []
    for topic, hit, score in _by_topic(meta, words, lang, hits):
        # A record in another language is the same policy told again (a summary), not another topic.
        if not topic or score < at_least or _crosses_languages(lang, hit):
            continue
        if meta.coverage(words, hit_text(hit)) >= PLAUSIBLE_COVERAGE:
            out.append((topic, score))
    return out[:MAX_CANDIDATES]


def _between(close: list[str], best: float, why: str, thresholds: Thresholds, missing: list[str]) -> GateDecision:
    """Topics that match the comment about as well: asked back, or all sent on to the reranker."""
    if thresholds.ask_back:
        return GateDecision(
            "clarify", best, f"clarify: {why}; {len(close)} topics match the comment about as well", close, missing
        )
    return GateDecision(
        "answer",
        best,
        f"answer: {why}; {len(close)} topics match the comment about as well, the reranker chooses",
        [],
        missing,
    )


def decide(
    text: str,
    docs: list[Hit],
    faq: list[Hit],
    meta: IndexMeta,
    thresholds: Thresholds,
    model: GateModel | None = None,
) -> GateDecision:
    """The gate's decision for ``text`` (the comment as searched) over its best hits (see the module docstring).

    With a fitted ``model`` (:mod:`kotae.services.retriever.gate_model`), whether the knowledge base
    answers is that model's one score over the signals, in place of the thresholds and vetoes; the
    ask-back between covered topics is decided as before for what it lets through.
    """
    lang = detect_lang(text)
    words = search_tokens(text)
    best = max(hit_score(meta, words, lang, h) for h in (docs[0] if docs else None, faq[0] if faq else None))
    best = round(best, 4)
    terms = key_terms(text)
    vocab = meta.vocab()
    # A name is looked up only in records written in its script: in Japanese records Osaka is
    # written 大阪, in English ones 宿泊税 is "lodging tax"; neither can be found by its spelling.
    # A noun that only names the kind asked for (出身地) need not be in a record: the answer's kind is.
    specific = [t for t in terms if t.specific and vocab and vocab.writes(t) and not names_only_the_kind(t.surface)]
    missing = [t.surface for t in specific if vocab.find(t) is None]
    if model is not None:
        return _fitted(text, words, lang, best, docs, faq, meta, thresholds, model, terms, specific, missing)
    if missing and (len(missing) == len(specific) or best < thresholds.strong):
        named = "、".join(f"「{m}」" for m in missing)
        verb = "is" if len(missing) == 1 else "are"
        return GateDecision(
            "no_match", best, f"not_covered: {named} {verb} in no record of the knowledge base", [], missing
        )
    top_hit = docs[0] if docs else (faq[0] if faq else None)
    if best < thresholds.clarify or top_hit is None:
        return GateDecision(
            "no_match", best, f"no_match: best score {best:.2f} below {thresholds.clarify:.2f}", [], missing
        )
    if _crosses_languages(lang, top_hit):
        # Across languages no word is shared: the embedding is all there is to go on.
        return GateDecision(
            "answer", best, f"answer: best score {best:.2f}, the embedding across languages", [], missing
        )
    # Topics are the documents' titles: an FAQ entry answering the same question as a document
    # is the same topic said shortly, not a second one to choose from.
    topics = plausible(meta, words, lang, docs, thresholds.clarify)
    close = [t for t, score in topics if score * STANDOUT >= topics[0][1]] if topics else []
    titled = [t for t in close if _title_names(t, terms)]
    if len(titled) == 1:
        close = titled  # one topic is named in its own title (宿泊税 → 観光：宿泊税と周遊のしくみ)
    if len(close) >= 2:
        able = _able_to_answer(text, close, _by_topic(meta, words, lang, docs))
        if able == close[:1] and best >= thresholds.strong:
            # A wh-question the best topic can answer is not vague: the answer side checks the slot.
            return GateDecision(
                "answer", best, f"answer: best score {best:.2f}, the best topic holds the kind asked for", [], missing
            )
        close = able or close
    if len(close) >= 2 and (best < thresholds.strong or not specific):
        return _between(close, best, f"best score {best:.2f}", thresholds, missing)
    if best >= thresholds.answer:
        return GateDecision("answer", best, f"answer: best score {best:.2f}", [], missing)
    own = [h for h in docs if not _crosses_languages(lang, h)] or docs or faq
    ranked = _by_topic(meta, words, lang, own)
    top_topic, top, top_score = ranked[0]
    runner_up = ranked[1][2] if len(ranked) > 1 else 0.0
    coverage = meta.coverage(words, hit_text(top))
    if (coverage >= STANDOUT_COVERAGE and top_score >= STANDOUT * runner_up) or (
        coverage >= FAR_COVERAGE and top_score >= FAR_AHEAD * runner_up
    ):
        return GateDecision(
            "answer", best, f"answer: best score {best:.2f}, one topic stands out ({top_topic})", [], missing
        )
    return GateDecision(
        "no_match",
        best,
        f"no_match: best score {best:.2f} below {thresholds.answer:.2f}, and no topic stands out",
        [],
        missing,
    )


def _able_to_answer(text: str, topics: list[str], ranked: list[tuple[str, Hit, float]]) -> list[str]:
    """The topics whose best passage can answer what the comment asks with a wh-word: one of its
    sentences holds the kind of answer asked for (いくら → an amount) and words of the comment,
    at least ``ABLE_SHARE`` of the most any such sentence holds. Asked a product's price, the
    company page that names the product in one sentence and its capital in another is no
    candidate. Empty when the comment asks for no kind, or no topic can answer."""
    focus = question_focus(text)
    if not focus.explicit or not focus.kinds:
        return []
    words = set(search_tokens(text))
    passage = {topic: hit_text(hit) for topic, hit, _ in ranked}

    def answers(topic: str) -> float:
        """The largest share of the comment's words in one of the topic's sentences holding the kind."""
        return max(
            (
                len(words & set(search_tokens(sentence))) / len(words)
                for sentence in split_sentences(passage.get(topic, ""))
                if any(holds_kind(k, sentence) for k in focus.kinds)
            ),
            default=0.0,
        )

    shares = {t: answers(t) for t in topics} if words else {}
    most = max(shares.values(), default=0.0)
    # A price of hand-baked crackers (せんべい, 120円) does not answer what the family bag (せんべいの
    # お徳用袋) costs when another topic's sentence names both: only the topics that say nearly as much.
    return [t for t in topics if shares.get(t, 0.0) > 0 and shares[t] >= ABLE_SHARE * most]


def _title_names(title: str, terms: list[KeyTerm]) -> bool:
    folded = title.lower()
    return any(t.surface.lower() in folded or t.form.lower() in folded for t in terms)


def _by_topic(meta: IndexMeta, words: list[str], lang: str, hits: list[Hit]) -> list[tuple[str, Hit, float]]:
    """Each topic's best hit and score, best first."""
    best: dict[str, tuple[Hit, float]] = {}
    for hit in hits:
        score = hit_score(meta, words, lang, hit)
        topic = _topic(hit) or hit.doc_id
        if topic not in best or score > best[topic][1]:
            best[topic] = (hit, score)
    return sorted(((t, h, s) for t, (h, s) in best.items()), key=lambda x: -x[2])


def gate_signals(text: str, docs: list[Hit], faq: list[Hit], meta: IndexMeta) -> GateSignals:
    """The fitted gate's signals of ``text`` over its hits (what ``bench/fit_gate.py`` fits on)."""
    lang = detect_lang(text)
    words = search_tokens(text)
    best = max(hit_score(meta, words, lang, h) for h in (docs[0] if docs else None, faq[0] if faq else None))
    vocab = meta.vocab()
    terms = key_terms(text)
    specific = [t for t in terms if t.specific and vocab and vocab.writes(t) and not names_only_the_kind(t.surface)]
    missing = [t.surface for t in specific if vocab.find(t) is None]
    return _signals(text, words, lang, best, docs, faq, meta, specific, missing)


def _signals(
    text: str,
    words: list[str],
    lang: str,
    best: float,
    docs: list[Hit],
    faq: list[Hit],
    meta: IndexMeta,
    specific: list[KeyTerm],
    missing: list[str],
) -> GateSignals:
    top = docs[0] if docs else None
    return signals(
        words,
        question_focus(text),
        best,
        docs,
        faq,
        meta,
        topic_scores=[s for _, _, s in _by_topic(meta, words, lang, docs)],
        crosses=bool(top is not None and _crosses_languages(lang, top)),
        specific=len(specific),
        missing=len(missing),
        text_of=hit_text,
    )


def _fitted(
    text: str,
    words: list[str],
    lang: str,
    best: float,
    docs: list[Hit],
    faq: list[Hit],
    meta: IndexMeta,
    thresholds: Thresholds,
    model: GateModel,
    terms: list[KeyTerm],
    specific: list[KeyTerm],
    missing: list[str],
) -> GateDecision:
    """The fitted gate: answer (or ask back between close topics) at or above the model's threshold."""
    top_hit = docs[0] if docs else (faq[0] if faq else None)
    s = _signals(text, words, lang, best, docs, faq, meta, specific, missing)
    p = round(model.probability(s), 4)
    why = f"fitted gate {p:.2f}" + ("" if model.about.get("open") else f" ({', '.join(model.strongest(s))})")
    if top_hit is None or p < model.threshold:
        if missing:
            named = "、".join(f"「{m}」" for m in missing)
            verb = "is" if len(missing) == 1 else "are"
            reason = (
                f"not_covered: {named} {verb} in no record of the knowledge base; {why} below {model.threshold:.2f}"
            )
        else:
            reason = f"no_match: {why} below {model.threshold:.2f}, best score {best:.2f}"
        return GateDecision("no_match", best, reason, [], missing)
    if not _crosses_languages(lang, top_hit):
        topics = plausible(meta, words, lang, docs, thresholds.clarify)
        close = [t for t, score in topics if score * STANDOUT >= topics[0][1]] if topics else []
        titled = [t for t in close if _title_names(t, terms)]
        if len(titled) == 1:
            close = titled
        if len(close) >= 2:
            close = _able_to_answer(text, close, _by_topic(meta, words, lang, docs)) or close
        if len(close) >= 2 and (best < thresholds.strong or not specific):
            return _between(close, best, why, thresholds, missing)
    return GateDecision("answer", best, f"answer: {why}, best score {best:.2f}", [], missing)
