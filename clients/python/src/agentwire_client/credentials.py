"""Credentials: the token in use, its deadline, and where fresh ones come from.

The server closes a JWT connection at the token's expiry less
min(30 s, half its remaining life), so the client must know that deadline to
refresh before it. The token is read (never verified: that is the server's
job) only for its ``exp``. Nothing here logs or formats a token.
"""

from __future__ import annotations

import base64
import inspect
import json
import time
from typing import Awaitable, Callable, Optional, Union

TokenProvider = Callable[[], Union[str, Awaitable[str]]]


def jwt_expiry(token: str) -> Optional[float]:
    """The ``exp`` of a JWT (seconds since the epoch), or ``None`` for an API
    key or a token without one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


def server_deadline(token: str, now: Optional[float] = None) -> Optional[float]:
    """When the server will stop accepting this token on a connection."""
    exp = jwt_expiry(token)
    if exp is None:
        return None
    now = time.time() if now is None else now
    remaining = max(0.0, exp - now)
    return exp - min(30.0, remaining / 2)


def refresh_delay(token: str, now: Optional[float] = None) -> Optional[float]:
    """How long to wait before refreshing: most of the way to the deadline,
    leaving a fifth of it (at least a second) for the provider to answer."""
    now = time.time() if now is None else now
    deadline = server_deadline(token, now)
    if deadline is None:
        return None
    left = deadline - now
    return max(0.0, left - max(1.0, left / 5))


class Credential:
    """The connection's current token, replaced by refreshes."""

    def __init__(self, token: Optional[str], provider: Optional[TokenProvider]) -> None:
        self.token = token
        self.provider = provider

    async def fresh(self) -> Optional[str]:
        """A new token from the provider (which becomes the current one), or
        ``None`` without a provider."""
        if self.provider is None:
            return None
        value = self.provider()
        token = await value if inspect.isawaitable(value) else value
        self.token = str(token)
        return self.token

    async def ensure(self) -> Optional[str]:
        """The token to connect with: the current one, or the provider's
        first when none was given."""
        if self.token is None and self.provider is not None:
            await self.fresh()
        return self.token

    def __repr__(self) -> str:  # never show the token
        return f"Credential(token={'<set>' if self.token else None})"
