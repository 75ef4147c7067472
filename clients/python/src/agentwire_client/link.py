"""The socket under a connection: open, read, and come back after a drop.

Both dialects lose sockets the same way (a phone changing networks, a
deploy, a proxy timing out), so the loop that notices the drop, waits with
jittered backoff and opens the next socket lives here once; each dialect
says only how to build its URL and what a frame means.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Dict, Generator, Generic, Optional, Tuple, TypeVar

from websockets.asyncio.client import ClientConnection, connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .backoff import ReconnectPolicy
from .credentials import Credential
from .errors import AgentwireError, ConnectError, ConnectionLost, CredentialExpired

log = logging.getLogger("agentwire_client")

# Upgrade refusals a retry will not change.
FATAL_STATUSES = {400, 401, 403, 404}
# Close codes after which coming back is pointless or wrong.
CLIENT_CLOSE = 1000


class Retry(Exception):
    """Raised by an ``_opened`` hook: this socket cannot be used, try again."""


class Link:
    """Owns the current socket and the reconnect loop; subclasses read frames."""

    def __init__(
        self, policy: ReconnectPolicy, credential: Credential, open_timeout: float = 10.0
    ) -> None:
        self._policy = policy
        self._credential = credential
        self._open_timeout = open_timeout
        self._ws: Optional[ClientConnection] = None
        self._live = asyncio.Event()
        self._closing = False
        self._failure: Optional[BaseException] = None
        self._runner: Optional["asyncio.Task[None]"] = None
        self._retry_after: Optional[float] = None
        # The message of a turn not started yet, and the last seq when it was sent.
        self._unstarted: Optional[Tuple[Dict[str, Any], int]] = None
        self._resent: Optional[Dict[str, Any]] = None
        self._rejoin_head: Optional[int] = None
        self.reconnects = 0

    # Hooks for the dialects.
    async def _url(self, rejoin: bool) -> str:
        raise NotImplementedError

    async def _headers(self) -> Dict[str, str]:
        return {}

    async def _opened(self, ws: ClientConnection, rejoin: bool) -> None:
        """Reads what a new socket starts with; raises ``Retry`` to drop it."""

    def _text(self, frame: Dict[str, Any]) -> None:
        raise NotImplementedError

    def _binary(self, data: bytes) -> None:
        pass

    def _dropped(self) -> None:
        """The socket is gone (a reconnect may follow)."""

    def _reopened(self) -> None:
        """A rejoin succeeded and the socket is live (frames can be sent)."""

    def _resend_unstarted(self, head: Optional[int]) -> None:
        """A message written just before the socket died may never have
        arrived: when the log the server reports holds nothing past what the
        client had when it sent it, the turn never started, so send it again.
        (When it did arrive, its frames come through the rejoin instead.)"""
        pending = self._unstarted
        if pending is None or head is None or head > pending[1]:
            return
        self._unstarted = None
        self._resent = pending[0]
        asyncio.get_running_loop().create_task(self._resend(pending[0]))

    async def _resend(self, frame: Dict[str, Any]) -> None:
        try:
            await self._send(frame)
        except Exception as error:  # the turn learns of it through _failed
            log.info("resending the message failed: %s", type(error).__name__)

    def _failed(self, error: BaseException) -> None:
        """No socket will come back: fail whatever waits."""

    async def _credential_expired(self) -> bool:
        """The server closed for an expired credential: ``True`` when a fresh
        one was obtained and reconnecting makes sense."""
        try:
            return await self._credential.fresh() is not None
        except Exception:
            log.warning("the token provider failed")
            return False

    def _is_credential_close(self, code: Optional[int], reason: str) -> bool:
        return False

    # The machinery.
    async def _started(self) -> None:
        """The first socket is open (background work may begin)."""

    async def _start(self) -> None:
        try:
            ws = await self._open(rejoin=False)
        except (OSError, InvalidHandshake, ConnectionClosed, Retry, asyncio.TimeoutError) as error:
            raise ConnectionLost(f"could not connect: {type(error).__name__}: {error}") from None
        self._runner = asyncio.get_running_loop().create_task(self._run(ws))
        await self._started()

    async def _open(self, rejoin: bool) -> ClientConnection:
        url = await self._url(rejoin)
        try:
            ws = await ws_connect(
                url,
                additional_headers=await self._headers(),
                open_timeout=self._open_timeout,
                max_size=64 * 1024 * 1024,
                ping_interval=20,
                ping_timeout=20,
            )
        except InvalidStatus as refused:
            status = refused.response.status_code
            body = refused.response.body.decode("utf-8", "replace").strip() if refused.response.body else ""
            if status in FATAL_STATUSES:
                raise ConnectError(status, body[:200]) from None
            raise Retry(f"HTTP {status}") from None
        try:
            await self._opened(ws, rejoin)
        except BaseException:
            await ws.close()
            raise
        self._ws = ws
        self._live.set()
        return ws

    async def _run(self, ws: ClientConnection) -> None:
        while True:
            await self._read(ws)
            self._live.clear()
            self._ws = None
            code, reason = ws.close_code, ws.close_reason or ""
            self._dropped()
            if self._closing:
                return
            log.info("socket closed (%s %s); rejoining", code, reason)
            if self._is_credential_close(code, reason) and not await self._credential_expired():
                self._fail(CredentialExpired(f"the server closed the connection: {code} {reason}"))
                return
            try:
                ws = await self._reconnect()
            except BaseException as error:
                self._fail(error)
                return
            self._reopened()

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    self._binary(message)
                    continue
                try:
                    frame = json.loads(message)
                except ValueError:
                    log.warning("dropped a frame that is not JSON")
                    continue
                if isinstance(frame, dict):
                    self._text(frame)
        except ConnectionClosed:
            pass

    async def _reconnect(self) -> ClientConnection:
        last: Optional[BaseException] = None
        for attempt, delay in enumerate(self._policy.delays(), start=1):
            if self._retry_after is not None:
                delay, self._retry_after = max(delay, self._retry_after), None
            await asyncio.sleep(delay)
            if self._closing:
                raise ConnectionLost("the connection was closed")
            try:
                ws = await self._open(rejoin=True)
            except AgentwireError:
                raise  # a refusal (ConnectError) or a session verdict: retrying will not help
            except (OSError, InvalidHandshake, ConnectionClosed, Retry, asyncio.TimeoutError) as error:
                last = error
                log.info("rejoin attempt %d failed: %s", attempt, type(error).__name__)
                continue
            self.reconnects += 1
            return ws
        reason = f" (last: {type(last).__name__})" if last else ""
        raise ConnectionLost(f"could not rejoin after the socket dropped{reason}")

    def _fail(self, error: BaseException) -> None:
        self._failure = error
        self._live.set()  # wake senders, who then see the failure
        self._failed(error)

    async def _send(self, frame: Dict[str, Any]) -> None:
        """Sends on the current socket, waiting for one while a rejoin runs."""
        data = json.dumps(frame, separators=(",", ":"))
        await self._send_raw(data)

    async def _send_raw(self, data: Any) -> None:
        while True:
            if self._failure is not None:
                raise self._failure
            if self._closing:
                raise ConnectionLost("the connection is closed")
            await self._live.wait()
            ws = self._ws
            if ws is None:
                if self._failure is not None:
                    raise self._failure
                await asyncio.sleep(0.01)
                continue
            try:
                await ws.send(data)
                return
            except ConnectionClosed:
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        """Closes for good (code 1000): nothing rejoins after this."""
        self._closing = True
        ws = self._ws
        if ws is not None:
            await ws.close(CLIENT_CLOSE)
        if self._runner is not None:
            self._runner.cancel()
            try:
                await self._runner
            except (asyncio.CancelledError, Exception):
                pass
        self._failed(ConnectionLost("the connection was closed"))

    async def drop_socket(self) -> None:
        """Aborts the current socket without a Close frame, as a network loss
        would (for tests and for applications that know the network changed)."""
        ws = self._ws
        if ws is not None and ws.transport is not None:
            ws.transport.abort()


L = TypeVar("L", bound=Link)


class Connector(Generic[L]):
    """What ``connect`` returns: ``await`` it for the open connection, or use
    ``async with`` to have it closed at the end of the block."""

    def __init__(self, connection: L) -> None:
        self._connection = connection

    def __await__(self) -> Generator[Any, None, L]:
        return self._open().__await__()

    async def _open(self) -> L:
        await self._connection._start()
        return self._connection

    async def __aenter__(self) -> L:
        return await self._open()

    async def __aexit__(self, *_exc: Any) -> None:
        await self._connection.close()
