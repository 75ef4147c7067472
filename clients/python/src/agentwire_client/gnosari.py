"""The Gnosari dialect (``/ws/agent/{id}``, ``/ws/team/{id}[/agent/{member}]``).

Reconnection follows the Gnosari contract's strategy (a close other than
1000 is retried after 2 s, 4 s, 8 s... at most 30 s, five attempts, the
count reset once a socket opens), with jitter, and with ``stream=2`` the
new socket rejoins the session's log so the running turn's events arrive
once, with no gap.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, Dict, List, Optional, Set, Tuple
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from .backoff import ReconnectPolicy, gnosari_policy
from .credentials import Credential, TokenProvider
from .errors import ServerError, SessionExpired, TurnInProgress
from .frames import JSON, HistoryLost
from .gnosari_events import (
    AgentCompleted,
    AgentStarted,
    GnosariError,
    GnosariEvent,
    GnosariGoingAway,
    MessageRejected,
    StreamInfo,
    Token,
    parse_gnosari,
)
from .link import Connector, Link, Retry
from .turn import Turn, TurnFailed, TurnRules

log = logging.getLogger("agentwire_client.gnosari")

# The dialect has no error codes: a refused session is known by its text,
# which the Gnosari contract and agentwire's book both fix.
SESSION_NOT_FOUND = "session not found"
CREDENTIAL_CLOSE = 1008


def _terminal(event: GnosariEvent) -> bool:
    if isinstance(event, (AgentCompleted, MessageRejected)):
        return True
    if isinstance(event, GnosariError):
        return event.seq is not None
    return isinstance(event, HistoryLost) and event.turn_lost


def _failure(event: GnosariEvent) -> Optional[TurnFailed]:
    if isinstance(event, GnosariError):
        return TurnFailed(None, event.error)
    if isinstance(event, MessageRejected):
        return TurnFailed("message_rejected", event.reason)
    if isinstance(event, HistoryLost) and event.turn_lost:
        return TurnFailed(None, "the turn was lost with the server's log; reload the history")
    return None


RULES: TurnRules[GnosariEvent] = TurnRules(
    is_terminal=_terminal,
    failure=_failure,
    text=lambda e: e.content if isinstance(e, Token) else None,
)


class GnosariConnection(Link):
    """One Gnosari chat socket. Create it with :func:`connect_gnosari`."""

    def __init__(
        self,
        url: str,
        path: str,
        *,
        token: Optional[str] = None,
        token_provider: Optional[TokenProvider] = None,
        api_key: Optional[str] = None,
        password: Optional[str] = None,
        session_id: Optional[str] = None,
        reconnect: Optional[ReconnectPolicy] = None,
        on_event: Optional[Callable[[GnosariEvent], None]] = None,
        open_timeout: float = 10.0,
    ) -> None:
        super().__init__(reconnect or gnosari_policy(), Credential(token, token_provider), open_timeout)
        self._base = url
        self._path = path
        self._api_key = api_key
        self._password = password
        self.session_id = session_id
        self.epoch: Optional[str] = None
        self.last_seq = 0
        self._at_last: Set[str] = set()
        self._expired: Optional[SessionExpired] = None
        self._turn: Optional[Turn[GnosariEvent]] = None
        self._on_event = on_event or (lambda e: log.debug("event outside a turn: %r", e))

    async def _url(self, rejoin: bool) -> str:
        parts = urlsplit(self._base)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        query: List[Tuple[str, str]] = [("stream", "2")]
        if rejoin and self.session_id and self.epoch is not None:
            # One log entry can be several events of one seq (a turn's
            # stream_info and agent_started; a reply's last token and its
            # agent_completed): ask for the last seq again, and _text drops
            # the events of it already delivered.
            after = max(self.last_seq - 1, 0)
            query += [("session_id", self.session_id), ("after", str(after)), ("epoch", self.epoch)]
        path = parts.path.rstrip("/") + self._path
        return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))

    async def _headers(self) -> Dict[str, str]:
        headers: Dict[str, str] = {}
        token = await self._credential.ensure()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if self._api_key:
            headers["X-AUTH-TOKEN"] = self._api_key
        if self._password:
            headers["X-Access-Password"] = self._password
        return headers

    async def _opened(self, ws: ClientConnection, rejoin: bool) -> None:
        # Without a log to rejoin nothing says whether a message got through;
        # a first message's session (if it opened one) is out of reach anyway.
        self._rejoin_head = self.last_seq
        if not (rejoin and self.session_id and self.epoch is not None):
            return  # nothing to rejoin: the socket starts silent
        try:
            first = json.loads(await asyncio.wait_for(ws.recv(), self._open_timeout))
        except ConnectionClosed as closed:
            raise Retry(f"closed before stream_info: {closed.rcvd.code if closed.rcvd else None}")
        if first.get("type") == "error" and first.get("error") == SESSION_NOT_FOUND:
            lost, self.session_id, self.epoch, self.last_seq = self.session_id, None, None, 0
            expired = SessionExpired(lost, "the session could not be rejoined: session not found")
            if self._turn is not None and not self._turn.finished:
                self._fail_turn(expired)
            else:
                self._expired = expired  # told on the next send
            return
        if first.get("type") != "stream_info":
            raise Retry(f"first event was {first.get('type')!r}")
        self._rejoin_head = int(first.get("head", 0) or 0)
        if first.get("replayed") is False:
            turn_lost = first.get("epoch") != self.epoch
            self.epoch = first.get("epoch")
            self.last_seq = int(first.get("head", 0) or 0)
            self._at_last = set()
            self._deliver(
                HistoryLost(str(self.session_id), self.epoch, self.last_seq, turn_lost and self._turn is not None)
            )

    def _reopened(self) -> None:
        if self._turn is not None and not self._turn.started:
            self._resend_unstarted(self._rejoin_head)

    def _fail_turn(self, error: BaseException) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.fail(error)

    def _text(self, frame: JSON) -> None:
        seq = frame.get("seq")
        kind = str(frame.get("type", ""))
        if kind == "stream_info" and "seq" in frame and frame.get("epoch") != self.epoch:
            self.last_seq, self._at_last = 0, set()  # another log: its own numbering
        if isinstance(seq, int):
            if seq < self.last_seq or (seq == self.last_seq and kind in self._at_last):
                return  # delivered before the socket dropped
            if seq > self.last_seq:
                self.last_seq, self._at_last = seq, set()
            self._at_last.add(kind)
        event = parse_gnosari(frame)
        if isinstance(event, StreamInfo):
            self.epoch = event.epoch
            if event.session_id:
                self.session_id = event.session_id
            if self._turn is not None:
                self._turn.started = True
                self._unstarted = None
        elif isinstance(event, AgentStarted):
            self.session_id = event.session_id or self.session_id
            if self._turn is not None:
                self._turn.started = True
                self._unstarted = None
        elif isinstance(event, GnosariGoingAway):
            self._retry_after = event.retry_after_ms / 1000
        elif isinstance(event, GnosariError) and event.seq is None and self._refused(event):
            return
        self._deliver(event)

    def _refused(self, error: GnosariError) -> bool:
        turn = self._turn
        if turn is None or turn.started or turn.finished:
            return False
        if error.error == SESSION_NOT_FOUND:
            failure: ServerError = SessionExpired(error.session_id or self.session_id, error.error)
            self.session_id = None
        else:
            failure = ServerError(None, error.error)
        self._fail_turn(failure)
        return True

    def _deliver(self, event: GnosariEvent) -> None:
        turn = self._turn
        if turn is not None and not turn.finished:
            turn.push(event)
            if turn.finished:
                self._turn, self._unstarted = None, None
        else:
            self._on_event(event)

    def _failed(self, error: BaseException) -> None:
        self._fail_turn(error)

    def _is_credential_close(self, code: Optional[int], reason: str) -> bool:
        return code == CREDENTIAL_CLOSE

    def send(
        self,
        message: str,
        *,
        client_message_id: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        attachments: Optional[List[str]] = None,
    ) -> Turn[GnosariEvent]:
        """Starts a turn on the connection's session (a new one the first
        time); iterate it up to ``AgentCompleted`` (or its error)."""
        frame: JSON = {"message": message}
        if client_message_id is not None:
            frame["client_message_id"] = client_message_id
        if metadata:
            frame["metadata"] = metadata
        if attachments:
            frame["attachments"] = attachments

        async def start(turn: Turn[GnosariEvent]) -> None:
            if self._expired is not None:
                error, self._expired = self._expired, None
                raise error
            if self._turn is not None and not self._turn.finished:
                raise TurnInProgress(None, "this connection's turn is still running")
            if self.session_id:
                frame["session_id"] = self.session_id
            self._turn = turn
            self._unstarted = (frame, self.last_seq)
            await self._send(frame)

        return Turn(start, RULES, self.cancel)

    async def cancel(self) -> None:
        """Stops the session's running turn (``AgentCompleted(cancelled=True)``)."""
        if self.session_id:
            await self._send({"type": "cancel", "session_id": self.session_id})

    async def __aenter__(self) -> "GnosariConnection":
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        await self.close()


def connect_gnosari(
    url: str,
    *,
    agent: Optional[str] = None,
    team: Optional[str] = None,
    member: Optional[str] = None,
    token: Optional[str] = None,
    token_provider: Optional[TokenProvider] = None,
    api_key: Optional[str] = None,
    password: Optional[str] = None,
    session_id: Optional[str] = None,
    reconnect: Optional[ReconnectPolicy] = None,
    on_event: Optional[Callable[[GnosariEvent], None]] = None,
    open_timeout: float = 10.0,
) -> Connector[GnosariConnection]:
    """Connects to an agent (``agent=``) or a team (``team=``, optionally
    ``member=``) on the server at ``url``. Credentials go in headers (a JWT
    as ``Authorization``, an API key as ``X-AUTH-TOKEN``, a password as
    ``X-Access-Password``), never in the query string, which proxies log."""
    if (agent is None) == (team is None):
        raise ValueError("name exactly one of agent= or team=")
    if agent is not None:
        path = f"/ws/agent/{quote(agent, safe='')}"
    else:
        path = f"/ws/team/{quote(str(team), safe='')}"
        if member is not None:
            path += f"/agent/{quote(member, safe='')}"
    return Connector(
        GnosariConnection(
            url,
            path,
            token=token,
            token_provider=token_provider,
            api_key=api_key,
            password=password,
            session_id=session_id,
            reconnect=reconnect,
            on_event=on_event,
            open_timeout=open_timeout,
        )
    )
