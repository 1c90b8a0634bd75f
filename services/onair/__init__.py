"""On air: one voice for many answers — the airtime scheduler, speech, withdrawals, and what aired.

Not a consumer of its own durable: every replica reads every answer, moderation
event, operator command and on-air event (``reads``), and the one holding the
lease speaks (``service``). ``kotae up/demo/replay --onair`` run it.
"""

from kotae.contracts import AnswerV1, ControlV1, ModerationV1, OnAirEventV1, subjects
from kotae.stage import ExtraPort, Input, OnRequest, Option, Output, Resources, Stage

_SAYS = {
    "queued": "A verified answer joined the queue (its place and the queue's length).",
    "started": "An answer went on air: its first sentence's clip (length and URL), when it ends by the server's clock.",
    "sentence": "The next sentence of the answer on air: its own clip, when it starts and when the answer now ends.",
    "finished": "Its audio played to the end (text only, with reason voice_failed, when the voice failed).",
    "expired": "Older than KOTAE_ONAIR_MAX_AGE_S when its turn came.",
    "withdrawn": "Deleted by a moderator, its viewer banned or blocked, rejected, or its document superseded.",
    "skipped": "Taken off air by the operator, or the stream ended.",
    "shed": "The backlog passed KOTAE_ONAIR_MAX_QUEUE and it ranked lowest.",
    "already_aired": "A near-identical question aired within KOTAE_ONAIR_REPEAT_S (credited_to names it).",
}

STAGE = Stage(
    name="onair",
    description="Owns the one voice: chooses which verified answer airs, speaks it, and says what aired and why.",
    outputs=(
        *(Output(subjects.onair(event), OnAirEventV1, _SAYS[event]) for event in subjects.ONAIR_EVENTS),
        *(
            Output(
                subjects.control(command, "onair"),
                ControlV1,
                f"The console's {command} (/console, its token checked), sent as this stage's user: as the CLI sends it.",
            )
            for command in subjects.CONTROL_COMMANDS
        ),
    ),
    service="kotae.services.onair.service:run",
    reads=(
        Input(subjects.ANSWER_ALL, AnswerV1, "Verified answers (the queue) and merged duplicates (their askers)."),
        Input(subjects.MODERATION_ALL, ModerationV1, "Deleted comments and banned viewers."),
        Input(subjects.CONTROL_ALL, ControlV1, "Operator commands, the sender's NATS user in the subject."),
        Input(subjects.ONAIR_ALL, OnAirEventV1, "What the speaking replica did (a standby rebuilds from it)."),
    ),
    on_request=OnRequest(
        options=(
            Option(
                "--speech-dir", "KOTAE_ONAIR_SPEECH_DIR", "also write each aired answer's audio here (WAV)", path=True
            ),
            # A new show each run unless told to continue one: a rehearsal never leaks into it.
            Option(
                "--show",
                "KOTAE_ONAIR_SHOW",
                "continue show ID (as `kotae onair status` names it) instead of "
                "starting a new show; nothing verified before a show began airs in it",
                metavar="ID",
                default="kotae.services.onair.shows:new_show_id",
            ),
        ),
        prepare="kotae.services.onair.launch:prepare",
        announce="kotae.services.onair.launch:announce",
    ),
    kv_buckets=lambda settings: (settings.onair_kv_bucket,),
    extra_ports=(ExtraPort("http", "KOTAE_ONAIR_HTTP_PORT", 8770),),
    watches_consumers=True,  # the console shows each stage's lag
    # One voice and a standby; the speaker's lease decides who talks, never the scaler.
    resources=Resources(cpu="250m", memory="512Mi", cpu_limit="1", memory_limit="1Gi", min_replicas=2, max_replicas=2),
)
