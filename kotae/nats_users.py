"""``kotae nats passwords|creds``: new passwords, or ``.creds`` files, for the service users of a deployment.

The users are those of :func:`kotae.bus.permissions.service_users` over every
declared stage, the same the embedded server and the generated configs carry.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from kotae.bus.permissions import Permissions, service_users
from kotae.bus.server_conf import password_variable
from kotae.services import STAGES
from kotae.settings import Settings


def deployment_users() -> dict[str, Permissions]:
    """The users of the generated configs, whatever this shell's settings say."""
    return service_users(STAGES, Settings.model_construct())


def password_lines() -> list[str]:
    """``NATS_PASSWORD_<USER>=<random>`` for every service user: what deploy/compose.yaml's NATS and stages read."""
    # Hex after a letter, as on the embedded server: nats-server reads a variable's value as a
    # configuration token, which must stay a plain string (never a number, a boolean or a comment).
    return [f"{password_variable(user)}=k{secrets.token_hex(24)}" for user in deployment_users()]


def write_passwords(out: Path | None) -> int:
    text = "# NATS passwords of deploy/compose.yaml (kotae nats passwords); keep out of git.\n"
    text += "\n".join(password_lines()) + "\n"
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        # O_EXCL: a second run must not silently replace the passwords a running server holds.
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        sys.stderr.write(f"{out} exists; delete it to make new passwords (then restart NATS and every stage)\n")
        return 1
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    sys.stderr.write(f"wrote {out} (mode 0600)\n")
    return 0


def write_creds(account_seed: Path, out: Path, account: str | None) -> int:
    from kotae.bus.creds import CredsError, environment_lines, read_account_seed, write_user_creds

    try:
        users: dict[str, Permissions | None] = dict(deployment_users())
        paths = write_user_creds(users, read_account_seed(account_seed), out, account=account)
    except CredsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    sys.stdout.write("\n".join(environment_lines(paths)) + "\n")
    return 0
