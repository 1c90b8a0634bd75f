"""The evaluator: scores every answer off the hot path, through a consumer of its own."""

from kotae.contracts import AnswerV1, EvaluationV1, subjects
from kotae.stage import ExtraPort, Input, Output, Resources, Stage

STAGE = Stage(
    name="evaluator",
    description="Score each answer (faithfulness, relevancy, context precision, judgements).",
    consumes=Input(subjects.ANSWER_ALL, AnswerV1),
    outputs=(Output(subjects.EVALUATION, EvaluationV1, "Scores and judgements of one answer (the audit log)."),),
    handler="kotae.services.evaluator.handlers:build_handler",
    model_setting="evaluator_model",
    resources=Resources(
        cpu="100m", memory="384Mi", cpu_limit="1", memory_limit="768Mi", max_replicas=3, lag_per_replica=200
    ),
    # The rolling quality rates come from their own registry and port.
    extra_ports=(ExtraPort("rates", "KOTAE_EVALUATOR_METRICS_PORT", 9101),),
    # Scoring can wait; answering cannot. Where processes share cores (the embedded
    # stack, one VM), the scheduler then serves the hot-path stages first.
    nice_setting="evaluator_nice",
)
