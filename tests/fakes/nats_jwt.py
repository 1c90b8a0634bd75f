"""A nats-server in operator mode (JWT accounts), configured the way ``nsc`` would set one up.

An operator, a system account and kotae's account are made with fresh NKeys; the
server trusts the operator and has both account JWTs preloaded (memory resolver).
Users are then minted by :mod:`kotae.bus.creds`, signed by kotae's account, as a
deployment on JWT accounts does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kotae.bus.creds import encode, new_seed, public_key

UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}
#: JetStream is enabled for an account whose limits allow it storage.
WITH_JETSTREAM = {**UNLIMITED, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


class JwtAccounts:
    """The keys and JWTs of one operator with a system account and kotae's account."""

    def __init__(self) -> None:
        self.operator_seed = new_seed("operator")
        self.system_seed = new_seed("account")
        self.account_seed = new_seed("account")
        self.signing_seed = new_seed("account")  # one of the account's signing keys
        self.system = public_key(self.system_seed)
        self.account = public_key(self.account_seed)
        operator = public_key(self.operator_seed)
        self.operator_jwt = encode(
            {
                "name": "kotae-test",
                "sub": operator,
                "nats": {"type": "operator", "version": 2, "system_account": self.system},
            },
            self.operator_seed,
        )
        self.system_jwt = self._account_jwt("SYS", self.system, UNLIMITED)
        self.account_jwt = self._account_jwt(
            "KOTAE", self.account, WITH_JETSTREAM, signing_keys=[public_key(self.signing_seed)]
        )

    def _account_jwt(
        self, name: str, key: str, limits: dict[str, Any], *, signing_keys: list[str] | None = None
    ) -> str:
        nats: dict[str, Any] = {"limits": limits, "type": "account", "version": 2}
        if signing_keys:
            nats["signing_keys"] = signing_keys
        return encode({"name": name, "sub": key, "nats": nats}, self.operator_seed)

    def server_config(self, port: int, store: Path) -> dict[str, Any]:
        return {
            "listen": f"127.0.0.1:{port}",
            "jetstream": {"store_dir": str(store)},
            "operator": self.operator_jwt,
            "system_account": self.system,
            "resolver": "MEMORY",
            "resolver_preload": {self.system: self.system_jwt, self.account: self.account_jwt},
        }

    def write_account_seed(self, path: Path) -> Path:
        path.write_text(self.account_seed.decode() + "\n", encoding="utf-8")
        return path
