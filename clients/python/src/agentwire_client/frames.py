"""The Omnia dialect's server frames as typed values.

Field names are the JSON's (snake_case), so a reader of the protocol
document finds the same words here. Every event keeps the frame it came
from in ``raw``: the server may add fields this version does not know, and
an application should not have to wait for a client release to read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

JSON = Dict[str, Any]


@dataclass(frozen=True)
class Chunk:
    """A streamed text delta (``role == "user"``: a voice caller's transcript)."""

    content: str
    session_id: Optional[str] = None
    role: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Done:
    """The turn's successful terminal; ``cancelled`` when a cancel ended it."""

    content: Optional[str]
    session_id: Optional[str] = None
    parts: Optional[List[JSON]] = None
    cancelled: bool = False
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCall:
    """The agent asks for a tool: a client tool, or a scripted agent's server tool."""

    id: str
    name: str
    arguments: JSON
    consent_message: Optional[str] = None
    categories: Optional[List[str]] = None
    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ToolResult:
    """A server tool's result, or the server ending a client call (timeout, cancel)."""

    id: str
    result: Any = None
    error: Optional[str] = None
    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Media:
    """One media item from the agent, reassembled from its chunks or binary frames."""

    media_id: str
    mime_type: str
    data: bytes
    session_id: Optional[str] = None


@dataclass(frozen=True)
class MediaChunk:
    """A chunk of call audio (``media_id`` empty), passed on unassembled:
    a call's audio has no end to wait for."""

    media_id: str
    sequence: int
    is_last: bool
    data: bytes
    mime_type: str
    session_id: Optional[str] = None


@dataclass(frozen=True)
class Interrupt:
    """Barge-in: discard buffered audio output."""

    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class SessionConfig:
    """The audio format a voice call uses from now on."""

    codec: str
    sample_rate: int
    channels: int
    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Error:
    """An ``error`` frame. As a turn's last event it is the turn's failure."""

    code: str
    message: str
    details: Optional[JSON] = None
    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class TurnStarted:
    """``stream=2``: the turn's first frame, naming the log's epoch."""

    turn_id: int
    epoch: str
    agent: str
    session_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class GoingAway:
    """``stream=2``: the server is draining; the client will rejoin after the close."""

    time_left_ms: int
    retry_after_ms: int
    resume: JSON
    session_id: Optional[str] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class HistoryLost:
    """A rejoin the server could not replay (``replayed: false``): some frames
    of this session were missed for good. Reload the history through
    ``/api/v1/sessions/{session_id}/messages``; live frames follow."""

    session_id: str
    epoch: Optional[str]
    head: Optional[int]
    turn_lost: bool = False


@dataclass(frozen=True)
class Unknown:
    """A frame type this client does not know, passed through as it came."""

    type: str
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


Event = Union[
    Chunk,
    Done,
    ToolCall,
    ToolResult,
    Media,
    MediaChunk,
    Interrupt,
    SessionConfig,
    Error,
    TurnStarted,
    GoingAway,
    HistoryLost,
    Unknown,
]


@dataclass(frozen=True)
class Connected:
    """The first frame of every connection (kept as ``Connection.connected``)."""

    session_id: str
    capabilities: JSON
    resumed: Optional[bool] = None
    memory_facet: Optional[str] = None
    ai_disclosure: Optional[bool] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @property
    def event_log(self) -> JSON:
        """``stream=2``'s log position: ``{"head"}``, or after a rejoin
        ``{"epoch", "head", "replayed"}``."""
        log = self.capabilities.get("event_log")
        return log if isinstance(log, dict) else {}


@dataclass(frozen=True)
class UploadReady:
    """The answer to an ``upload_request``: where to PUT the bytes."""

    upload_id: str
    upload_url: str
    storage_ref: str
    expires_at: Optional[str] = None
    method: str = "PUT"
    headers: Dict[str, str] = field(default_factory=dict)


def parse_connected(frame: JSON) -> Connected:
    body = frame.get("connected") or {}
    return Connected(
        session_id=str(frame.get("session_id", "")),
        capabilities=dict(body.get("capabilities") or {}),
        resumed=body.get("resumed"),
        memory_facet=body.get("memory_facet"),
        ai_disclosure=body.get("ai_disclosure"),
        raw=frame,
    )


def parse_upload_ready(frame: JSON) -> UploadReady:
    body = frame.get("upload_ready") or {}
    return UploadReady(
        upload_id=str(body.get("upload_id", "")),
        upload_url=str(body.get("upload_url", "")),
        storage_ref=str(body.get("storage_ref", "")),
        expires_at=body.get("expires_at"),
        method=str(body.get("method") or "PUT"),
        headers={str(k): str(v) for k, v in (body.get("headers") or {}).items()},
    )


def parse_event(frame: JSON) -> Event:
    """One server frame (not ``connected``, ``upload_ready`` or ``media_chunk``,
    which the connection handles itself) as its event."""
    kind = str(frame.get("type", ""))
    sid = frame.get("session_id")
    seq = frame.get("seq")
    if kind == "chunk":
        return Chunk(str(frame.get("content", "")), sid, frame.get("role"), seq, frame)
    if kind == "done":
        return Done(
            frame.get("content"),
            sid,
            frame.get("parts"),
            bool(frame.get("cancelled", False)),
            seq,
            frame,
        )
    if kind == "tool_call":
        call = frame.get("tool_call") or {}
        return ToolCall(
            id=str(call.get("id", "")),
            name=str(call.get("name", "")),
            arguments=dict(call.get("arguments") or {}),
            consent_message=call.get("consent_message"),
            categories=call.get("categories"),
            session_id=sid,
            seq=seq,
            raw=frame,
        )
    if kind == "tool_result":
        result = frame.get("tool_result") or {}
        return ToolResult(
            str(result.get("id", "")), result.get("result"), result.get("error"), sid, seq, frame
        )
    if kind == "error":
        error = frame.get("error") or {}
        return Error(
            str(error.get("code", "")),
            str(error.get("message", "")),
            error.get("details"),
            sid,
            seq,
            frame,
        )
    if kind == "turn_started":
        started = frame.get("turn_started") or {}
        return TurnStarted(
            int(started.get("turn_id", 0)),
            str(started.get("epoch", "")),
            str(started.get("agent", "")),
            sid,
            seq,
            frame,
        )
    if kind == "interrupt":
        return Interrupt(sid, seq, frame)
    if kind == "session_config":
        config = frame.get("session_config") or {}
        return SessionConfig(
            str(config.get("codec", "")),
            int(config.get("sample_rate", 0)),
            int(config.get("channels", 0)),
            sid,
            seq,
            frame,
        )
    if kind == "going_away":
        away = frame.get("going_away") or {}
        return GoingAway(
            int(away.get("time_left_ms", 0)),
            int(away.get("retry_after_ms", 0)),
            dict(away.get("resume") or {}),
            sid,
            frame,
        )
    return Unknown(kind, frame)
