"""The generator: drafts a cited answer from the reranked evidence, in the persona's voice."""

from kotae.contracts import AnswerV1, DraftV1, RerankV1, subjects
from kotae.stage import FAILED, Input, Output, Resources, Stage

STAGE = Stage(
    name="generator",
    description="Draft a cited answer from the reranked evidence.",
    consumes=Input(subjects.RERANK, RerankV1),
    outputs=(
        Output(subjects.DRAFT, DraftV1, "A cited draft, not yet verified."),
        Output(subjects.answer("unanswered"), AnswerV1, "The documents do not answer: the fixed not-found sentence."),
        FAILED,
    ),
    handler="kotae.services.generator.handlers:build_handler",
    model_setting="generator_model",
    resources=Resources(cpu="100m", memory="256Mi", cpu_limit="1", memory_limit="512Mi", max_replicas=10),
)
