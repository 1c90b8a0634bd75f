"""kotae's message contracts: one pydantic model per hop, one module per version.

The version is part of the subject (``kotae.comment.v1``) and of the model
(``schema_version``). Within a version, changes are additive only; anything else
is a new module served side by side. Contracts depend on nothing else in kotae.
"""

from kotae.contracts import subjects
from kotae.contracts.v1 import (
    SCHEMAS,
    AnswerV1,
    Asker,
    Citation,
    CitationCheck,
    CommentV1,
    ControlV1,
    DeadLetterV1,
    DraftV1,
    EvaluationV1,
    Evidence,
    FaqEvidence,
    MetricScore,
    ModelCall,
    ModerationV1,
    OnAirEventV1,
    Outcome,
    PipelineMessage,
    RerankV1,
    RetrievalV1,
    SuperChat,
)

__all__ = [
    "SCHEMAS",
    "AnswerV1",
    "Asker",
    "Citation",
    "CitationCheck",
    "CommentV1",
    "ControlV1",
    "DeadLetterV1",
    "DraftV1",
    "EvaluationV1",
    "Evidence",
    "FaqEvidence",
    "MetricScore",
    "ModelCall",
    "ModerationV1",
    "OnAirEventV1",
    "Outcome",
    "PipelineMessage",
    "RerankV1",
    "RetrievalV1",
    "SuperChat",
    "subjects",
]
