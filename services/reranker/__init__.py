"""The reranker: keeps and orders the relevant documents among the retrieved ones."""

from kotae.contracts import AnswerV1, RerankV1, RetrievalV1, subjects
from kotae.stage import FAILED, Input, Output, Resources, Stage

STAGE = Stage(
    name="reranker",
    description="Keep and order the relevant documents.",
    consumes=Input(subjects.RETRIEVAL, RetrievalV1),
    outputs=(
        Output(subjects.RERANK, RerankV1, "Relevant documents, most relevant first."),
        Output(subjects.answer("unanswered"), AnswerV1, "No candidate was relevant."),
        FAILED,
    ),
    handler="kotae.services.reranker.handlers:build_handler",
    model_setting="reranker_model",
    resources=Resources(
        cpu="250m", memory="768Mi", cpu_limit="1", memory_limit="1536Mi", max_replicas=6, lag_per_replica=30
    ),
)
