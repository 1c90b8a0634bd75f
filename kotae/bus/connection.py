"""How a kotae process connects to NATS: servers, user or credentials file, TLS, its inbox prefix.

Every service has its own NATS user (see :mod:`kotae.bus.permissions`), which may
read replies only on its own inbox prefix; this module gives ``nats.connect`` and
FastStream's ``NatsBroker`` the options that log in as that user, and explains a
TLS failure in terms of the setting to change instead of retrying for ever.

Example::

    nc = await nats.connect(**connect_options(settings))
"""

from __future__ import annotations

import base64
import json
import re
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from kotae.settings import Settings, SettingsError, servers_of

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"

log = structlog.get_logger("kotae.bus")


def inbox_of(user: str) -> str:
    """The reply-subject prefix a user's connections use, and the only one it may subscribe to."""
    return f"_INBOX_{user}"


class NatsConnectError(ConnectionError):
    """This process cannot connect to NATS for a reason no retry fixes; the message names the setting."""


#: OpenSSL's reasons when the server turns this process's client certificate down.
_CLIENT_CERT_REFUSED = (
    "CERTIFICATE_REQUIRED",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_UNKNOWN",
    "UNSUPPORTED_CERTIFICATE",
)


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

#: What the server refused this process ("permissions violation for publish to …"), oldest first.
#: nats-py reports a refusal only to the error callback; the request that caused it just times
#: out, so a command reads this to say which user it ran as instead of a bare timeout.
_denials: list[str] = []


_denial_listeners: list[Callable[[str], None]] = []


def permission_denials() -> list[str]:
    """The permissions violations the NATS server reported to this process so far."""
    return list(_denials)


def on_permission_denial(listener: Callable[[str], None]) -> Callable[[], None]:
    """Call ``listener(violation)`` on the event loop when the server refuses this process something.

    Returns the function that removes it. A command that cannot do without what was refused
    stops at once, instead of waiting for its request's timeout.
    """
    _denial_listeners.append(listener)
    return lambda: _denial_listeners.remove(listener)


def _user_of(settings: Settings) -> str:
    if settings.nats_user:
        return f"NATS user {settings.nats_user!r} (KOTAE_NATS_USER)"
    if settings.nats_creds is not None:
        return f"the user of the credentials file {settings.nats_creds} (KOTAE_NATS_CREDS)"
    return "no NATS user (KOTAE_NATS_USER and KOTAE_NATS_CREDS are unset)"


def explain_denial(settings: Settings, needs: str, env_dir: Path) -> str | None:
    """What a command refused by the server should say: the user it ran as and the env file of the one it needs.

    ``needs`` is the user the command logs in as (e.g. ``operator`` for ``kotae onair``); ``env_dir``
    the folder where a running ``kotae up`` keeps each user's env file. None when nothing was refused.
    """
    if not _denials:
        return None
    env_file = env_dir / f"{needs}.env"
    return (
        f"the NATS server refused this command ({_denials[0]}): it ran as {_user_of(settings)}, "
        f"and it needs the {needs!r} user. Beside a running `kotae up`, load that user's env: "
        f"set -a; . {env_file}; set +a — elsewhere give it the {needs!r} user's credentials "
        "(docs/operations.md, Access)"
    )


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
        if "permissions violation" in str(err).lower():
            _denials.append(str(err).removeprefix("nats: "))
            for listener in list(_denial_listeners):
                listener(_denials[-1])
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
    to exactly one such prefix (as ``kotae nats creds`` writes them); else None.

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
