"""The checker rejects forged bad histories and accepts a good one.

    python3 -m unittest -v test_checker     (scripts/partition.sh --self-test)
"""

import copy
import unittest

import checker

EPOCH = "00000000000000e1"
SESSION = "partition-w0-1"


class Forge:
    """A history as the harness records it, written by hand."""

    def __init__(self):
        self.events: list[dict] = []
        self.t = 0.0

    def emit(self, kind: str, **fields) -> None:
        self.t += 0.1
        self.events.append({"t": round(self.t, 2), "kind": kind, **fields})

    def open(self, conn: str, replica: str = "r1", rejoin=None, replayed=None, head=0) -> None:
        self.emit("open", conn=conn, worker="w0", dialect="omnia", replica=replica,
                  session=SESSION, rejoin=rejoin)
        log = {"head": head}
        if rejoin:
            log = {"epoch": EPOCH, "head": head, "replayed": replayed}
        self.recv(conn, {"type": "connected", "session_id": SESSION, "capabilities": {"event_log": log}})

    def recv(self, conn: str, frame: dict) -> None:
        self.emit("recv", conn=conn, frame={**frame, "session_id": SESSION})

    def start(self, conn: str, seq: int) -> None:
        self.recv(conn, {"type": "turn_started", "seq": seq,
                         "turn_started": {"turn_id": seq, "epoch": EPOCH, "agent": "test-agent"}})

    def chunk(self, conn: str, seq: int, text: str = "one ") -> None:
        self.recv(conn, {"type": "chunk", "content": text, "seq": seq})

    def done(self, conn: str, seq: int, content: str, cancelled: bool = False) -> None:
        frame = {"type": "done", "content": content, "seq": seq}
        if cancelled:
            frame["cancelled"] = True
        self.recv(conn, frame)

    def turn(self, content: str, turn_id, terminal=None, cancels=(), refusal=None, replica="r1") -> None:
        self.emit("turn", worker="w0", session=SESSION, dialect="omnia", content=content,
                  scenario="paced", action="plain", sent_t=self.t, replica=replica,
                  turn=[EPOCH, turn_id] if turn_id else None, terminal=terminal,
                  cancels=list(cancels), refusal=refusal)


def good() -> tuple[list[dict], list[dict]]:
    """Two turns, a rejoin mid-turn, a cancel sent through another replica,
    a refused message, a cut from Redis with /readyz saying so."""
    h = Forge()
    h.open("w0.1")
    h.emit("send", conn="w0.1", frame={"type": "message", "content": "w0-1"})
    h.start("w0.1", 1)
    h.chunk("w0.1", 2)
    h.emit("close", conn="w0.1", why="dropped by the client")
    h.open("w0.2", replica="r2", rejoin=[EPOCH, 2], replayed=True, head=3)
    h.chunk("w0.2", 3, "two")
    h.done("w0.2", 4, "one two")
    h.turn("w0-1", 1)
    h.emit("send", conn="w0.2", frame={"type": "message", "content": "w0-2"})
    h.start("w0.2", 5)
    h.chunk("w0.2", 6, "held")
    h.emit("nemesis", phase="start", fault="cut-redis", replica="r3", at=1, duration=2)
    h.emit("readyz", replica="r3", sent_t=h.t + 0.6, status=503, body="live state unavailable")
    h.t += 0.7
    h.open("w0.3", replica="r3", rejoin=[EPOCH, 6], replayed=True, head=6)
    cancel_t = h.t
    h.emit("send", conn="w0.3", frame={"type": "cancel"})
    h.done("w0.2", 7, "held", cancelled=True)
    h.done("w0.3", 7, "held", cancelled=True)
    h.turn("w0-2", 5, cancels=[{"t": cancel_t, "replica": "r3", "conn": "w0.3"}], replica="r2")
    h.emit("send", conn="w0.2", frame={"type": "message", "content": "w0-3"})
    h.recv("w0.2", {"type": "error", "error": {"code": "TURN_IN_PROGRESS", "message": "busy"}})
    h.turn("w0-3", None, refusal={"type": "error"})
    h.emit("nemesis", phase="end", fault="cut-redis", replica="r3", at=1, duration=2)
    store = [
        {"session": SESSION, "seq": 0, "role": "user", "content": "w0-1", "metadata": None},
        {"session": SESSION, "seq": 1, "role": "assistant", "content": "one two", "metadata": None},
        {"session": SESSION, "seq": 2, "role": "user", "content": "w0-2", "metadata": {"cancelled": "true"}},
        {"session": SESSION, "seq": 3, "role": "assistant", "content": "held", "metadata": None},
    ]
    return h.events, store


def checks(events, store) -> set[str]:
    return {v["check"] for v in checker.check(events, store)["violations"]}


def replace_frame(events, conn, seq, frame) -> list[dict]:
    events = copy.deepcopy(events)
    for e in events:
        if e["kind"] == "recv" and e["conn"] == conn and e["frame"].get("seq") == seq:
            e["frame"] = {**frame, "session_id": SESSION, "seq": seq}
    return events


class CheckerTest(unittest.TestCase):
    def test_accepts_a_good_history(self):
        events, store = good()
        verdict = checker.check(events, store)
        self.assertEqual(verdict["violations"], [])
        self.assertEqual(verdict["figures"]["turn_outcomes"], {"done": 1, "cancelled": 1, "refused": 1})

    def test_rejects_a_duplicated_terminal(self):
        events, store = good()
        # The rejoined socket sees the first turn end twice: done, then an
        # interruption for the same turn.
        forged = replace_frame(events, "w0.2", 3, {"type": "done", "content": "one two"})
        forged = replace_frame(forged, "w0.2", 4, {"type": "error",
                                                   "error": {"code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        self.assertIn("one-terminal", checks(forged, store))

    def test_rejects_a_lost_acknowledged_turn(self):
        events, store = good()
        self.assertEqual(checks(events, store[2:]), {"stored-once"})

    def test_rejects_a_turn_stored_twice_or_with_another_answer(self):
        events, store = good()
        twice = store[:2] + store
        self.assertEqual(checks(events, twice), {"stored-once"})
        other = copy.deepcopy(store)
        other[1]["content"] = "something else"
        self.assertEqual(checks(events, other), {"stored-once"})

    def test_rejects_a_refused_message_that_was_stored(self):
        events, store = good()
        stored = store + [{"session": SESSION, "seq": 4, "role": "user", "content": "w0-3", "metadata": None}]
        self.assertEqual(checks(events, stored), {"stored-once"})

    def test_rejects_an_interrupted_turn_that_was_also_stored(self):
        events, store = good()
        forged = replace_frame(events, "w0.2", 4, {"type": "error",
                                                   "error": {"code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        self.assertEqual(checks(forged, store), {"interrupted-and-stored"})
        # The client saw done, but the store holds the failure as well.
        both = store[:2] + [{"session": SESSION, "seq": 1, "role": "error", "content": "turn interrupted",
                             "metadata": {"code": "INTERNAL_ERROR"}}] + store[2:]
        self.assertEqual(checks(events, both), {"interrupted-and-stored"})

    def test_rejects_two_concurrent_turns_in_one_session(self):
        h = Forge()
        h.open("w0.1")
        h.start("w0.1", 1)
        h.chunk("w0.1", 2)
        h.start("w0.1", 3)  # a second turn before the first ended
        h.done("w0.1", 4, "one")
        h.done("w0.1", 5, "two")
        self.assertIn("one-turn-at-a-time", checks(h.events, []))

    def test_rejects_two_writers_at_one_seq(self):
        # A replica paused past its lease goes on with its turn on its own
        # socket while the new holder's turn has the same seqs elsewhere.
        h = Forge()
        h.open("w0.1", replica="r1")
        h.start("w0.1", 1)
        h.chunk("w0.1", 2)
        h.done("w0.1", 3, "stale")
        h.open("w0.2", replica="r2")
        h.start("w0.2", 1)
        h.recv("w0.2", {"type": "error", "seq": 2, "error": {"code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        self.assertIn("one-log", checks(h.events, []))

    def test_rejects_a_rejoin_with_a_gap_or_a_resent_frame(self):
        events, store = good()
        gap = [e for e in events if not (e["kind"] == "recv" and e["conn"] == "w0.2" and e["frame"].get("seq") == 3)]
        self.assertEqual(checks(gap, store), {"gap-free"})
        resent = copy.deepcopy(events)
        at = next(i for i, e in enumerate(resent) if e["kind"] == "recv" and e["conn"] == "w0.2"
                  and e["frame"].get("seq") == 3)
        resent.insert(at, {**resent[at], "frame": {"type": "chunk", "content": "one ", "seq": 2,
                                                   "session_id": SESSION}})
        self.assertEqual(checks(resent, store), {"gap-free"})

    def test_rejects_a_turn_without_terminal(self):
        events, store = good()
        forged = [e for e in events if not (e["kind"] == "recv" and e["frame"].get("seq") == 4)]
        found = checks(forged, store)
        self.assertIn("one-terminal", found)

    def test_rejects_a_lost_cancel_and_tags_a_redis_cut(self):
        events, store = good()
        # The cancel went nowhere, while the turn's replica was cut from
        # Redis: the turn was left running, no terminal anywhere.
        forged = [e for e in events if not (e["kind"] == "recv" and e["frame"].get("seq") == 7)]
        for e in forged:
            if e["kind"] == "nemesis":
                e["replica"] = "r2"
        verdict = checker.check(forged, store[:2])
        lost = [v for v in verdict["violations"] if v["check"] == "cancel-reached"]
        self.assertEqual(len(lost), 1, verdict["violations"])
        self.assertEqual(lost[0]["tags"], ["during-redis-cut"])

    def test_a_turn_interrupted_after_its_cancel_ended(self):
        events, store = good()
        # Its replica lost its lease before the cancel reached it: another
        # replica's takeover ended the turn, and every client knows.
        forged = replace_frame(events, "w0.2", 7, {"type": "error", "error": {
            "code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        forged = replace_frame(forged, "w0.3", 7, {"type": "error", "error": {
            "code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        verdict = checker.check(forged, store[:2])
        lost = [v for v in verdict["violations"] if v["check"] == "cancel-reached"]
        self.assertEqual(lost, [])

    def test_a_cancel_answered_with_a_refusal_is_not_lost(self):
        events, store = good()
        forged = replace_frame(events, "w0.2", 7, {"type": "error", "error": {
            "code": "INTERNAL_ERROR", "message": "turn interrupted"}})
        forged = [e for e in forged if not (e["kind"] == "recv" and e["conn"] == "w0.3" and e["frame"].get("seq") == 7)]
        at = next(i for i, e in enumerate(forged) if e["kind"] == "send" and e["frame"]["type"] == "cancel")
        forged.insert(at + 1, {"t": forged[at]["t"], "kind": "recv", "conn": "w0.3",
                               "frame": {"type": "error", "error": {"code": "CANCEL_NOT_DELIVERED", "message": "send it again"}}})
        self.assertNotIn("cancel-reached", checks(forged, store[:2]))

    def test_a_gnosari_token_and_its_agent_completed_are_one_entry(self):
        # The seed-12 shape: a socket closes between a reply's last token
        # and its agent_completed (one log entry, one seq); the rejoin one
        # seq early replays both. Rejoining after the token's seq instead
        # would never show the turn's end.
        def history(rejoin_after: int) -> list[dict]:
            h = Forge()
            h.emit("open", conn="g.1", worker="w0", dialect="gnosari", replica="r1",
                   session=SESSION, rejoin=None)
            h.recv("g.1", {"type": "stream_info", "seq": 1, "turn_id": 1, "epoch": EPOCH, "head": 1})
            h.recv("g.1", {"type": "agent_started", "seq": 1})
            h.recv("g.1", {"type": "token", "content": "one ", "seq": 2})
            h.recv("g.1", {"type": "token", "content": "two", "seq": 3})
            h.emit("close", conn="g.1", why="dropped by the client")
            h.emit("open", conn="g.2", worker="w0", dialect="gnosari", replica="r2",
                   session=SESSION, rejoin=[EPOCH, rejoin_after])
            h.recv("g.2", {"type": "stream_info", "epoch": EPOCH, "head": 3, "replayed": True})
            if rejoin_after < 3:
                h.recv("g.2", {"type": "token", "content": "two", "seq": 3})
                h.recv("g.2", {"type": "agent_completed", "full_response": "one two", "seq": 3})
            h.emit("turn", worker="w0", session=SESSION, dialect="gnosari", content="w0-1",
                   scenario="paced", action="drop", sent_t=0.1, replica="r1", turn=[EPOCH, 1],
                   terminal=None, cancels=[], refusal=None)
            return h.events
        store = [
            {"session": SESSION, "seq": 0, "role": "user", "content": "w0-1", "metadata": None},
            {"session": SESSION, "seq": 1, "role": "assistant", "content": "one two", "metadata": None},
        ]
        self.assertEqual(checks(history(rejoin_after=2), store), set())
        self.assertEqual(checks(history(rejoin_after=3), store), {"one-terminal"})

    def test_rejects_readyz_ok_while_cut_from_redis(self):
        events, store = good()
        forged = copy.deepcopy(events)
        for e in forged:
            if e["kind"] == "readyz":
                e["status"] = 200
        self.assertEqual(checks(forged, store), {"readyz"})


if __name__ == "__main__":
    unittest.main()
