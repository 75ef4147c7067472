"""An asyncio client for agentwire's WebSocket dialects.

``connect`` speaks Omnia (``/ws?agent=…``) with ``stream=2``: a dropped
socket is rejoined and the turn's events arrive once. ``connect_gnosari``
speaks the Gnosari chat dialect. See the book's "Python client" chapter.
"""

from .backoff import ReconnectPolicy, gnosari_policy
from .binary import BinaryFrame
from .errors import (
    AgentwireError,
    ConnectError,
    ConnectionLost,
    CredentialExpired,
    ServerError,
    SessionExpired,
    ToolRejected,
    TurnInProgress,
    UploadFailed,
)
from .frames import (
    Chunk,
    Connected,
    Done,
    Error,
    Event,
    GoingAway,
    HistoryLost,
    Interrupt,
    Media,
    MediaChunk,
    SessionConfig,
    ToolCall,
    ToolResult,
    TurnStarted,
    Unknown,
    UploadReady,
)
from .gnosari import GnosariConnection, connect_gnosari
from .gnosari_events import (
    AgentCompleted,
    AgentStarted,
    GnosariError,
    GnosariEvent,
    GnosariGoingAway,
    GnosariUnknown,
    MessageRejected,
    SessionSummaryScheduled,
    StreamInfo,
    Token,
    ToolCallEvent,
    ToolResultEvent,
)
from .omnia import Connection, connect
from .turn import Turn, TurnFailed
from .uploads import Uploaded

__version__ = "0.1.0"

__all__ = [
    "AgentCompleted", "AgentStarted", "AgentwireError", "BinaryFrame", "Chunk", "ConnectError",
    "Connected", "Connection", "ConnectionLost", "CredentialExpired", "Done", "Error", "Event",
    "GnosariConnection", "GnosariError", "GnosariEvent", "GnosariGoingAway", "GnosariUnknown",
    "GoingAway", "HistoryLost", "Interrupt", "Media", "MediaChunk", "MessageRejected",
    "ReconnectPolicy", "ServerError", "SessionConfig", "SessionExpired", "SessionSummaryScheduled",
    "StreamInfo", "Token", "ToolCall", "ToolCallEvent", "ToolRejected", "ToolResult",
    "ToolResultEvent", "Turn", "TurnFailed", "TurnInProgress", "TurnStarted", "Unknown",
    "UploadFailed", "UploadReady", "Uploaded", "connect", "connect_gnosari", "gnosari_policy",
]
