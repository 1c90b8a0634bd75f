"""Quoting evidence written in another language: an English question over Japanese documents.

Words cannot be shared across languages, so :mod:`sentence_choice`'s lexical weighing finds
nothing to quote. What is left is what the retriever already used to find the documents: a
multilingual sentence embedding (USE and multilingual-e5 place "How much is the lodging tax per
night?" next to 税額は1人1泊200円。). The offline answer then quotes the evidence sentence the
embedding puts nearest the question, in the evidence's language, with its citation.

The embedding must also put the two close enough: at least :data:`MIN_COSINE` for the model it
was calibrated on. On the chat-dev election set's English questions and twenty English off-topic
comments over its Japanese documents (a taxi fare where the documents have bus fares, the time in
Tokyo, the nearest Starbucks), USE puts the right sentences at 0.27–0.49 and the off-topic ones'
at 0.11–0.43: 0.35 keeps five of six and lets one of five through. multilingual-e5 puts all of
them at 0.76–0.85 and cannot tell them apart, so with any model without a calibrated bound the
offline method does not quote across languages.

Only a question that asks for a kind of answer with a wh-word (how much, when, how many …) is
answered this way, and only with a sentence that gives that kind (an amount, a date, a count):
the kind (and any number the question names: by 2030, per 100,000) is what of an English
question can be checked in a Japanese sentence without a model, and the verifier checks it
again (:func:`kotae.language.relevance.relevance`). Anything else ends not-found with the reason; a
model generator answers it in the asker's language.
"""

from __future__ import annotations

import numpy as np

from kotae.citations import Block, faq_question
from kotae.knowledge.embeddings import Embedder
from kotae.language.question_focus import KIND_NAMES, holds_kind, question_focus
from kotae.language.relevance import numbers_not_said, relevance
from kotae.services.generator.sentence_choice import Candidate, Choice

#: Least cosine between the question and the sentence quoted, per embedding model (see above).
MIN_COSINE = {"use-multilingual-v3": 0.35}

NO_KIND = (
    "the evidence is in another language, and offline only a question asking for a kind of answer "
    "(when, where, how much, how many …) can be answered from it"
)


def choose_across_languages(question: str, sentences: list[tuple[Block, str]], embedder: Embedder) -> Choice:
    """The evidence sentence nearest ``question`` by ``embedder`` among those that give the kind
    of answer it asks for; none, with the reason, when it asks for no kind or none gives it."""
    bound = MIN_COSINE.get(embedder.model_id)
    if bound is None:
        return Choice([], f"the evidence is in another language, and {embedder.model_id} has no calibrated bound")
    focus = question_focus(question)
    if not (focus.explicit and focus.kinds):
        return Choice([], NO_KIND)
    fitting = [
        (order, block, sentence)
        for order, (block, sentence) in enumerate(sentences)
        if any(holds_kind(kind, sentence) for kind in focus.kinds) and not numbers_not_said(question, [sentence])
    ]
    if not fitting:
        asked = " or ".join(KIND_NAMES[k] for k in focus.kinds)
        return Choice(
            [], f"asked for {asked}; no sentence of the evidence (in another language) gives one with the numbers asked"
        )
    vectors = embedder.embed([question, *(s for _, _, s in fitting)], "passage")
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = vectors[1:] @ vectors[0]
    best = int(np.argmax(cosines))
    order, block, sentence = fitting[best]
    if cosines[best] < bound:
        return Choice(
            [], f"the nearest sentence in another language is too far from the question ({cosines[best]:.2f} < {bound})"
        )
    rel = relevance(question, [sentence], [(block.title, block.text)], read_with=faq_question(block))
    return Choice([Candidate(block, sentence, order, rel, slot=float(cosines[best]), overlap=0.0)])
