"""Reconnect delays: exponential backoff with full jitter.

Jitter matters more than the curve: after a deploy every client of a node
loses its socket at the same instant, and without it they all come back in
the same millisecond.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator, Optional


@dataclass(frozen=True)
class ReconnectPolicy:
    """How a dropped socket is retried. ``max_attempts=0`` turns reconnecting off."""

    initial_delay: float = 0.1
    max_delay: float = 5.0
    multiplier: float = 2.0
    max_attempts: int = 8
    jitter: bool = True

    def delays(self, rng: Optional[random.Random] = None) -> Iterator[float]:
        """The wait before each attempt; the first attempt waits too (a little),
        so clients cut together do not reconnect together."""
        rng = rng or random.Random()
        ceiling = self.initial_delay
        for _ in range(self.max_attempts):
            yield rng.uniform(0, ceiling) if self.jitter else ceiling
            ceiling = min(self.max_delay, ceiling * self.multiplier)


def gnosari_policy() -> ReconnectPolicy:
    """The Gnosari contract's strategy: 2 s, 4 s, 8 s... capped at 30 s, five
    attempts, reset once a connection opens (jitter added on top)."""
    return ReconnectPolicy(initial_delay=2.0, max_delay=30.0, multiplier=2.0, max_attempts=5)
