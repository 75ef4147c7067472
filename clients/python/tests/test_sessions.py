"""Continuing a session, and one that has expired."""

from __future__ import annotations

import asyncio

import pytest

from agentwire_client import Done, SessionExpired, connect
from conftest import ALICE_KEY, Server


async def test_resuming_an_expired_session_raises_session_expired(server: Server) -> None:
    async with connect(server.url, agent="short-lived", token=ALICE_KEY) as first:
        await first.send("hello").result()
        old = first.session_id
    await asyncio.sleep(0.6)  # short-lived keeps a session 300 ms

    async with connect(server.url, agent="short-lived", token=ALICE_KEY, session_id=old) as conn:
        with pytest.raises(SessionExpired) as expired:
            await conn.send("resume?").result()
        assert expired.value.session_id == old
        assert expired.value.new_session_id == conn.session_id != old
        assert "session context has expired" in str(expired.value)
        # Sent again, the message starts over on the connection's own session.
        done = await conn.send("resume?").result()
        assert isinstance(done, Done) and done.session_id == conn.session_id


async def test_a_live_session_is_continued_by_a_new_connection(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as first:
        await first.send("the first words").result()
        old = first.session_id
    async with connect(server.url, agent="test-agent", token=ALICE_KEY, session_id=old) as again:
        done = await again.send("what came before?", metadata={"mock_scenario": "history"}).result()
        assert isinstance(done, Done) and done.session_id == old
        assert "the first words" in (done.content or "")
