"""The test suite's own guard: nothing in a test may reach beyond this machine."""

from __future__ import annotations

import asyncio
import socket

import pytest
from conftest import OfflineError


@pytest.mark.parametrize("address", [("192.0.2.1", 443), ("8.8.8.8", 53), ("2001:db8::1", 443)])
def test_a_connection_beyond_loopback_fails_at_once(address):
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with (
        socket.socket(family, socket.SOCK_STREAM) as sock,
        pytest.raises(OfflineError, match="only connect to this machine"),
    ):
        sock.connect(address)


def test_asyncio_connections_are_guarded_too():
    async def attempt():
        await asyncio.open_connection("192.0.2.1", 80)

    with pytest.raises(OfflineError):
        asyncio.run(attempt())


def test_loopback_still_works():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=2):
            pass
