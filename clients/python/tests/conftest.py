"""The real server for the tests: ``agentwire serve`` on a config they write.

Every test talks to the binary named by ``AGENTWIRE_BIN`` (default: the
repository's ``target/debug/agentwire``), as an application would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from proxy import CutProxy

REPO = Path(__file__).resolve().parents[3]
ALICE_KEY = "ak_alice_python_client_0123456789"
BOB_KEY = "ak_bob_python_client_0123456789"
JWT_SECRET = "a-python-client-test-secret-of-32-bytes!"

AGENTS = """
voice_providers:
  - {name: echo-voice, type: mock, output: echo}
agents:
  - name: test-agent
    handler: test
  - name: short-lived
    handler: test
    context_ttl: 300ms
  - name: quick-tools
    handler: test
    ack_timeout: 300ms
    client_tool_timeout: 600ms
  - name: voice-demo
    handler: echo
    voice: echo-voice
teams:
  - name: desk
    orchestrator: test-agent
    agents: [quick-tools]
"""


def binary_path() -> Path:
    named = os.environ.get("AGENTWIRE_BIN")
    path = Path(named) if named else REPO / "target" / "debug" / "agentwire"
    if not path.is_absolute():
        path = REPO / path
    return path


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_jwt(subject: str, ttl: float) -> str:
    """An HS256 token the test server accepts, expiring ``ttl`` seconds from now."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"iss": "https://issuer.test", "aud": "agentwire", "sub": subject,
              "exp": int(time.time() + ttl)}
    payload = _b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(JWT_SECRET.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def config_yaml(data_dir: Path) -> str:
    return f"""
server:
  listen: 127.0.0.1:0
storage:
  sessions: sqlite://{data_dir / 'agentwire.db'}
  media:
    backend: local
    path: {data_dir / 'media'}
auth:
  pseudonym_key: "a-pseudonym-key-for-python-tests"
  api_keys:
    - id: alice-key
      sha256: "{sha256_hex(ALICE_KEY)}"
      subject: alice
    - id: bob-key
      sha256: "{sha256_hex(BOB_KEY)}"
      subject: bob
  jwt:
    issuer: https://issuer.test
    audience: agentwire
    hs256_secret: "{JWT_SECRET}"
    leeway: 0s
{AGENTS}"""


class Server:
    """A running ``agentwire serve``; ``url`` is ``ws://127.0.0.1:PORT``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.config = data_dir / "agentwire.yaml"
        self.config.write_text(config_yaml(data_dir))
        self.log: List[str] = []
        self.process: Optional[subprocess.Popen[str]] = None
        self.address = ""
        self.start()

    def start(self) -> None:
        binary = binary_path()
        if not binary.exists():
            raise RuntimeError(f"no agentwire binary at {binary}: set AGENTWIRE_BIN")
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
        self.process = subprocess.Popen(
            [str(binary), "serve", "--config", str(self.config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        )
        found = threading.Event()
        listening = re.compile(r"agentwire listening.*?127\.0\.0\.1:(\d+)")

        def drain() -> None:
            assert self.process is not None and self.process.stderr is not None
            for line in self.process.stderr:
                self.log.append(line)
                match = listening.search(line)
                if match and not found.is_set():
                    self.address = f"127.0.0.1:{match.group(1)}"
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(30):
            self.stop()
            raise RuntimeError("agentwire did not listen:\n" + "".join(self.log[-20:]))

    @property
    def url(self) -> str:
        return f"ws://{self.address}"

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self) -> None:
        """Kills the process and starts it again on the same database: the
        sessions survive, the in-memory logs (and their epochs) do not."""
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="agentwire-py-") as data:
        running = Server(Path(data))
        yield running
        running.stop()


@pytest.fixture()
def own_server() -> Iterator[Server]:
    """A server of the test's own, for tests that restart it."""
    with tempfile.TemporaryDirectory(prefix="agentwire-py-") as data:
        running = Server(Path(data))
        yield running
        running.stop()


@pytest.fixture()
async def proxy(server: Server) -> "CutProxy":
    cut = CutProxy(lambda: ("127.0.0.1", server.port))
    await cut.start()
    yield cut  # type: ignore[misc]
    await cut.stop()
