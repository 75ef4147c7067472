"""The exceptions an application sees.

Each says what the application should do next, which is why they are split
by outcome rather than by where they were detected. No message here ever
carries a credential: tokens are only ever sent in headers and frames.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


class AgentwireError(Exception):
    """Base class of every error this client raises."""


class ServerError(AgentwireError):
    """The server refused a frame the client sent (an ``error`` about it).

    ``code`` is the protocol's error code (Omnia) or ``None`` (Gnosari has none).
    """

    def __init__(
        self, code: Optional[str], message: str, details: Optional[Dict[str, Any]] = None
    ) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code
        self.message = message
        self.details = details


class SessionExpired(ServerError):
    """The session named cannot be resumed (expired, unknown or another owner's).

    The conversation's context is gone: start over without ``session_id``.
    ``session_id`` is the one that was refused; ``new_session_id`` the one the
    connection is now on, when the server opened a fresh one.
    """

    def __init__(
        self, session_id: Optional[str], message: str, new_session_id: Optional[str] = None
    ) -> None:
        super().__init__("SESSION_EXPIRED", message)
        self.session_id = session_id
        self.new_session_id = new_session_id


class TurnInProgress(ServerError):
    """The session's previous turn still runs; the message was not queued."""


class CredentialExpired(AgentwireError):
    """The credential's deadline passed (close 4401/1008, or ``CREDENTIAL_EXPIRED``)
    and no token provider could replace it."""


class ConnectError(AgentwireError):
    """The WebSocket upgrade was refused with an HTTP status that a retry will
    not change (400, 401, 403, 404)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"upgrade refused: HTTP {status} {reason}".rstrip())
        self.status = status
        self.reason = reason


class ConnectionLost(AgentwireError):
    """The socket dropped and every reconnect attempt failed (or reconnecting
    is off). The running turn's outcome is unknown to this client."""


class UploadFailed(AgentwireError):
    """An upload could not be prepared or its bytes were not accepted."""


class ToolRejected(AgentwireError):
    """Raised by a tool's ``consent`` callback (or handler) to decline a call;
    the reason is sent to the agent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
