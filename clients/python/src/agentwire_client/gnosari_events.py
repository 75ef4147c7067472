"""The Gnosari dialect's events as typed values (field names as in the JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .frames import JSON, GoingAway, HistoryLost


@dataclass(frozen=True)
class AgentStarted:
    agent_name: str
    session_id: str
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Token:
    content: str
    agent_name: str
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCallEvent:
    """A server-side tool runs (Gnosari has no client tools)."""

    tool_name: str
    args: Any
    agent_name: str
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ToolResultEvent:
    tool_name: str
    result: Any
    agent_name: str
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class AgentCompleted:
    """The turn's successful terminal; ``cancelled`` when a cancel ended it."""

    agent_name: str
    full_response: str
    cancelled: bool = False
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class GnosariError:
    """An ``error`` event; the dialect has no codes, only the text."""

    error: str
    agent_name: Optional[str] = None
    session_id: Optional[str] = None
    client_message_id: Optional[str] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class MessageRejected:
    """Prompt-injection screening refused the message: nothing ran or was stored."""

    reason: str
    client_message_id: Optional[str]
    session_id: Optional[str]
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class SessionSummaryScheduled:
    session_id: str
    scheduled_at: str
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class StreamInfo:
    """``stream=2``: a turn's position in the session's log (before ``agent_started``)."""

    session_id: str
    epoch: str
    head: int
    turn_id: Optional[int] = None
    seq: Optional[int] = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


#: ``stream=2``'s drain notice is the same frame on both dialects.
GnosariGoingAway = GoingAway


@dataclass(frozen=True)
class GnosariUnknown:
    type: str
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


GnosariEvent = Union[
    AgentStarted,
    Token,
    ToolCallEvent,
    ToolResultEvent,
    AgentCompleted,
    GnosariError,
    MessageRejected,
    SessionSummaryScheduled,
    StreamInfo,
    GnosariGoingAway,
    HistoryLost,
    GnosariUnknown,
]


def parse_gnosari(frame: JSON) -> GnosariEvent:
    kind = str(frame.get("type") or frame.get("event_type") or "")
    seq = frame.get("seq")
    agent = str(frame.get("agent_name", ""))
    if kind == "agent_started":
        return AgentStarted(agent, str(frame.get("session_id", "")), seq, frame)
    if kind == "token":
        return Token(str(frame.get("content", "")), agent, seq, frame)
    if kind == "tool_call":
        return ToolCallEvent(str(frame.get("tool_name", "")), frame.get("args"), agent, seq, frame)
    if kind == "tool_result":
        return ToolResultEvent(str(frame.get("tool_name", "")), frame.get("result"), agent, seq, frame)
    if kind == "agent_completed":
        return AgentCompleted(
            agent, str(frame.get("full_response", "")), bool(frame.get("cancelled", False)), seq, frame
        )
    if kind == "error":
        return GnosariError(
            str(frame.get("error", "")),
            frame.get("agent_name"),
            frame.get("session_id"),
            frame.get("client_message_id"),
            seq,
            frame,
        )
    if kind == "message_rejected":
        data = frame.get("data") or {}
        return MessageRejected(
            str(data.get("reason", "")), data.get("client_message_id"), data.get("session_id"), frame
        )
    if kind == "session_summary_scheduled":
        return SessionSummaryScheduled(
            str(frame.get("session_id", "")), str(frame.get("scheduled_at", "")), frame
        )
    if kind == "stream_info":
        return StreamInfo(
            str(frame.get("session_id", "")),
            str(frame.get("epoch", "")),
            int(frame.get("head", 0) or 0),
            frame.get("turn_id"),
            seq,
            frame,
        )
    if kind == "going_away":
        return GnosariGoingAway(
            int(frame.get("time_left_ms", 0)),
            int(frame.get("retry_after_ms", 0)),
            dict(frame.get("resume") or {}),
            frame.get("session_id"),
            frame,
        )
    return GnosariUnknown(kind, frame)
