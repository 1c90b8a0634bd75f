"""Who may do what on the bus, and how a process connects to it.

Every service has its own NATS user. A stage's user may publish exactly the
subjects its router declares, pull from its own durable consumer, and receive
replies only on its own inbox prefix (``_INBOX_<user>``), so it can neither
write another stage's subject nor read what is delivered to another stage.
``deploy/k8s/build.py`` writes these users into the production NATS
configuration and :class:`kotae.stack.Stack` runs the embedded server with the
same ones, so the two cannot drift apart.

Example::

    users = service_users(settings)              # {"retriever": Permissions(...), ...}
    nc = await nats.connect(**connect_options(settings))
"""

from __future__ import annotations

import base64
import json
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from kotae.bus.topology import CONSUMERS
from kotae.contracts import subjects
from kotae.settings import Settings, SettingsError, servers_of

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"

log = structlog.get_logger("kotae.bus")

#: The login of ``kotae streams`` on a deployed server: creates and updates kotae's streams, nothing else.
STREAMS = "streams"
#: Users of the processes that drive the embedded stack rather than serve in it.
STACK = "stack"  # declares the streams, watches the stages' consumers come up
REPLAY = "replay"  # `kotae demo`/`replay`/`eval`: ingests comments and reads their outcomes
REPORT = "report"  # `kotae report`: reads the evaluations
#: Unrestricted; the embedded server has it only when the process that starts it asks
#: (tests and benchmarks that publish anywhere). That process holds every password anyway.
ADMIN = "admin"

#: Every process creates the streams it uses when they are missing (idempotent) and reads stream
#: info. Changing an existing stream is not among them: a stage could otherwise drop subjects or
#: shorten retention for every stage (see kotae.bus.topology.ensure_streams).
STREAM_DECLARE = ("$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.NAMES")
#: Creating and updating: the embedded stack's own login, which brings streams to the code's settings.
STREAM_ADMIN = (*STREAM_DECLARE, "$JS.API.STREAM.UPDATE.>")

#: Streams whose messages are outcomes that others may read (never the work in flight).
OUTCOME_STREAMS = (subjects.STREAM_ANSWERS, subjects.STREAM_DEADLETTER, subjects.STREAM_EVALUATIONS)


@dataclass(frozen=True)
class Permissions:
    """A NATS user's publish allow (and deny) list and subscribe allow list."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()

    def config(self) -> dict[str, Any]:
        publish: dict[str, list[str]] = {"allow": list(self.publish)}
        if self.publish_deny:
            publish["deny"] = list(self.publish_deny)
        return {"publish": publish, "subscribe": {"allow": list(self.subscribe)}}


def inbox_of(user: str) -> str:
    """The reply-subject prefix a user's connections use, and the only one it may subscribe to."""
    return f"_INBOX_{user}"


def _durable(stream: str, durable: str) -> list[str]:
    """What a process needs to bind and pull from its durable consumer, and to ack."""
    return [
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _kv(bucket: str) -> list[str]:
    return [f"$KV.{bucket}.>", f"$JS.API.STREAM.MSG.GET.KV_{bucket}", f"$JS.API.DIRECT.GET.KV_{bucket}.>",
            f"$JS.API.CONSUMER.CREATE.KV_{bucket}.>"]


def _reading(stream: str) -> list[str]:
    """Ordered or durable consumers of one's own on ``stream`` (an overlay, a replay, a report)."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _stages_durables_on(stream: str) -> list[str]:
    """Denied to readers of ``stream``: a reader could otherwise take, delete or redefine a stage's consumer."""
    out = []
    for spec in CONSUMERS.values():
        if spec.stream == stream:
            d = spec.durable
            out += [f"$JS.API.CONSUMER.*.{stream}.{d}", f"$JS.API.CONSUMER.*.{stream}.{d}.>",
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{d}", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{d}",
                    f"$JS.ACK.{stream}.{d}.>"]
    return out


def _reader(user: str, streams: tuple[str, ...], *, publish: tuple[str, ...] = (), subscribe: tuple[str, ...] = ()) -> Permissions:
    allow = list(publish)
    deny: list[str] = []
    for stream in streams:
        allow += _reading(stream)
        deny += _stages_durables_on(stream)
    if "$JS.API.STREAM.NAMES" not in allow:
        allow.append("$JS.API.STREAM.NAMES")  # a subscribe without a stream name looks the stream up
    return Permissions(tuple(allow), (f"{inbox_of(user)}.>", *subscribe), tuple(deny))


@lru_cache(maxsize=1)
def stage_subjects() -> dict[str, tuple[list[str], str]]:
    """Per stage: the subjects its router declares it publishes, and the subject it consumes."""
    from kotae.services.evaluator.handlers import build_router as evaluator
    from kotae.services.generator.handlers import build_router as generator
    from kotae.services.reranker.handlers import build_router as reranker
    from kotae.services.retriever.handlers import build_router as retriever
    from kotae.services.verifier.handlers import build_router as verifier

    # Subjects do not depend on configuration; the defaults load no model just to list them.
    settings = Settings.model_construct()
    builders = {"retriever": retriever, "reranker": reranker, "generator": generator, "verifier": verifier, "evaluator": evaluator}
    out = {}
    for stage, build in builders.items():
        router = build(settings)
        published = sorted({p.subject.broker_address for p in router.publishers})
        (consumed,) = {s.subject.broker_address for s in router.subscribers}
        out[stage] = (published, consumed)
    return out


def service_users(settings: Settings) -> dict[str, Permissions]:
    """The users of deploy/ and of the embedded server: each stage, ingest, and readers of the answers."""
    from kotae.clarify import BUCKET as CLARIFY_BUCKET

    kv = {"retriever": [CLARIFY_BUCKET], "ingest": [CLARIFY_BUCKET, settings.ingest_kv_bucket]}
    users: dict[str, Permissions] = {}
    for stage, (published, _) in stage_subjects().items():
        spec = CONSUMERS[stage]
        allow = [*published, *STREAM_DECLARE, *_durable(spec.stream, spec.durable)]
        for bucket in kv.get(stage, []):
            allow += _kv(bucket)
        users[stage] = Permissions(tuple(allow), (f"{inbox_of(stage)}.>",))
    ingest = [subjects.COMMENT, subjects.answer("dropped"), *STREAM_DECLARE]
    for bucket in kv["ingest"]:
        ingest += _kv(bucket)
    users["ingest"] = Permissions(tuple(ingest), (f"{inbox_of('ingest')}.>",))
    # Overlays, TTS and other readers of the answers only read, through consumers of their own.
    users["reader"] = _reader("reader", (subjects.STREAM_ANSWERS,), subscribe=(f"{subjects.ANSWER_PREFIX}.>",))
    # `kotae streams` after an upgrade (a Job in deploy/k8s): the one service login that may change a stream.
    users[STREAMS] = Permissions(STREAM_ADMIN, (f"{inbox_of(STREAMS)}.>",))
    return users


def embedded_users(settings: Settings, *, admin: bool = False) -> dict[str, Permissions | None]:
    """The service users plus those of the processes that run the embedded stack (``None``: unrestricted)."""
    users: dict[str, Permissions | None] = dict(service_users(settings))
    readiness = tuple(f"$JS.API.CONSUMER.INFO.{spec.stream}.{spec.durable}" for spec in CONSUMERS.values())
    users[STACK] = Permissions((*STREAM_ADMIN, *readiness), (f"{inbox_of(STACK)}.>",))
    ingest = users["ingest"]
    assert ingest is not None
    users[REPLAY] = _reader(REPLAY, OUTCOME_STREAMS, publish=ingest.publish)
    users[REPORT] = _reader(REPORT, (subjects.STREAM_EVALUATIONS,))
    if admin:
        users[ADMIN] = None
    return users


def password_variable(user: str) -> str:
    """The environment variable the NATS server reads a user's password from."""
    return f"NATS_PASSWORD_{user.upper()}"


def user_entries(users: dict[str, Permissions | None]) -> list[dict[str, Any]]:
    """Users as NATS configuration entries whose passwords are ``$NATS_PASSWORD_<USER>`` variables."""
    entries = []
    for user, permissions in users.items():
        entry: dict[str, Any] = {"user": user, "password": "$" + password_variable(user)}
        if permissions is not None:
            entry["permissions"] = permissions.config()
        entries.append(entry)
    return entries


def render_conf(value: Any, indent: str = "") -> str:
    """A value in nats-server's configuration syntax.

    Strings are quoted (so subjects such as ``$JS.API.INFO`` stay literal), except
    ``$NATS_PASSWORD_*`` references, which the server resolves from its
    environment: passwords never need to be written to disk.
    """
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = [f"{inner}{json.dumps(str(k))}: {render_conf(v, inner)}" for k, v in value.items()]
        return "{\n" + "\n".join(lines) + f"\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + "\n".join(f"{inner}{render_conf(v, inner)}" for v in value) + f"\n{indent}]"
    if isinstance(value, str) and value.startswith("$NATS_PASSWORD_"):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


# --- connecting --------------------------------------------------------------------------


class NatsConnectError(ConnectionError):
    """This process cannot connect to NATS for a reason no retry fixes; the message names the setting."""


#: OpenSSL's reasons when the server turns this process's client certificate down.
_CLIENT_CERT_REFUSED = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_UNKNOWN", "UNSUPPORTED_CERTIFICATE")


def explain_tls_error(exc: BaseException, settings: Settings) -> str | None:
    """What a TLS failure means for this process's settings; ``None`` when ``exc`` is not one."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        ca = settings.nats_tls_ca
        return (
            f"the NATS server's certificate is not trusted ({exc.verify_message}): KOTAE_NATS_TLS_CA is "
            f"{ca if ca else 'unset'}; set it to the CA bundle that signed the server's certificate"
        )
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if any(word in reason for word in _CLIENT_CERT_REFUSED):
            cert = settings.nats_tls_cert
            return (
                f"the NATS server refused this process's client certificate ({reason}): KOTAE_NATS_TLS_CERT is "
                f"{cert if cert else 'unset'}; set KOTAE_NATS_TLS_CERT and KOTAE_NATS_TLS_KEY to a certificate "
                "signed by the CA the server trusts"
            )
        return f"TLS with the NATS server failed ({reason}); check KOTAE_NATS_TLS_CA, KOTAE_NATS_TLS_CERT and KOTAE_NATS_TLS_KEY"
    return None


ErrorCallback = Callable[[Exception], Awaitable[None]]


def refuse_on_tls_error(settings: Settings, *, while_: Callable[[], bool] = lambda: True) -> ErrorCallback:
    """An ``error_cb`` that stops connecting on a TLS failure, with its explanation, instead of retrying.

    A certificate that is refused stays refused, and retrying for ever would
    hide why a process never starts. ``while_`` limits this to when it says so
    (e.g. until the first connection: a reconnect loop must not be broken).
    """

    async def on_error(err: Exception) -> None:
        message = explain_tls_error(err, settings) if while_() else None
        if message:
            raise NatsConnectError(message) from err
        log.warning("nats.error", error=f"{type(err).__name__}: {err}")

    return on_error


def inbox_prefix(settings: Settings) -> str | None:
    """KOTAE_NATS_INBOX_PREFIX, else ``_INBOX_<KOTAE_NATS_USER>`` (what the generated users allow),
    else the one private inbox the user JWT in KOTAE_NATS_CREDS may subscribe to."""
    if settings.nats_inbox_prefix:
        return settings.nats_inbox_prefix
    if settings.nats_user:
        return inbox_of(settings.nats_user)
    if settings.nats_creds is not None:
        return creds_inbox(settings.nats_creds)
    return None


_CREDS_JWT = re.compile(r"-----BEGIN NATS USER JWT-----\s*([A-Za-z0-9_.-]+)\s*-+END NATS USER JWT-+")
_PRIVATE_INBOX = re.compile(r"^(_INBOX_[^.*>\s]+)\.>$")


def creds_inbox(path: Path) -> str | None:
    """``_INBOX_<user>`` when the user JWT in the ``.creds`` file at ``path`` lets it subscribe
    to exactly one such prefix (as ``python -m kotae.bus.access creds`` writes them); else None.

    The JWT's claims are read, not verified: the server verifies them at login.
    """
    try:
        found = _CREDS_JWT.search(path.read_text(encoding="utf-8"))
        if found is None:
            return None
        payload = found.group(1).split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        allowed = claims.get("nats", {}).get("sub", {}).get("allow") or []
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    prefixes = {m.group(1) for entry in allowed if isinstance(entry, str) and (m := _PRIVATE_INBOX.match(entry))}
    return prefixes.pop() if len(prefixes) == 1 else None


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of KOTAE_NATS_TLS_CA / _CERT / _KEY; ``None`` when none is set."""
    ca, cert, key = settings.nats_tls_ca, settings.nats_tls_cert, settings.nats_tls_key
    if ca is None and cert is None:
        return None
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
    except (ssl.SSLError, OSError) as exc:
        raise SettingsError(f"invalid setting: KOTAE_NATS_TLS_CA: cannot load {ca}: {exc}") from None
    if cert is not None:
        try:
            context.load_cert_chain(str(cert), str(key) if key else None)
        except (ssl.SSLError, OSError) as exc:
            raise SettingsError(
                f"invalid setting: KOTAE_NATS_TLS_CERT / KOTAE_NATS_TLS_KEY: cannot load {cert} with {key}: {exc}"
            ) from None
    return context


def connect_options(settings: Settings, url: str | None = None) -> dict[str, Any]:
    """Keyword arguments of ``nats.connect`` for this process.

    The servers (``url``, else KOTAE_NATS_URL), its user and password or its
    credentials file, the TLS context, the inbox prefix its user may read, and
    an error callback that stops at once on a TLS failure, saying which setting.
    """
    options: dict[str, Any] = {
        "servers": servers_of(url or settings.nats_url or DEFAULT_NATS_URL),
        "error_cb": refuse_on_tls_error(settings),
    }
    if settings.nats_user:
        options["user"] = settings.nats_user
        options["password"] = settings.nats_password.get_secret_value() if settings.nats_password else ""
    if settings.nats_creds is not None:
        options["user_credentials"] = str(settings.nats_creds)
    context = tls_context(settings)
    if context is not None:
        options["tls"] = context
    prefix = inbox_prefix(settings)
    if prefix:
        options["inbox_prefix"] = prefix
    return options


def broker_options(settings: Settings) -> dict[str, Any]:
    """The same options for FastStream's ``NatsBroker``, which takes them as a security object."""
    from faststream.nats.security import NatsCredentials, NatsSecurity, NatsUserPassword

    options = connect_options(settings)
    context = options.get("tls")
    security: NatsSecurity | None = None
    if "user" in options:
        security = NatsUserPassword(options["user"], options["password"], ssl_context=context)
    elif "user_credentials" in options:
        security = NatsCredentials.from_file(options["user_credentials"], ssl_context=context)
    elif context is not None:
        security = NatsSecurity(ssl_context=context)
    out: dict[str, Any] = {"servers": options["servers"], "security": security}
    if "inbox_prefix" in options:
        out["inbox_prefix"] = options["inbox_prefix"]
    return out


def with_credentials(url: str, user: str, password: str) -> str:
    """``url`` with ``user:password@`` in it: for this process's own connections, never for printing."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def without_credentials(url: str) -> str:
    """``url`` (or several, comma-separated) without any ``user:password@``: safe to log."""
    out = []
    for one in servers_of(url):
        parts = urlsplit(one if "://" in one else f"nats://{one}")
        out.append(urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])))
    return ",".join(out)


# --- passwords for deploy/compose.yaml ----------------------------------------------------


def password_lines() -> list[str]:
    """``NATS_PASSWORD_<USER>=<random>`` for every service user: what deploy/compose.yaml's NATS and stages read."""
    import secrets

    users = service_users(Settings.model_construct())  # the users of the generated configs, not this shell's
    # Hex after a letter, as on the embedded server: nats-server reads a variable's value as a
    # configuration token, which must stay a plain string (never a number, a boolean or a comment).
    return [f"{password_variable(user)}=k{secrets.token_hex(24)}" for user in users]


def main(argv: list[str] | None = None) -> int:
    """``python -m kotae.bus.access passwords|creds``: new passwords, or .creds files, for the service users."""
    import argparse
    import os
    import sys

    parser = argparse.ArgumentParser(prog="python -m kotae.bus.access", description="NATS users of kotae's deployments")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("passwords", help="print NATS_PASSWORD_<USER>=<random> for every service user (compose's .env)")
    p.add_argument("--out", type=str, help="write them to this file (created 0600; an existing file is left alone)")
    c = sub.add_parser("creds", help="a .creds file per service user, its permissions in the JWT (servers on JWT accounts)")
    c.add_argument("--account-seed", type=Path, required=True, help="file holding the seed (SA…) of the account that signs the users")
    c.add_argument("--account", help="the account's public key, when --account-seed is one of its signing keys")
    c.add_argument("--out", type=Path, required=True, help="folder for <user>.creds (created 0600; existing files are left alone)")
    args = parser.parse_args(argv)
    if args.command == "creds":
        from kotae.bus.creds import CredsError, environment_lines, read_account_seed, write_user_creds

        try:
            users: dict[str, Permissions | None] = dict(service_users(Settings.model_construct()))
            paths = write_user_creds(users, read_account_seed(args.account_seed), args.out, account=args.account)
        except CredsError as exc:
            sys.stderr.write(f"error: {exc}\n")
            return 1
        sys.stdout.write("\n".join(environment_lines(paths)) + "\n")
        return 0
    text = "# NATS passwords of deploy/compose.yaml (python -m kotae.bus.access passwords); keep out of git.\n"
    text += "\n".join(password_lines()) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        # O_EXCL: a second run must not silently replace the passwords a running server holds.
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        sys.stderr.write(f"{args.out} exists; delete it to make new passwords (then restart NATS and every stage)\n")
        return 1
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    sys.stderr.write(f"wrote {args.out} (mode 0600)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
