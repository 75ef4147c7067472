"""A JWT connection outlives its first token through credential_refresh."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from agentwire_client import CredentialExpired, Done, connect
from agentwire_client.credentials import server_deadline
from conftest import Server, mint_jwt


async def test_a_token_provider_keeps_the_connection_past_the_first_tokens_deadline(
    server: Server,
) -> None:
    first = mint_jwt("carol", ttl=6)
    deadline = server_deadline(first)
    assert deadline is not None
    issued: List[str] = []

    def provider() -> str:
        token = mint_jwt("carol", ttl=60)
        issued.append(token)
        return token

    async with connect(server.url, agent="test-agent", token=first, token_provider=provider) as conn:
        await conn.send("before").result()
        await asyncio.sleep(4.5)  # past the first token's deadline (about 3 s in)
        done = await conn.send("after the first deadline").result()
        assert isinstance(done, Done) and done.content == "echo: after the first deadline"
        assert len(issued) == 1, "refreshed once, before the deadline"
        assert conn.reconnects == 0, "the same socket carried on"


async def test_without_a_provider_the_expired_credential_is_surfaced(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=mint_jwt("dave", ttl=4)) as conn:
        await conn.send("hello").result()
        await asyncio.sleep(3.0)  # the deadline is 2 s in: the server closes 4401
        with pytest.raises(CredentialExpired) as expired:
            await conn.send("too late").result()
        assert "4401" in str(expired.value)


async def test_a_gnosari_socket_closed_for_its_credential_comes_back_with_a_fresh_one(
    server: Server,
) -> None:
    from agentwire_client import AgentCompleted, ReconnectPolicy, connect_gnosari

    issued: List[str] = []

    def provider() -> str:
        issued.append(mint_jwt("erin", ttl=60))
        return issued[-1]

    fast = ReconnectPolicy(initial_delay=0.05, max_delay=0.5, max_attempts=5)
    async with connect_gnosari(
        server.url, agent="test-agent", token=mint_jwt("erin", ttl=4),
        token_provider=provider, reconnect=fast,
    ) as conn:
        await conn.send("before").result()
        session = conn.session_id
        await asyncio.sleep(3.0)  # the server closes with 1008 at the deadline (2 s in)
        done = await conn.send("after").result()
        assert isinstance(done, AgentCompleted) and done.full_response == "echo: after"
        assert len(issued) == 1 and conn.reconnects == 1
        assert conn.session_id == session, "the same owner rejoined the same session"


async def test_an_omnia_4401_is_answered_by_reconnecting_with_the_providers_fresh_token(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from agentwire_client import ReconnectPolicy

    caplog.set_level(logging.INFO, logger="agentwire_client")
    calls: List[str] = []

    async def provider() -> str:
        calls.append("asked")
        if len(calls) == 1:
            # The refresh before the deadline hangs (a slow token service, a
            # suspended laptop): the server's deadline passes meanwhile.
            await asyncio.sleep(4.0)
        return mint_jwt("frank", ttl=60)

    fast = ReconnectPolicy(initial_delay=0.05, max_delay=0.5, max_attempts=5)
    async with connect(
        server.url, agent="test-agent", token=mint_jwt("frank", ttl=4),
        token_provider=provider, reconnect=fast,
    ) as conn:
        await conn.send("before").result()
        session = conn.session_id
        for _ in range(60):  # the deadline is about 2 s in
            if conn.reconnects:
                break
            await asyncio.sleep(0.1)
        assert conn.reconnects == 1, "came back after the 4401"
        closes = [r.getMessage() for r in caplog.records if "socket closed" in r.getMessage()]
        assert closes and closes[0].startswith("socket closed (4401"), closes
        assert len(calls) == 2, "the 4401 asked the provider for a fresh token"
        done = await conn.send("after the 4401", metadata={"mock_scenario": "history"}).result()
        assert isinstance(done, Done)
        assert conn.session_id == session, "the same owner rejoined the same session"
        assert "user: before\n" in (done.content or ""), done.content
        closes = [r.getMessage() for r in caplog.records if "socket closed" in r.getMessage()]
        assert len(closes) == 1, f"the fresh token holds: {closes}"
