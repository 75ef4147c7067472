"""One turn: the message sent and the events that answer it, up to its terminal.

A turn is consumed as an async iterator so that the application renders
chunks as they come and its loop ends by itself at ``done`` (or the turn's
failure). Shared by both dialects; the connection decides what a terminal
is and feeds the queue.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Generic, List, Optional, TypeVar, Union

from .errors import AgentwireError, ServerError

E = TypeVar("E")


class TurnFailed(ServerError):
    """Raised by ``Turn.result()`` when the turn ended with an error."""


class _End:
    """Ends the iteration without an event (the connection closed it)."""


@dataclass(frozen=True)
class TurnRules(Generic[E]):
    """What a dialect's events mean to a turn."""

    is_terminal: Callable[[E], bool]
    failure: Callable[[E], Optional[TurnFailed]]
    text: Callable[[E], Optional[str]]


class Turn(Generic[E]):
    """The events of one turn. Iterate it (``async for event in turn``) or
    ``await turn.result()`` for the terminal event alone."""

    def __init__(
        self,
        start: Callable[["Turn[E]"], Awaitable[None]],
        rules: TurnRules[E],
        cancel: Callable[[], Awaitable[None]],
    ) -> None:
        self._start = start
        self._rules = rules
        self._cancel = cancel
        self._queue: "asyncio.Queue[Union[E, BaseException, _End]]" = asyncio.Queue()
        self._sent: Optional["asyncio.Task[None]"] = None
        self.started = False
        self.finished = False
        self.events: List[E] = []
        self._drained = False
        self._error: Optional[BaseException] = None

    def begin(self) -> None:
        """Sends the message now (iteration or ``result()`` does it otherwise)."""
        if self._sent is None:
            self._sent = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        try:
            await self._start(self)
        except BaseException as exc:  # delivered to whoever reads the turn
            self.fail(exc)

    # Fed by the connection.
    def push(self, event: E) -> None:
        if self.finished:
            return
        self.events.append(event)
        self._queue.put_nowait(event)
        if self._rules.is_terminal(event):
            self.finished = True

    def fail(self, error: BaseException) -> None:
        if self.finished:
            return
        self.finished = True
        self._queue.put_nowait(error)

    def end(self) -> None:
        if self.finished:
            return
        self.finished = True
        self._queue.put_nowait(_End())

    # Read by the application.
    def __aiter__(self) -> AsyncIterator[E]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[E]:
        if self._drained:  # read before: the same events again, from memory
            for event in self.events:
                yield event
            if self._error is not None:
                raise self._error
            return
        self.begin()
        while True:
            item = await self._queue.get()
            if isinstance(item, BaseException):
                self._drained, self._error = True, item
                raise item
            if isinstance(item, _End):
                self._drained = True
                return
            terminal = self._rules.is_terminal(item)
            self._drained = terminal
            yield item
            if terminal:
                return

    async def result(self) -> E:
        """The turn's terminal event; raises ``TurnFailed`` for a failed turn."""
        last: Optional[E] = None
        async for event in self:
            last = event
        if last is None:
            raise AgentwireError("the turn ended without a terminal event")
        failure = self._rules.failure(last)
        if failure is not None:
            raise failure
        return last

    async def text(self) -> str:
        """The reply's text as streamed (chunks or tokens), waiting for the end."""
        pieces: List[str] = []
        async for event in self:
            piece = self._rules.text(event)
            if piece is not None:
                pieces.append(piece)
        failure = self._rules.failure(self.events[-1]) if self.events else None
        if failure is not None:
            raise failure
        return "".join(pieces)

    async def cancel(self) -> None:
        """Stops the running turn; it ends with its terminal marked cancelled."""
        await self._cancel()

