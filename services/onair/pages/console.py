"""The console's actions: the same ``control.v1`` commands the CLI sends, on the same subjects.

A console action is a command published to ``kotae.control.v1.<command>.<user>``
as the on-air stage's own NATS user (its declaration lists those subjects), with
``via`` saying it came from the console and from which address. The control
stream keeps every command, so what the operator did is on the bus, in order,
with who and where; the stage applies it as it applies the CLI's, when the
stream delivers it back.
"""

from __future__ import annotations

from typing import Any

import nats.errors
import structlog
from nats.js import JetStreamContext

from kotae.contracts import ControlV1, subjects
from kotae.services.onair.commands import OperatorError, check

log = structlog.get_logger("kotae.onair")

#: What the console may send (``status`` is what it shows, not a command).
ACTIONS = subjects.CONTROL_COMMANDS


class ConsoleCommands:
    """Publishes the console's commands for one stream.

    Example::

        commands = ConsoleCommands(js, stream_id="default", user="onair")
        await commands.send("skip", "c042", remote="127.0.0.1")   # the control stream's sequence
    """

    def __init__(self, js: JetStreamContext, *, stream_id: str, user: str) -> None:
        self.js = js
        self.stream_id = stream_id
        self.user = user

    async def send(self, command: str, target: str | None, *, remote: str) -> int:
        """Publish one command; raises :class:`OperatorError` when it is not a valid one."""
        if command not in ACTIONS:
            raise OperatorError(f"unknown command {command!r}; expected one of {', '.join(ACTIONS)}")
        check(command, target)
        message = ControlV1(
            stream_id=self.stream_id,
            command=command,  # type: ignore[arg-type]
            target=target,
            issued_by=self.user,
            via=f"console {remote}"[:200],
        )
        try:
            ack = await self.js.publish(
                subjects.control(command, self.user),
                message.model_dump_json().encode(),
                stream=subjects.STREAM_CONTROL,
                headers={"Nats-Msg-Id": message.message_id, "content-type": "application/json"},
                timeout=5.0,
            )
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
            raise OperatorError(f"the control stream did not store the command ({type(exc).__name__})") from None
        log.info("onair.console_command", command=command, target=target, user=self.user, remote=remote, seq=ack.seq)
        return int(ack.seq)


def parse_action(body: Any) -> tuple[str, str | None]:
    """(command, target) of a console request body ``{"command": …, "target": …}``."""
    if not isinstance(body, dict):
        raise OperatorError('expected a JSON object {"command": …, "target": …}')
    command, target = body.get("command"), body.get("target")
    if not isinstance(command, str) or (target is not None and not isinstance(target, str)):
        raise OperatorError("command and target are strings")
    return command, (target or None)
