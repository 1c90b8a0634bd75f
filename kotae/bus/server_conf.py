"""Users in nats-server's configuration syntax, with passwords left to the server's environment.

The embedded server (:mod:`kotae.bus.embedded`) and the generated deployment
configs (``deploy/k8s/build.py``) write the same users this way.
"""

from __future__ import annotations

import json
from typing import Any

from kotae.bus.permissions import Permissions


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
