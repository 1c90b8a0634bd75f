"""The retriever's bus edge: comment.v1 in; retrieval.v1, or a clarify/unanswered answer, out."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from kotae.clarify import ClarifyStore, PendingClarify
from kotae.contracts import AnswerV1, CommentV1, RetrievalV1
from kotae.services.retriever.clarify import pick_candidates, pick_faq
from kotae.services.retriever.logic import METHOD, Retrieval, Retriever, ask_back
from kotae.settings import Settings
from kotae.stage import Bus, Handler

STAGE = "retriever"


class RetrieverHandler:
    """What the retriever does with one comment: answer an ask-back it replies to, or search and gate."""

    def __init__(self, settings: Settings, bus: Bus, retriever: Retriever | None = None) -> None:
        self.settings = settings
        self.bus = bus
        self._retriever = retriever
        self._store: ClarifyStore | None = None
        self._lock = asyncio.Lock()

    def retriever(self) -> Retriever:
        # Built on first use, so building the stage (docs, tests) loads no model.
        if self._retriever is None:
            self._retriever = Retriever(self.settings)
        return self._retriever

    async def clarifications(self) -> ClarifyStore:
        async with self._lock:
            if self._store is None:
                s = self.settings
                self._store = await ClarifyStore.open(self.bus.jetstream(), s.clarify_ttl_s, s.stream_replicas)
        return self._store

    async def on_comment(self, comment: CommentV1) -> RetrievalV1 | AnswerV1:
        # The stream's binding in this stage's own settings decides the knowledge base, so a
        # comment can never draw evidence from another channel's or campaign's documents.
        kb = self.settings.kb_for(comment.stream_id)
        if comment.author:  # an anonymous comment can neither be asked back nor reply to an ask-back
            reply = await self.reply_to_ask_back(comment, kb)
            if reply is not None:
                return reply
        result = await asyncio.to_thread(
            self.retriever().retrieve, comment.normalized, kb=kb, day=comment.published_at.date()
        )
        if result.gate == "answer":
            if result.query:
                # The model's wording travels with the comment: the generator and the verifier read it
                # as a second wording of the question (services/retriever/rewrite.py).
                comment = comment.model_copy(update={"rewrite": result.query})
            return comment.forward(
                RetrievalV1,
                stage=STAGE,
                method=result.method,
                gate=result.gate,
                top_score=result.top_score,
                docs=result.docs,
                faq=result.faq,
                kb=kb,
                query=result.query,
                prompt_version=result.prompt_version,
                calls=result.calls,
            )
        if result.gate == "clarify":
            return await self.ask_back(comment, kb, result)
        return comment.forward(
            AnswerV1,
            stage=STAGE,
            method=result.method,
            calls=result.calls,
            outcome="unanswered",
            reason=result.reason,
        )

    async def reply_to_ask_back(self, comment: CommentV1, kb: str) -> RetrievalV1 | None:
        """The evidence of a pending ask-back this comment picks a candidate of, if it does."""
        store = await self.clarifications()
        pending = await store.get(comment.stream_id, comment.author)
        # An ask-back stored by this very comment is not a reply to it: a redelivery after a
        # crash must ask back again (deduplicated), not answer itself.
        if pending is None or pending.kb != kb or pending.comment_id == comment.comment_id:
            return None
        chosen = pick_candidates(comment.normalized, pending)
        if not chosen:
            return None
        joined = comment.model_copy(update={"normalized": f"{pending.question} {comment.normalized}"})
        return comment.forward(
            RetrievalV1,
            stage=STAGE,
            method=f"{METHOD}+clarified",
            comment=joined,
            gate="answer",
            top_score=chosen[0].score,
            docs=chosen,
            faq=pick_faq(comment.normalized, pending),
            kb=kb,
            clarified_from=pending.comment_id,
        )

    async def ask_back(self, comment: CommentV1, kb: str, result: Retrieval) -> AnswerV1:
        """Ask which of the candidate topics the viewer means; remember them for the viewer's reply."""
        candidates = result.candidates
        text = ask_back(candidates, comment.lang)
        if comment.author:
            store = await self.clarifications()
            pending = PendingClarify(
                comment_id=comment.comment_id,
                question=comment.normalized,
                kb=kb,
                docs=[d for d in result.docs if d.title in candidates],
                faq=result.faq,
            )
            await store.put(comment.stream_id, comment.author, pending)
        return comment.forward(
            AnswerV1,
            stage=STAGE,
            method=result.method,
            calls=result.calls,
            outcome="clarify",
            answer=text,
            speech=text,
            candidates=candidates,
            docs=result.docs,
            reason=result.reason,
        )

    async def stored(self, message: BaseModel) -> None:
        # The ask-back is answered once the evidence picked from it is stored: a retry
        # before that still finds it.
        if isinstance(message, RetrievalV1) and message.clarified_from is not None:
            store = await self.clarifications()
            await store.delete(message.comment.stream_id, message.comment.author)


def build_handler(settings: Settings, bus: Bus, retriever: Retriever | None = None) -> Handler[CommentV1]:
    handler = RetrieverHandler(settings, bus, retriever)
    return Handler(handler.on_comment, stored=handler.stored)
