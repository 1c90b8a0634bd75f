"""The verifier: checks each draft against its evidence before anyone hears it; fails closed."""

from kotae.contracts import AnswerV1, DraftV1, subjects
from kotae.stage import Input, Output, Resources, Stage

STAGE = Stage(
    name="verifier",
    description="Check a draft for relevance and hallucination; fail closed.",
    consumes=Input(subjects.DRAFT, DraftV1),
    outputs=(
        Output(subjects.answer("verified"), AnswerV1, "A draft that passed every check."),
        Output(subjects.answer("rejected"), AnswerV1, "A draft that failed a check: the safe reply, with the reasons."),
        Output(subjects.answer("unanswered"), AnswerV1, "A draft that does not answer the question: not_found."),
    ),
    handler="kotae.services.verifier.handlers:build_handler",
    model_setting="verifier_model",
    resources=Resources(cpu="250m", memory="512Mi", cpu_limit="1", memory_limit="1Gi", max_replicas=10),
)
