"""The retriever: finds evidence for a comment in its stream's knowledge base, and gates on it."""

from kotae.clarify import BUCKET as CLARIFY_BUCKET
from kotae.contracts import AnswerV1, CommentV1, RetrievalV1, subjects
from kotae.stage import FAILED, Input, Output, Resources, Stage

STAGE = Stage(
    name="retriever",
    description="Find evidence for a comment; gate on the best score.",
    consumes=Input(subjects.COMMENT, CommentV1),
    outputs=(
        Output(subjects.RETRIEVAL, RetrievalV1, "Evidence for a comment that passed the gate."),
        Output(subjects.answer("clarify"), AnswerV1, "Ask-back naming the candidate topics."),
        Output(subjects.answer("unanswered"), AnswerV1, "No evidence good enough (no_match)."),
        FAILED,
    ),
    handler="kotae.services.retriever.handlers:build_handler",
    model_setting="rewrite_model",
    resources=Resources(
        cpu="500m", memory="1Gi", cpu_limit="2", memory_limit="2Gi", max_replicas=4, lag_per_replica=50
    ),
    kv_buckets=lambda _: (CLARIFY_BUCKET,),
)
