"""Client tools: functions the agent may ask the application to run.

A call belongs to the session, not to one socket, so the registry remembers
calls by id: a call replayed after a rejoin is not run twice, and an answer
computed while the socket was down is sent on the next one. The protocol
wants an acknowledgement within the agent's ``ack_timeout`` (5 s by
default), which is why the ack goes out before the handler runs, and the
consent check (which may ask a person) before the ack only when the
application registered one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Union

from .errors import ToolRejected
from .frames import JSON, ToolCall, ToolResult

log = logging.getLogger("agentwire_client.tools")

Handler = Callable[[JSON], Union[Any, Awaitable[Any]]]
Consent = Callable[[ToolCall], Union[bool, Awaitable[bool]]]
Send = Callable[[JSON], Awaitable[None]]


@dataclass
class _Tool:
    handler: Handler
    consent: Optional[Consent]
    timeout: Optional[float]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: Dict[str, _Tool] = {}
        self._running: Dict[str, "asyncio.Task[None]"] = {}
        self._seen: Set[str] = set()

    def register(
        self,
        name: str,
        handler: Handler,
        *,
        consent: Optional[Consent] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self._tools[name] = _Tool(handler, consent, timeout)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def on_call(self, call: ToolCall, send: Send) -> None:
        """Starts answering ``call`` in the background (once per call id)."""
        if call.id in self._seen:
            return
        self._seen.add(call.id)
        task = asyncio.get_running_loop().create_task(self._answer(call, send))
        self._running[call.id] = task

        def forget(_task: "asyncio.Task[None]") -> None:
            self._running.pop(call.id, None)

        task.add_done_callback(forget)

    def on_server_result(self, result: ToolResult) -> None:
        """The server ended a call itself (timeout, cancel): stop working on it."""
        task = self._running.pop(result.id, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        for task in list(self._running.values()):
            task.cancel()

    async def _answer(self, call: ToolCall, send: Send) -> None:
        tool = self._tools.get(call.name)
        if tool is None:
            await _nack(send, call.id, f"no handler for tool {call.name!r} on this client")
            return
        try:
            if tool.consent is not None and not await _maybe_await(tool.consent(call)):
                await _nack(send, call.id, "declined by the user")
                return
        except ToolRejected as rejected:
            await _nack(send, call.id, rejected.reason)
            return
        await send({"type": "tool_call_ack", "tool_call_ack": {"call_id": call.id}})
        answer: JSON = {"call_id": call.id}
        try:
            result = await asyncio.wait_for(
                _maybe_await(tool.handler(call.arguments)), tool.timeout
            )
            answer["result"] = result
        except ToolRejected as rejected:
            # A decline, not a failure: the session records the call as denied.
            await _nack(send, call.id, rejected.reason)
            return
        except asyncio.TimeoutError:
            answer["error"] = f"tool {call.name} timed out on the client"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the agent gets a failure, not a hang
            log.warning("client tool %s failed: %s", call.name, type(exc).__name__)
            answer["error"] = f"tool {call.name} failed: {type(exc).__name__}"
        await send({"type": "tool_result", "tool_result": answer})


async def _nack(send: Send, call_id: str, reason: str) -> None:
    await send({"type": "tool_call_nack", "tool_call_nack": {"call_id": call_id, "reason": reason}})
