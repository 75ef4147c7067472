"""The Omnia dialect (``/ws?agent=…``) with agentwire's ``stream=2`` additions.

The connection always opts into ``stream=2``: positions (``seq``) are what
let it come back after a dropped socket and hand the application each event
exactly once, and the same opt-in brings ``cancel``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple
from urllib.parse import urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from . import binary
from .backoff import ReconnectPolicy
from .credentials import Credential, TokenProvider, refresh_delay
from .errors import (
    AgentwireError,
    ConnectionLost,
    CredentialExpired,
    ServerError,
    SessionExpired,
    TurnInProgress,
    UploadFailed,
)
from .frames import (
    JSON,
    Chunk,
    Connected,
    Done,
    Error,
    Event,
    GoingAway,
    HistoryLost,
    ToolCall,
    ToolResult,
    TurnStarted,
    UploadReady,
    parse_connected,
    parse_event,
    parse_upload_ready,
)
from .link import Connector, Link, Retry
from .media import MediaAssembler
from .tools import Consent, Handler, ToolRegistry
from .turn import Turn, TurnFailed, TurnRules
from .uploads import Uploaded, put_bytes

log = logging.getLogger("agentwire_client.omnia")

UPLOAD_CODES = {"MEDIA_NOT_ENABLED", "UPLOAD_FAILED"}
CREDENTIAL_CLOSE = 4401


def _terminal(event: Event) -> bool:
    if isinstance(event, Done):
        return True
    if isinstance(event, Error):
        return event.seq is not None  # an error from the log ends its turn
    return isinstance(event, HistoryLost) and event.turn_lost


def _failure(event: Event) -> Optional[TurnFailed]:
    if isinstance(event, Error):
        return TurnFailed(event.code, event.message, event.details)
    if isinstance(event, HistoryLost) and event.turn_lost:
        return TurnFailed(None, "the turn was lost with the server's log; reload the history")
    return None


RULES: TurnRules[Event] = TurnRules(
    is_terminal=_terminal,
    failure=_failure,
    text=lambda e: e.content if isinstance(e, Chunk) and e.role is None else None,
)


def refusal(error: Error) -> AgentwireError:
    """The exception for a message the server refused before its turn began."""
    if error.code == "SESSION_EXPIRED":
        return SessionExpired(error.session_id, error.message)
    if error.code == "TURN_IN_PROGRESS":
        return TurnInProgress(error.code, error.message)
    if error.code == "CREDENTIAL_EXPIRED":
        return CredentialExpired(error.message)
    return ServerError(error.code, error.message, error.details)


class Connection(Link):
    """One Omnia conversation. Create it with :func:`connect`."""

    def __init__(
        self,
        url: str,
        agent: str,
        *,
        token: Optional[str] = None,
        token_provider: Optional[TokenProvider] = None,
        session_id: Optional[str] = None,
        binary_frames: bool = False,
        memory_facet: Optional[str] = None,
        reconnect: ReconnectPolicy = ReconnectPolicy(),
        on_event: Optional[Callable[[Event], None]] = None,
        open_timeout: float = 10.0,
    ) -> None:
        super().__init__(reconnect, Credential(token, token_provider), open_timeout)
        self._base = url
        self.agent = agent
        self._binary_frames = binary_frames
        self._memory_facet = memory_facet
        self._on_event = on_event or (lambda e: log.debug("event outside a turn: %r", e))
        self._resume_id = session_id
        self.session_id: Optional[str] = None
        self.connected: Optional[Connected] = None
        self.epoch: Optional[str] = None
        self.last_seq = 0
        self._turn: Optional[Turn[Event]] = None
        self._uploads: Deque["asyncio.Future[UploadReady]"] = deque()
        self._tools = ToolRegistry()
        self._media = MediaAssembler()
        self._refresher: Optional["asyncio.Task[None]"] = None
        self._expired: Optional[SessionExpired] = None

    # Opening.
    async def _url(self, rejoin: bool) -> str:
        parts = urlsplit(self._base)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path if parts.path not in ("", "/") else "/ws"
        query: List[Tuple[str, str]] = [("agent", self.agent), ("stream", "2")]
        if self._binary_frames:
            query.append(("binary", "true"))
        if self._memory_facet:
            query.append(("memory_facet", self._memory_facet))
        if rejoin and self.session_id is not None:
            query.append(("resume", self.session_id))
            if self.epoch is not None:
                query += [("after", str(self.last_seq)), ("epoch", self.epoch)]
        return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))

    async def _headers(self) -> Dict[str, str]:
        token = await self._credential.ensure()
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _opened(self, ws: ClientConnection, rejoin: bool) -> None:
        try:
            first = await asyncio.wait_for(ws.recv(), self._open_timeout)
        except ConnectionClosed as closed:
            # 1013: the session's store did not answer; another try may work.
            raise Retry(f"closed before connected: {closed.rcvd.code if closed.rcvd else None}")
        frame = json.loads(first)
        if frame.get("type") != "connected":
            raise Retry(f"first frame was {frame.get('type')!r}")
        connected = parse_connected(frame)
        self.connected = connected
        head = connected.event_log.get("head")
        self._rejoin_head = int(head) if isinstance(head, int) else None
        if rejoin and self.session_id is not None and self.epoch is not None:
            self._rejoined(connected)
        elif rejoin and self.session_id is not None:
            # No turn yet, so nothing to miss: the same session back, or
            # (gone meanwhile) the fresh one the server opened instead.
            self._reset_position(connected)
        else:
            self.session_id = connected.session_id
            self.last_seq = int(connected.event_log.get("head", 0) or 0)

    def _rejoined(self, connected: Connected) -> None:
        log_state = connected.event_log
        if connected.session_id != self.session_id or connected.resumed is False:
            lost = self.session_id
            self._reset_position(connected)
            self._lost_session(
                SessionExpired(
                    lost,
                    "the session could not be rejoined (expired, unknown or another owner's); "
                    "the connection is on a new session",
                    connected.session_id,
                )
            )
            return
        if self.epoch is None or log_state.get("replayed") is not False:
            return  # replayed: the missed frames follow, once
        turn_lost = log_state.get("epoch") != self.epoch
        self.epoch = log_state.get("epoch")
        self.last_seq = int(log_state.get("head", 0) or 0)
        notice = HistoryLost(
            connected.session_id,
            self.epoch,
            self.last_seq,
            turn_lost and self._turn is not None,
        )
        self._deliver(notice)

    def _reset_position(self, connected: Connected) -> None:
        self.session_id = connected.session_id
        self.epoch = None
        self.last_seq = int(connected.event_log.get("head", 0) or 0)

    def _reopened(self) -> None:
        if self._turn is not None and not self._turn.started:
            self._resend_unstarted(self._rejoin_head)

    def _lost_session(self, error: SessionExpired) -> None:
        turn = self._turn
        if turn is not None and not turn.finished:
            turn.fail(error)
            self._turn = None
        else:
            self._expired = error

    # Reading.
    def _text(self, frame: JSON) -> None:
        seq = frame.get("seq")
        kind = frame.get("type")
        if kind == "turn_started" and (frame.get("turn_started") or {}).get("epoch") != self.epoch:
            self.last_seq = 0  # another log (a resumed session's, a restart's): its own numbering
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return  # already delivered before the socket dropped
            self.last_seq = seq
        if kind == "upload_ready":
            if self._uploads:
                self._uploads.popleft().set_result(parse_upload_ready(frame))
            return
        if kind == "media_chunk":
            media = self._media.json_chunk(frame)
            if media is not None:
                self._deliver(media)
            return
        if kind == "connected":
            return
        event = parse_event(frame)
        if isinstance(event, TurnStarted):
            self.epoch = event.epoch
            if event.session_id:
                self.session_id = event.session_id
            if self._turn is not None:
                self._turn.started = True
                self._unstarted = None
        elif isinstance(event, ToolCall) and event.name in self._tools:
            self._tools.on_call(event, self._send)
        elif isinstance(event, ToolResult):
            self._tools.on_server_result(event)
        elif isinstance(event, GoingAway):
            self._retry_after = event.retry_after_ms / 1000
        elif isinstance(event, Error) and event.seq is None and self._refused(event):
            return
        self._deliver(event)

    def _binary(self, data: bytes) -> None:
        try:
            frame = binary.decode(data)
        except (binary.FrameError, ValueError) as error:
            log.warning("dropped a binary frame: %s", error)
            return
        media = self._media.binary_frame(frame)
        if media is not None:
            self._deliver(media)

    def _refused(self, error: Error) -> bool:
        """Routes an error about a frame this client sent; ``True`` when consumed."""
        if self._uploads and error.code in UPLOAD_CODES:
            self._uploads.popleft().set_exception(UploadFailed(f"{error.code}: {error.message}"))
            return True
        turn = self._turn
        if error.code == "TURN_IN_PROGRESS" and self._resent is not None:
            self._resent = None  # the first copy did arrive: its frames are coming
            return True
        if turn is not None and not turn.started and not turn.finished:
            self._unstarted = None
            failure = refusal(error)
            if isinstance(failure, SessionExpired):
                self._resume_id = None
                failure.new_session_id = self.session_id
            turn.fail(failure)
            self._turn = None
            return True
        if self._uploads and error.code in ("INVALID_MESSAGE", "RATE_LIMITED"):
            self._uploads.popleft().set_exception(UploadFailed(f"{error.code}: {error.message}"))
            return True
        return False

    def _deliver(self, event: Event) -> None:
        turn = self._turn
        if turn is not None and not turn.finished:
            turn.push(event)
            if turn.finished:
                self._turn, self._unstarted, self._resent = None, None, None
        else:
            self._on_event(event)

    def _dropped(self) -> None:
        while self._uploads:
            self._uploads.popleft().set_exception(ConnectionLost("the socket dropped"))

    def _failed(self, error: BaseException) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.fail(error)
        self._tools.cancel_all()
        if self._refresher is not None:
            self._refresher.cancel()

    def _is_credential_close(self, code: Optional[int], reason: str) -> bool:
        return code == CREDENTIAL_CLOSE

    # Credential refresh.
    async def _started(self) -> None:
        if self._credential.provider is not None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        while True:
            token = self._credential.token
            delay = refresh_delay(token) if token else None
            if delay is None:
                return
            await asyncio.sleep(delay)
            try:
                fresh = await self._credential.fresh()
            except Exception as error:
                log.warning("the token provider failed (%s); retrying", type(error).__name__)
                await asyncio.sleep(1.0)
                continue
            if fresh is not None and fresh != token:
                await self._send({"type": "credential_refresh", "token": fresh})

    # The application's API.
    def send(
        self,
        content: Optional[str] = None,
        *,
        parts: Optional[List[JSON]] = None,
        metadata: Optional[Dict[str, str]] = None,
        declare: Optional[JSON] = None,
    ) -> Turn[Event]:
        """Starts a turn; iterate the result for its events, up to ``Done`` (or
        the turn's ``Error``). Raises ``SessionExpired`` when the session it was
        to continue is gone, ``TurnInProgress`` while another turn runs."""
        message: JSON = {"type": "message"}
        if content is not None:
            message["content"] = content
        if parts is not None:
            message["parts"] = parts
        if metadata:
            message["metadata"] = metadata
        if declare is not None:
            message["declare"] = declare

        async def start(turn: Turn[Event]) -> None:
            if self._expired is not None:
                error, self._expired = self._expired, None
                raise error
            if self._turn is not None and not self._turn.finished:
                raise TurnInProgress("TURN_IN_PROGRESS", "this connection's turn is still running")
            if self._resume_id is not None:
                message["session_id"] = self._resume_id
            self._turn = turn
            self._unstarted, self._resent = (message, self.last_seq), None
            await self._send(message)

        turn: Turn[Event] = Turn(start, RULES, self.cancel)
        return turn

    async def cancel(self) -> None:
        """Stops the running turn; it ends with ``Done(cancelled=True)``. Does
        nothing when no turn runs."""
        await self._send({"type": "cancel"})

    def tool(
        self, name: str, *, consent: Optional[Consent] = None, timeout: Optional[float] = None
    ) -> Callable[[Handler], Handler]:
        """Registers a client tool handler (a decorator). The handler gets the
        call's arguments and returns the result (any JSON value); raising
        ``ToolRejected`` reports an error. ``consent`` (may ask a person)
        decides before the call is acknowledged; ``False`` declines it."""

        def register(handler: Handler) -> Handler:
            self._tools.register(name, handler, consent=consent, timeout=timeout)
            return handler

        return register

    async def upload(
        self, data: bytes, filename: str, mime_type: str, timeout: float = 30.0
    ) -> Uploaded:
        """Uploads a file to the session's media storage; name it in a message
        with ``uploaded.part()``."""
        future: "asyncio.Future[UploadReady]" = asyncio.get_running_loop().create_future()
        self._uploads.append(future)
        request = {"filename": filename, "mime_type": mime_type, "size_bytes": len(data)}
        try:
            await self._send({"type": "upload_request", "upload_request": request})
        except BaseException:
            if future in self._uploads:
                self._uploads.remove(future)
            raise
        ready = await asyncio.wait_for(future, timeout)
        await put_bytes(ready, data, self._credential.token)
        return Uploaded(ready.storage_ref, ready.upload_id, filename, mime_type, len(data))

    async def send_frame(self, frame: JSON) -> None:
        """Sends any frame as it is (``disclosure_ack``, manual tool answers...)."""
        await self._send(frame)

    async def send_audio(self, frame: binary.BinaryFrame) -> None:
        """Sends an OMNI binary frame (a voice call's audio)."""
        await self._send_raw(binary.encode(frame))

    async def __aenter__(self) -> "Connection":
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        await self.close()


def connect(
    url: str,
    agent: str,
    *,
    token: Optional[str] = None,
    token_provider: Optional[TokenProvider] = None,
    session_id: Optional[str] = None,
    binary_frames: bool = False,
    memory_facet: Optional[str] = None,
    reconnect: ReconnectPolicy = ReconnectPolicy(),
    on_event: Optional[Callable[[Event], None]] = None,
    open_timeout: float = 10.0,
) -> Connector[Connection]:
    """Connects to ``agent`` on the server at ``url`` (``ws://host:port``; the
    ``/ws`` path is added). ``token`` is a JWT or API key, sent as
    ``Authorization: Bearer``; ``token_provider`` is called for a fresh JWT
    before the current one's deadline. ``session_id`` continues an earlier
    session with the first message."""
    return Connector(
        Connection(
            url,
            agent,
            token=token,
            token_provider=token_provider,
            session_id=session_id,
            binary_frames=binary_frames,
            memory_facet=memory_facet,
            reconnect=reconnect,
            on_event=on_event,
            open_timeout=open_timeout,
        )
    )


__all__ = ["Connection", "connect", "refusal"]
