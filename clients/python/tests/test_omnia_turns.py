"""A turn on the Omnia dialect, as an application sees it."""

from __future__ import annotations

import pytest

from agentwire_client import (
    Chunk,
    ConnectError,
    Done,
    Error,
    TurnFailed,
    TurnStarted,
    connect,
)
from conftest import ALICE_KEY, Server


async def test_a_streamed_turn_yields_its_chunks_then_done_and_ends(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        assert conn.connected is not None and conn.connected.capabilities.get("cancel") is True
        events = [e async for e in conn.send("hi", metadata={"mock_scenario": "stream"})]
        assert [type(e) for e in events] == [TurnStarted, Chunk, Chunk, Chunk, Done]
        assert [e.content for e in events if isinstance(e, Chunk)] == ["Hello", " ", "world"]
        done = events[-1]
        assert isinstance(done, Done) and done.content == "Hello world" and not done.cancelled
        assert done.session_id == conn.session_id
        # The connection takes the next turn on the same session.
        reply = await conn.send("again").result()
        assert isinstance(reply, Done) and reply.content == "echo: again"
        assert reply.session_id == done.session_id


async def test_a_failed_turn_ends_with_its_error_and_result_raises(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        events = [e async for e in conn.send("x", metadata={"mock_scenario": "error"})]
        last = events[-1]
        assert isinstance(last, Error)
        assert (last.code, last.message) == ("TEST_ERROR", "something went wrong")
        with pytest.raises(TurnFailed) as failed:
            await conn.send("x", metadata={"mock_scenario": "handler-error"}).result()
        assert failed.value.code == "INTERNAL_ERROR"
        # The socket is still good for the next turn.
        assert (await conn.send("ok").result()).content == "echo: ok"  # type: ignore[union-attr]


async def test_a_refused_credential_is_reported_without_the_credential(server: Server) -> None:
    secret = "ak_not_a_key_anyone_issued_0123456789"
    with pytest.raises(ConnectError) as refused:
        await connect(server.url, agent="test-agent", token=secret)
    assert refused.value.status == 401
    assert secret not in str(refused.value) and secret not in repr(refused.value)
    assert not any(secret in line for line in server.log)
