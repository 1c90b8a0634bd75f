"""``kotae onair status|skip|next ID|pause|resume|hold on|off|approve ID|reject ID|block AUTHOR|end``.

Commands go on the bus as ``control.v1`` to ``kotae.control.v1.<command>.<NATS user>``:
the sender's user is in the subject, and a user may publish only its own, so the
on-air stage (and the control stream, the audit log) knows who sent each one.
``status`` reads what the speaking on-air process keeps in its bucket.

Without ``KOTAE_NATS_URL``, the commands log in with the operator's credentials
that a running ``kotae up`` keeps in ``$KOTAE_DATA_DIR/nats/operator.env``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import nats
import nats.errors
import nats.js.errors
from pydantic import SecretStr

from kotae.bus.connection import connect_options
from kotae.bus.permissions import OPERATOR
from kotae.contracts import ControlV1, subjects
from kotae.services.onair.lease import key_for
from kotae.settings import Settings

COMMANDS = ("status", *subjects.CONTROL_COMMANDS)


class OperatorError(RuntimeError):
    """A command cannot be sent or answered; the message says why and what to do."""


def operator_settings(settings: Settings) -> Settings:
    """The settings to log in with: KOTAE_NATS_URL as configured, or the env file of a running ``kotae up``."""
    if settings.nats_url:
        return settings
    env_file = settings.data_dir / "nats" / f"{OPERATOR}.env"
    if not env_file.is_file():
        raise OperatorError(
            "kotae onair talks to a running stack: start `kotae up --onair` (it keeps the operator's "
            f"credentials in {env_file}) or set KOTAE_NATS_URL"
        )
    values = dict(line.split("=", 1) for line in env_file.read_text(encoding="utf-8").splitlines() if "=" in line)
    return settings.model_copy(
        update={
            "nats_url": values.get("KOTAE_NATS_URL"),
            "nats_user": values.get("KOTAE_NATS_USER"),
            "nats_password": SecretStr(values["KOTAE_NATS_PASSWORD"]) if "KOTAE_NATS_PASSWORD" in values else None,
        }
    )


def check(command: str, target: str | None) -> None:
    """Refuse a command whose target is missing or wrong, before connecting."""
    if command not in COMMANDS:
        raise OperatorError(f"unknown command {command!r}; expected one of {', '.join(COMMANDS)}")
    if command == "hold" and target not in ("on", "off"):
        raise OperatorError("hold takes on or off: kotae onair hold on")
    if command in ("next", "approve", "reject") and not target:
        raise OperatorError(f"{command} takes the comment id shown by `kotae onair status`")
    if command == "block" and not target:
        raise OperatorError("block takes the author as `kotae onair status` shows it")
    if command in ("status", "pause", "resume", "end") and target:
        raise OperatorError(f"{command} takes no argument")


#: Commands about one queued comment: its id must be in the queue (``reject`` may also name what is on air).
ABOUT_A_COMMENT = ("next", "approve", "reject")


def check_queued(command: str, target: str | None, status: dict[str, Any] | None, stream_id: str) -> None:
    """Refuse ``next``/``approve``/``reject`` of a comment that is not queued (as the status shows the queue)."""
    if command not in ABOUT_A_COMMENT:
        return
    if status is None:
        raise OperatorError(f"no on-air status for stream {stream_id!r}: is `kotae up --onair` running?")
    queued = [item["comment_id"] for item in status.get("queue") or []]
    on_air = (status.get("on_air") or {}).get("comment_id")
    if target in queued or (command == "reject" and target == on_air):
        return
    listed = ", ".join(queued[:10]) + (" …" if len(queued) > 10 else "") if queued else "the queue is empty"
    raise OperatorError(
        f"{command} {target}: no answer to comment {target!r} is queued on stream {stream_id!r} "
        f"(queued: {listed}); `kotae onair status` lists the queue"
    )


async def _status(js: Any, settings: Settings) -> dict[str, Any] | None:
    try:
        kv = await js.key_value(settings.onair_kv_bucket)
        entry = await kv.get(key_for("status", settings.stream_id))
    except (nats.js.errors.NotFoundError, nats.js.errors.BucketNotFoundError, nats.js.errors.KeyNotFoundError):
        return None
    return json.loads(entry.value) if entry.value else None


async def run_command(settings: Settings, command: str, target: str | None = None) -> str:
    """Send ``command`` (or read the status); returns what to print."""
    check(command, target)
    nc = await nats.connect(**connect_options(settings))
    try:
        js = nc.jetstream()
        status = await _status(js, settings)
        if command == "status":
            if status is None:
                raise OperatorError(
                    f"no on-air status for stream {settings.stream_id!r}: is `kotae up --onair` running?"
                )
            return render_status(status)
        check_queued(command, target, status, settings.stream_id)
        if command == "skip" and target is None and status and status.get("on_air"):
            target = status["on_air"]["comment_id"]  # skip exactly what the operator saw on air
        user = settings.nats_user or OPERATOR
        message = ControlV1(stream_id=settings.stream_id, command=command, target=target, issued_by=user)
        try:
            ack = await js.publish(
                subjects.control(command, user),
                message.model_dump_json().encode(),
                stream=subjects.STREAM_CONTROL,
                headers={"Nats-Msg-Id": message.message_id, "content-type": "application/json"},
                timeout=5.0,
            )
        except nats.errors.NoRespondersError:
            raise OperatorError("the control stream does not exist yet: start the on-air stage first") from None
        what = f" {target}" if target else ""
        return f"kotae: {command}{what} sent as {user} (control stream sequence {ack.seq})"
    finally:
        await nc.close()


def _queued(item: dict[str, Any]) -> list[str]:
    """One queue entry as the operator approves it: what the voice will say, what it cites, why it is here."""
    paid = item.get("superchat")
    tier = f"superchat {paid['amount']:g} {paid['currency']}" if paid else item["tier"]
    waits = f" — {item['waits']}" if item.get("waits") else ""
    approved = f" — approved by {item['approved_by']}" if item.get("approved_by") else ""
    lines = [
        f"  {item['rank']:>2}. {item['comment_id']:<12} {tier:<18} askers {item['askers']}  "
        f"age {item['age_s']:.0f}s  by {item.get('author_name') or item['author']}{waits}{approved}",
        f"        question {item.get('question') or '(withheld: ' + str(item.get('question_withheld')) + ')'}",
        f"        says     {item.get('speech') or ''}",
    ]
    documents = item.get("documents") or []
    if documents:
        cited = "; ".join(
            f"[{d['n']}] {d['title']}" + (f" (slide {d['slide']})" if d.get("slide") is not None else "")
            for d in documents
        )
        lines.append(f"        cites    {cited}")
    if item.get("slide") is not None:
        lines.append(f"        slide    {item['slide']}")
    lines.append(f"        verdict  {item.get('verdict_words') or '–'}")
    if item.get("why"):
        lines.append(f"        why      {item['why']}")
    return lines


def _age(at: str | None, now: datetime) -> str:
    if not at:
        return "?"
    return f"{(now - datetime.fromisoformat(at)).total_seconds():.0f}s ago"


def render_status(status: dict[str, Any], now: datetime | None = None) -> str:
    """``kotae onair status``: mode, on air, the queue with why, recent outcomes."""
    now = now or datetime.now(UTC)
    mode = status.get("mode") or {}
    flags = [name for name in ("paused", "hold", "ended") if mode.get(name)] or ["airing"]
    speaker = status.get("replica") if status.get("speaking") else "nobody (the last speaker stopped)"
    show = status.get("show") or {}
    lines = [
        f"stream {status.get('stream_id')}: {', '.join(flags)}; speaking: {speaker}; "
        f"status updated {_age(status.get('updated_at'), now)}" + (f"; {status['http']}" if status.get("http") else ""),
        f"show     {show['id']} (began {_age(show.get('started_at'), now)}; nothing verified before it airs)"
        if show.get("id")
        else "show     (none named)",
    ]
    on_air = status.get("on_air")
    if on_air:
        lines.append(
            f"on air   {on_air['comment_id']}  ({on_air.get('left_s', 0):.0f}s left"
            f"{', again after a takeover' if on_air.get('resumed') else ''})  {on_air.get('answer') or ''}"[:160]
        )
    else:
        lines.append("on air   (nothing)")
    queue = status.get("queue") or []
    lines.append(f"queue    {len(queue)} waiting")
    for item in queue[:15]:
        lines += _queued(item)
    recent = status.get("recent") or []
    if recent:
        lines.append("recent")
        for item in recent[:10]:
            lines.append(f"  {item['comment_id']:<12} {item['outcome']:<14} {item.get('reason') or ''}"[:160])
    if status.get("blocked"):
        lines.append("blocked  " + ", ".join(f"{a} (by {b})" for a, b in status["blocked"].items()))
    return "\n".join(lines)
