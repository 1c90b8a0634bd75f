"""kotae's stages, one folder each, and the one list of them.

Each stage's package declares itself (``STAGE``, a :class:`kotae.stage.Stage`);
adding a stage is its folder and one line here. Consumers, NATS users, AsyncAPI,
the processes of ``kotae up``, the CLI's choices and the deployment files all
derive from this list.
"""

from kotae.services import evaluator, generator, ingest, onair, reranker, retriever, verifier
from kotae.stage import Stage

STAGES: tuple[Stage, ...] = (
    ingest.STAGE,
    retriever.STAGE,
    reranker.STAGE,
    generator.STAGE,
    verifier.STAGE,
    evaluator.STAGE,
    onair.STAGE,
)
