"""PostgreSQL, Redis and the replicas, each in its namespace: throwaway
instances as scripts/postgres.sh and scripts/redis.sh make them, bound to the
namespace's address, and the replicas' config and processes."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from net import PG_PROXY, REDIS_PROXY, REPLICA_PORT, Network, run

PG_BIN = os.environ.get("AGENTWIRE_POSTGRES_BIN", "/usr/lib/postgresql/15/bin")
API_KEY = "partition-harness-key"
AGENT = "test-agent"


def as_nobody(*args: str) -> list[str]:
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args]


class Postgres:
    def __init__(self, net: Network, out: Path):
        self.net = net
        self.dir = Path(tempfile.mkdtemp(prefix="agentwire-pg.partition."))
        self.out = out
        (out / "postgres.dir").write_text(str(self.dir))

    def start(self) -> None:
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "nobody", "nogroup")
        data = self.dir / "data"
        run(*as_nobody(f"{PG_BIN}/initdb", "-D", str(data), "-A", "trust", "-U", "agentwire",
                       "--no-sync", "-E", "UTF8", "--locale=C"))
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.net.subnet}.0/24 trust\n")
        # Durable commits (as the outage tests): an acknowledged write
        # survives; fsync off since the machine itself does not crash.
        options = (f"-k {self.dir} -c listen_addresses={self.net.address('pg')} "
                   "-c fsync=off -c synchronous_commit=on -c max_connections=300")
        run(*as_nobody(f"{PG_BIN}/pg_ctl", "-w", "-t", "30", "-D", str(data),
                       "-l", str(self.dir / "postgres.log"), "-o", options, "start"),
            ns=self.net.ns("pg"))

    def url(self, index: int) -> str:
        """Replica `index`'s URL: through its proxy on the host."""
        return (f"postgres://agentwire@{self.net.host}:{PG_PROXY + index}/postgres"
                "?sslmode=disable")

    def dump(self) -> list[dict]:
        """Every stored message: session id, seq, role, content, metadata."""
        sql = ("SELECT coalesce(json_agg(row_to_json(t) ORDER BY t.session, t.seq), '[]') FROM "
               "(SELECT s.id AS session, m.seq, m.role, m.content, m.metadata "
               "FROM messages m JOIN sessions s ON s.key = m.session_key) t")
        done = run(*as_nobody("psql", "-X", "-A", "-t", "-h", str(self.dir), "-U", "agentwire",
                              "-d", "postgres", "-c", sql), ns=self.net.ns("pg"))
        return json.loads(done.stdout)

    def stop(self) -> None:
        if (self.dir / "postgres.log").exists():
            shutil.copy(self.dir / "postgres.log", self.out / "postgres.log")
        if (self.dir / "data" / "postmaster.pid").exists():
            run(*as_nobody(f"{PG_BIN}/pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate",
                           "-w", "stop"), check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class Redis:
    def __init__(self, net: Network, out: Path):
        self.net = net
        self.out = out
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        log = open(self.out / "redis.log", "w")
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.net.ns("redis"), binary,
             "--bind", self.net.address("redis"), "--port", "6379", "--protected-mode", "no",
             "--save", "", "--appendonly", "no"],
            stdout=log, stderr=subprocess.STDOUT)
        for _ in range(100):
            probe = run("redis-cli", "-h", self.net.address("redis"), "ping", check=False)
            if probe.stdout.strip() == "PONG":
                return
            time.sleep(0.1)
        raise RuntimeError("redis did not answer within 10 s")

    def url(self, index: int) -> str:
        return f"redis://{self.net.host}:{REDIS_PROXY + index}/0"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def replica_config(pg_url: str, redis_url: str) -> str:
    digest = hashlib.sha256(API_KEY.encode()).hexdigest()
    # Everything else at its default (lease_ttl 10s, timeout 2s): the
    # harness tries the settings operators run.
    return (
        f"server:\n  listen: 0.0.0.0:{REPLICA_PORT}\n"
        f"storage:\n  sessions: \"{pg_url}\"\n"
        f"live: \"{redis_url}\"\n"
        "redis:\n  key_prefix: \"partition:\"\n"
        f"auth:\n  api_keys:\n    - id: harness\n      sha256: {digest}\n      subject: harness\n"
        f"agents:\n  - name: {AGENT}\n    handler: test\n"
    )


class Replica:
    def __init__(self, net: Network, index: int, binary: str, config: str, out: Path):
        self.net = net
        self.index = index
        self.name = f"r{index}"
        self.binary = binary
        self.config_path = out / f"{self.name}.yaml"
        self.config_path.write_text(config)
        self.log_path = out / f"{self.name}.log"
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def address(self) -> str:
        return f"{self.net.address(self.name)}:{REPLICA_PORT}"

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_path, "a")
        log.write(f"--- start {self.starts} at {time.time():.3f}\n")
        log.flush()
        # `ip netns exec` execs the binary: the pid is the server's.
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.net.ns(self.name), self.binary, "serve",
             "--config", str(self.config_path)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "info"})

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}): see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not healthy within {timeout} s: see {self.log_path}")

    def signal(self, which: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, which)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
