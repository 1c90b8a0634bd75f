"""NATS credentials (``.creds``) for kotae's service users, for servers that run with JWT accounts.

A NATS server in operator mode knows no passwords: each client shows a user JWT,
signed by its account, and proves it holds the user's NKey seed. A ``.creds`` file
holds both. This module writes one per service user of :func:`kotae.bus.permissions.service_users`,
with that user's permissions inside the JWT, so a deployment on JWT accounts (a
managed NATS service, or a cluster set up with ``nsc``) restricts every stage
exactly as the generated nats-server configuration does. Each process then sets
``KOTAE_NATS_CREDS`` to its file; it takes its reply prefix, ``_INBOX_<user>``, from the
JWT (the one inbox the JWT lets it read; :func:`kotae.bus.connection.creds_inbox`).

Needs the ``nkeys`` package (``pip install 'kotae[creds]'``).

Example::

    kotae nats creds --account-seed account.nk --out deploy/creds
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from kotae.bus.permissions import Permissions

_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


class CredsError(ValueError):
    """A seed that cannot sign users, or a file that would be overwritten."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _keys() -> Any:
    try:
        import nkeys
    except ImportError:
        raise CredsError("writing .creds files needs the nkeys package (pip install 'kotae[creds]')") from None
    return nkeys


def new_seed(kind: str) -> bytes:
    """A fresh NKey seed of ``kind`` (``operator``, ``account`` or ``user``)."""
    nkeys = _keys()
    prefix = {
        "operator": nkeys.PREFIX_BYTE_OPERATOR,
        "account": nkeys.PREFIX_BYTE_ACCOUNT,
        "user": nkeys.PREFIX_BYTE_USER,
    }[kind]
    return bytes(nkeys.encode_seed(os.urandom(32), prefix))


def public_key(seed: bytes) -> str:
    return bytes(_keys().from_seed(bytearray(seed)).public_key).decode()


def encode(claims: dict[str, Any], signer_seed: bytes) -> str:
    """A NATS v2 JWT of ``claims``, issued and signed by ``signer_seed``; ``jti`` and ``iat`` are filled in."""
    signer = _keys().from_seed(bytearray(signer_seed))
    body = {**claims, "iss": bytes(signer.public_key).decode(), "iat": int(time.time()), "jti": ""}
    # The id is the hash of the claims without it, base32 without padding, as NATS's own tools make it.
    body["jti"] = (
        base64.b32encode(hashlib.new("sha512_256", json.dumps(body, sort_keys=True).encode()).digest())
        .decode()
        .rstrip("=")
    )
    signing_input = f"{_b64(json.dumps(_HEADER).encode())}.{_b64(json.dumps(body).encode())}"
    return f"{signing_input}.{_b64(signer.sign(signing_input.encode()))}"


def user_claims(
    name: str, user_public_key: str, permissions: Permissions | None, *, account: str | None = None
) -> dict[str, Any]:
    """Claims of a user JWT carrying ``permissions`` (``None``: unrestricted).

    ``account`` is the account's public key when the signer is one of the
    account's signing keys rather than the account itself.
    """
    nats: dict[str, Any] = {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}
    if permissions is not None:
        nats["pub"] = {"allow": list(permissions.publish)}
        if permissions.publish_deny:
            nats["pub"]["deny"] = list(permissions.publish_deny)
        nats["sub"] = {"allow": list(permissions.subscribe)}
    if account is not None:
        nats["issuer_account"] = account
    return {"name": name, "sub": user_public_key, "nats": nats}


def creds_text(user_jwt: str, user_seed: bytes) -> str:
    """The ``.creds`` file format that NATS clients read (nats-py's ``user_credentials``)."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "The NKey seed below signs as this user: keep this file as secret as a password.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{user_seed.decode()}\n"
        "------END USER NKEY SEED------\n"
    )


def read_account_seed(path: Path) -> bytes:
    """The account seed (``SA…``) in ``path``: the file's first line that is one."""
    try:
        lines = path.read_text(encoding="utf-8").split()
    except OSError as exc:
        raise CredsError(f"{path}: cannot read the account seed: {exc.strerror}") from None
    for word in lines:
        if word.startswith("SA"):
            try:
                public_key(word.encode())
            except Exception:
                raise CredsError(f"{path}: {word[:4]}… is not a valid account seed") from None
            return word.encode()
    raise CredsError(f"{path}: no account seed (a line starting with SA, as `nsc` exports it)")


def write_user_creds(
    users: dict[str, Permissions | None], account_seed: bytes, out: Path, *, account: str | None = None
) -> dict[str, Path]:
    """One ``<user>.creds`` per user in ``out`` (mode 0600), signed by ``account_seed``.

    Stops before writing anything when any of the files already exists: a second
    run must not replace the credentials that running processes hold.
    """
    paths = {user: out / f"{user}.creds" for user in users}
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing:
        raise CredsError(f"{', '.join(existing)} exist; delete them to make new credentials")
    signer = public_key(account_seed)
    if not signer.startswith("A"):
        raise CredsError("the seed signing users must be an account's (its public key starts with A)")
    out.mkdir(parents=True, exist_ok=True)
    for user, permissions in users.items():
        seed = new_seed("user")
        token = encode(user_claims(user, public_key(seed), permissions, account=account), account_seed)
        fd = os.open(paths[user], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(creds_text(token, seed))
    return paths


def environment_lines(paths: dict[str, Path]) -> list[str]:
    """What each service sets to log in with its file (its reply prefix is read from the JWT)."""
    return [f"{user}: KOTAE_NATS_CREDS={path}" for user, path in paths.items()]
