"""The recorded history: one JSON object a line, in the order things
happened, each with `t` (seconds since the run started, monotonic).

Kinds: `open` (a client socket: worker, dialect, replica, session, and the
rejoin position it asked for), `open_failed`, `send` / `recv` (every frame,
with its connection), `close`, `turn` (a client's summary of one message it
sent: content, scenario, the turn it became, its cancels, a refusal),
`nemesis` (a fault starting or healing), `readyz` (a probe's answer).
"""

import json
import time
from pathlib import Path


class Recorder:
    def __init__(self, path: Path):
        self.start = time.monotonic()
        self.file = open(path, "w")
        self.events: list[dict] = []

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def emit(self, kind: str, **fields) -> dict:
        event = {"t": self.now(), "kind": kind, **fields}
        self.events.append(event)
        self.file.write(json.dumps(event, separators=(",", ":")) + "\n")
        return event

    def close(self) -> None:
        self.file.close()


def load(path: Path) -> list[dict]:
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
