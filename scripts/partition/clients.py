"""Clients of both dialects (`stream=2`), each on a session of its own,
running turns, cancels, client tools and rejoins through whichever replica
they pick (cut off or not), recording every frame they send and receive."""

import asyncio
import json
import random
from dataclasses import dataclass, field

import websockets
from websockets.asyncio.client import connect

from history import Recorder
from services import AGENT, API_KEY

# No frame for this long (the default lease_ttl and then some): the client
# gives up on the socket and rejoins elsewhere.
IDLE = 15.0
CONNECT = 5.0


def is_terminal(frame: dict) -> bool:
    """A turn's end from the log (it has a seq): done, agent_completed, or
    a failed turn's error."""
    return "seq" in frame and frame.get("type") in ("done", "agent_completed", "error")


def turn_start(frame: dict) -> tuple[str, int] | None:
    """(epoch, turn_id) when `frame` opens a turn (either dialect)."""
    if frame.get("type") == "turn_started":
        started = frame["turn_started"]
        return started["epoch"], started["turn_id"]
    if frame.get("type") == "stream_info" and "turn_id" in frame:
        return frame["epoch"], frame["turn_id"]
    return None


def rejoined(first: dict) -> bool:
    """Whether a rejoin's first frame puts the socket on the session:
    Omnia's `connected` with `resumed: true`, Gnosari's `stream_info`."""
    if first.get("type") == "connected":
        return first.get("connected", {}).get("resumed") is True
    return first.get("type") == "stream_info"


def event_log(frame: dict) -> dict | None:
    """A rejoin's answer: Omnia's connected.capabilities.event_log, or
    Gnosari's first stream_info (the one with `replayed`)."""
    if frame.get("type") == "connected":
        return frame.get("capabilities", {}).get("event_log")
    if frame.get("type") == "stream_info" and "replayed" in frame:
        return frame
    return None


class Conn:
    """One socket, every frame recorded."""

    counter = 0

    def __init__(self, rec: Recorder, worker: "Worker", replica: str):
        Conn.counter += 1
        self.id = f"{worker.name}.{Conn.counter}"
        self.rec = rec
        self.worker = worker
        self.replica = replica
        self.ws = None
        self.connected: dict | None = None

    async def open(self, address: str, rejoin: tuple[str, int] | None) -> bool:
        w = self.worker
        if w.dialect == "omnia":
            query = f"agent={AGENT}&stream=2"
            if rejoin:
                query += f"&resume={w.session}&after={rejoin[1]}&epoch={rejoin[0]}"
            url = f"ws://{address}/ws?{query}"
            headers = {"Authorization": f"Bearer {API_KEY}"}
        else:
            query = "stream=2"
            if rejoin:
                query += f"&session_id={w.session}&after={rejoin[1]}&epoch={rejoin[0]}"
            url = f"ws://{address}/ws/agent/{AGENT}?{query}"
            headers = {"X-AUTH-TOKEN": API_KEY}
        fields = dict(conn=self.id, worker=w.name, dialect=w.dialect, replica=self.replica,
                      session=w.session, rejoin=list(rejoin) if rejoin else None)
        try:
            self.ws = await connect(url, additional_headers=headers, open_timeout=CONNECT,
                                    ping_interval=None, close_timeout=1, proxy=None,
                                    compression=None, max_size=None)
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
            self.rec.emit("open_failed", error=type(e).__name__ + ": " + str(e)[:200], **fields)
            return False
        self.rec.emit("open", **fields)
        if w.dialect == "omnia" or rejoin:
            first = await self.recv(CONNECT)
            if first is None:
                return False
            self.connected = first
            if rejoin and not rejoined(first):
                # Not on the session (a fresh one, or an error): a client
                # that sent its cancel here would cancel nothing.
                self.rec.emit("rejoin_refused", conn=self.id)
                await self.ws.close()
                return False
        return True

    async def send(self, frame: dict) -> bool:
        self.rec.emit("send", conn=self.id, frame=frame)
        try:
            await self.ws.send(json.dumps(frame))
            return True
        except websockets.exceptions.WebSocketException as e:
            self.rec.emit("close", conn=self.id, why=f"send: {type(e).__name__}")
            return False

    async def recv(self, timeout: float = IDLE) -> dict | None:
        """The next frame, or None (closed, or nothing for `timeout`)."""
        try:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
        except asyncio.TimeoutError:
            self.rec.emit("idle", conn=self.id, seconds=timeout)
            return None
        except websockets.exceptions.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else None
            self.rec.emit("close", conn=self.id, why="closed", code=code)
            return None
        if isinstance(raw, bytes):
            self.rec.emit("recv", conn=self.id, binary=len(raw))
            return {}
        frame = json.loads(raw)
        self.rec.emit("recv", conn=self.id, frame=frame)
        return frame

    def drop(self) -> None:
        """Gone without a Close frame, as a phone changing networks."""
        if self.ws is not None:
            self.ws.transport.abort()
            self.rec.emit("close", conn=self.id, why="dropped by the client")


@dataclass
class Turn:
    content: str
    scenario: str
    action: str
    key: tuple[str, int] | None = None
    terminal: dict | None = None
    refusal: dict | None = None
    cancels: list = field(default_factory=list)


class Worker:
    def __init__(self, rec: Recorder, name: str, dialect: str, replicas: dict, rng: random.Random):
        self.rec = rec
        self.name = name
        self.dialect = dialect
        self.session = f"partition-{name}-{rng.randrange(1 << 30):08x}"
        self.replicas = replicas  # name -> address
        self.rng = rng
        self.conn: Conn | None = None
        self.position: tuple[str, int] | None = None  # (epoch, last seq seen)
        self.turns = 0
        self.open_turn: Turn | None = None

    def note(self, frame: dict) -> None:
        """Moves the session's position (epoch, last seq seen) on."""
        if (start := turn_start(frame)) is not None:
            self.advance(start[0], frame["seq"])
            return
        log = event_log(frame)
        if log is not None and log.get("epoch"):
            if not log.get("replayed") or self.position is None or self.position[0] != log["epoch"]:
                # A reload: the client starts from the log's head.
                self.position = (log["epoch"], log.get("head", 0))
            return
        if "seq" in frame and self.position is not None:
            self.advance(self.position[0], frame["seq"])

    def rejoin_position(self) -> tuple[str, int] | None:
        """Where a rejoin replays from. A Gnosari log entry can be several
        events with one seq (a reply's last `token` and `agent_completed`),
        so a Gnosari client rejoins one seq early, as the client libraries
        do (rejoin-and-cancel.md): a socket dropped between the two would
        otherwise never see the terminal."""
        if self.position is None or self.dialect == "omnia":
            return self.position
        epoch, seq = self.position
        return epoch, max(seq - 1, 0)

    def advance(self, epoch: str, seq: int) -> None:
        if self.position is None or self.position[0] != epoch:
            self.position = (epoch, seq)
        else:
            self.position = (epoch, max(self.position[1], seq))

    async def open(self, replica: str | None = None, rejoin: bool = False) -> Conn | None:
        replica = replica or self.rng.choice(sorted(self.replicas))
        conn = Conn(self.rec, self, replica)
        position = self.rejoin_position() if rejoin else None
        if not await conn.open(self.replicas[replica], position):
            return None
        if conn.connected:
            self.note(conn.connected)
        return conn

    async def run(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < until:
            if self.conn is None or self.rng.random() < 0.3:
                if self.conn is not None:
                    await self.conn.ws.close()
                self.conn = await self.open()
                if self.conn is None:
                    await asyncio.sleep(1)
                    continue
            await self.one_turn()
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))

    def pick(self) -> tuple[str, str]:
        roll = self.rng.random()
        if roll < 0.15:
            return "hold", "cancel"
        if roll < 0.25 and self.dialect == "omnia":
            return "client-tool", "answer"
        if roll < 0.40:
            return "paced", "drop"
        return ("paced" if roll < 0.8 else "echo"), "plain"

    async def one_turn(self) -> None:
        self.turns += 1
        scenario, action = self.pick()
        turn = Turn(f"{self.name}-{self.turns}", scenario, action)
        self.open_turn = turn
        if self.dialect == "omnia":
            frame = {"type": "message", "content": turn.content, "session_id": self.session,
                     "metadata": {"mock_scenario": scenario}}
        else:
            frame = {"message": turn.content, "session_id": self.session,
                     "client_message_id": turn.content, "metadata": {"mock_scenario": scenario}}
        sent_at = self.rec.now()
        replica = self.conn.replica
        if await self.conn.send(frame):
            await self.follow(turn)
        else:
            self.conn = None
        self.rec.emit("turn", worker=self.name, session=self.session, dialect=self.dialect,
                      content=turn.content, scenario=scenario, action=action, sent_t=sent_at,
                      replica=replica, turn=list(turn.key) if turn.key else None,
                      terminal=turn.terminal, refusal=turn.refusal, cancels=turn.cancels)
        if turn.terminal is not None or turn.refusal is not None:
            self.open_turn = None

    async def follow(self, turn: Turn) -> None:
        """Reads the turn to its end, acting on it; on a dead or silent
        socket, rejoins on another replica (up to three times)."""
        frames_seen = 0
        drop_after = self.rng.randint(1, 4)
        rejoins = 0
        while True:
            frame = await self.conn.recv()
            if frame is None:
                if turn.key is None or rejoins >= 3:
                    self.conn = None
                    return
                rejoins += 1
                self.conn.drop()
                self.conn = await self.rejoin_elsewhere()
                if self.conn is None:
                    return
                continue
            if not frame:
                continue
            self.note(frame)
            if (start := turn_start(frame)) is not None and turn.key is None:
                turn.key = start
            if is_terminal(frame):
                if turn.key is not None:
                    turn.terminal = frame
                    return
                continue
            if frame.get("type") == "error" and turn.key is None:
                turn.refusal = frame  # about our message: nothing ran
                return
            frames_seen += 1
            await self.act(turn, frame, frames_seen, drop_after)

    async def act(self, turn: Turn, frame: dict, frames_seen: int, drop_after: int) -> None:
        if turn.action == "answer" and frame.get("type") == "tool_call":
            call = frame["tool_call"]["id"]
            await self.conn.send({"type": "tool_call_ack", "tool_call_ack": {"call_id": call}})
            await asyncio.sleep(self.rng.uniform(0, 0.3))
            await self.conn.send({"type": "tool_result",
                                  "tool_result": {"call_id": call, "result": {"city": "Lisbon"}}})
        elif turn.action == "cancel" and not turn.cancels and turn.key is not None \
                and frame.get("type") in ("chunk", "token"):
            await asyncio.sleep(self.rng.uniform(0, 0.5))
            await self.cancel(turn)
        elif turn.action == "drop" and frames_seen == drop_after and turn.key is not None:
            self.conn.drop()
            self.conn = await self.rejoin_elsewhere()
            if self.conn is None:
                self.conn = await self.rejoin_elsewhere()

    async def cancel(self, turn: Turn) -> None:
        """On this socket, or (half the time) on another replica's."""
        frame = {"type": "cancel"} if self.dialect == "omnia" else \
            {"type": "cancel", "session_id": self.session}
        via = self.conn
        if self.rng.random() < 0.5:
            other = self.rng.choice([r for r in sorted(self.replicas) if r != self.conn.replica])
            if (side := await self.open(other, rejoin=True)) is not None:
                via = side
        turn.cancels.append({"t": self.rec.now(), "replica": via.replica, "conn": via.id})
        await via.send(frame)
        if via is not self.conn:
            # Its replay and whatever it answers are recorded; then it goes.
            asyncio.create_task(self.drain_and_close(via))

    async def drain_and_close(self, conn: Conn) -> None:
        for _ in range(200):
            frame = await conn.recv(3)
            if frame is None or is_terminal(frame):
                break
        await conn.ws.close()

    async def rejoin_elsewhere(self) -> Conn | None:
        others = [r for r in sorted(self.replicas) if self.conn is None or r != self.conn.replica]
        self.rng.shuffle(others)
        for replica in others:
            if (conn := await self.open(replica, rejoin=self.position is not None)) is not None:
                return conn
        return None

    async def settle(self, healthy: list[str]) -> None:
        """After the nemesis: follows the session's last turn to its end on
        a healthy replica, so every turn a client saw has its terminal."""
        if self.position is None:
            return
        self.conn = await self.open(self.rng.choice(healthy), rejoin=True)
        if self.conn is None:
            return
        while (frame := await self.conn.recv(IDLE)) is not None:
            if frame:
                self.note(frame)
        await self.conn.ws.close()
