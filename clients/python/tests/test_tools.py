"""Client tools: the agent asks, a registered handler answers."""

from __future__ import annotations

from typing import Any, Dict, List

from agentwire_client import Done, ToolCall, ToolRejected, ToolResult, connect
from conftest import ALICE_KEY, Server


async def test_an_approved_tool_call_is_acknowledged_run_and_answered(server: Server) -> None:
    asked: List[ToolCall] = []
    ran: List[Dict[str, Any]] = []
    async with connect(server.url, agent="quick-tools", token=ALICE_KEY) as conn:

        def consent(call: ToolCall) -> bool:
            asked.append(call)
            return True

        @conn.tool("get_location", consent=consent)
        async def get_location(arguments: Dict[str, Any]) -> Dict[str, str]:
            ran.append(arguments)
            return {"city": "Lisbon"}

        events = [e async for e in conn.send("where am I?", metadata={"mock_scenario": "client-tool"})]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert len(calls) == 1 and calls[0].name == "get_location"
    assert asked[0].consent_message == "Allow location access?"
    assert asked[0].categories == ["location"]
    assert ran == [{"query": "current"}]
    done = events[-1]
    assert isinstance(done, Done) and done.content == "Tool result received"


async def test_a_declined_tool_call_is_rejected_with_the_reason(server: Server) -> None:
    async with connect(server.url, agent="quick-tools", token=ALICE_KEY) as conn:
        ran: List[Any] = []
        conn.tool("get_location", consent=lambda call: False)(ran.append)
        done = await conn.send("where?", metadata={"mock_scenario": "client-tool"}).result()
        assert isinstance(done, Done) and done.content == "Tool rejected: declined by the user"
        assert ran == [], "a declined tool never runs"


async def test_a_handler_that_refuses_reports_its_reason(server: Server) -> None:
    async with connect(server.url, agent="quick-tools", token=ALICE_KEY) as conn:

        @conn.tool("get_location")
        def get_location(arguments: Dict[str, Any]) -> None:
            raise ToolRejected("location services are off")

        done = await conn.send("where?", metadata={"mock_scenario": "client-tool"}).result()
        assert isinstance(done, Done)
        assert done.content == "Tool rejected: location services are off"


async def test_a_handler_slower_than_the_agents_timeout_is_ended_by_the_server(
    server: Server,
) -> None:
    async with connect(server.url, agent="quick-tools", token=ALICE_KEY) as conn:
        import asyncio

        @conn.tool("get_location")
        async def get_location(arguments: Dict[str, Any]) -> str:
            await asyncio.sleep(5)  # quick-tools allows 600 ms after the ack
            return "too late"

        events = [e async for e in conn.send("where?", metadata={"mock_scenario": "client-tool"})]
        ended = [e for e in events if isinstance(e, ToolResult)]
        assert ended and ended[0].error, events
        done = events[-1]
        assert isinstance(done, Done) and (done.content or "").startswith("Tool rejected:")


async def test_a_tool_answer_computed_while_the_socket_was_down_is_sent_after_the_rejoin(
    server: Server,
) -> None:
    import asyncio

    from agentwire_client import ReconnectPolicy
    from proxy import CutProxy

    proxy = CutProxy(lambda: ("127.0.0.1", server.port))
    await proxy.start()
    try:
        fast = ReconnectPolicy(initial_delay=0.05, max_delay=0.3, max_attempts=5)
        async with connect(proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=fast) as conn:
            runs: List[Dict[str, Any]] = []

            @conn.tool("get_location")
            async def get_location(arguments: Dict[str, Any]) -> Dict[str, str]:
                runs.append(arguments)
                await asyncio.sleep(0.3)  # the socket dies meanwhile
                return {"city": "Porto"}

            events = []
            async for event in conn.send("where?", metadata={"mock_scenario": "client-tool"}):
                events.append(event)
                if isinstance(event, ToolCall):
                    proxy.cut()
            assert conn.reconnects == 1
            assert len(runs) == 1, "run once, not again for the replayed call"
            assert sum(isinstance(e, ToolCall) for e in events) == 1
            done = events[-1]
            assert isinstance(done, Done) and done.content == "Tool result received"
    finally:
        await proxy.stop()
