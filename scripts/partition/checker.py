"""The checker: judges a recorded history (history.py) and the PostgreSQL
store's messages at the end. Pure: no IO, so its tests forge histories.

Checks (each violation names its check):

- `stored-once`: a turn a client saw end (`done`, cancelled or not) is
  stored exactly once, its question followed by its answer; a message the
  server refused (an error with no seq, nothing ran) is not stored; a turn
  that ended with an error is not also stored with an answer, and no
  question is stored with both an answer and a failure
  (`interrupted-and-stored`).
- `one-turn-at-a-time`: no session ran two turns at once: on one socket a
  turn starts before the one before it ended.
- `one-log`: a session's log has one history: no seq is seen with two
  different frames (two writers: a replica that lost its lease went on).
- `one-terminal`: every turn a client saw ended in exactly one terminal (or
  a later rejoin said `replayed:false`, so the client knows to reload).
- `gap-free`: on every socket a session's seqs only grow, with no
  duplicate, and none of the log's frames seen elsewhere between a
  socket's first and last seq is missing from it (a rejoin with
  `replayed:true` included); a rejoin never resends a frame at or before
  its `after`.
- `cancel-reached`: a cancel of a running turn ends it `cancelled`, or is
  refused (an error on the cancel's socket); a turn that failed (on its
  own, or "turn interrupted" by a takeover when its replica died, froze or
  lost its lease) ended too. A cancel lost while a replica was cut off
  from Redis is tagged `during-redis-cut`. A cancel goes only on a socket
  that is on the session (a rejoin answered `resumed: true` or
  `stream_info`).
- `readyz`: a replica cut off from PostgreSQL or Redis does not answer
  /readyz 200 (probes sent 0.5 s or more into the cut), and answers within
  the probe's 5 s.
"""

from collections import defaultdict

READY_GRACE = 0.5
REDIS_CUTS = ("cut-redis", "cut-both")
STORE_CUTS = ("cut-pg", "cut-both")


def kind_of(frame: dict) -> tuple | None:
    """What a log frame says, for comparing two sightings of one seq (text
    is left out: a slow reader's chunks may be merged)."""
    kind = frame.get("type")
    if kind == "turn_started":
        return ("start", frame["turn_started"]["turn_id"])
    if kind == "stream_info":
        return ("start", frame["turn_id"]) if "turn_id" in frame else None
    if kind == "agent_started":
        return None  # the stream_info before it has the same seq
    if kind in ("chunk", "token"):
        return ("text",)
    if kind in ("done", "agent_completed"):
        status = "cancelled" if frame.get("cancelled") else "done"
        return ("end", status, frame.get("content", frame.get("full_response")))
    if kind == "error":
        error = frame.get("error")
        return ("end", "error", error.get("message") if isinstance(error, dict) else error)
    return (kind,)


class History:
    """The events indexed: sockets, their log frames, turns, faults."""

    def __init__(self, events: list[dict]):
        self.events = events
        self.conns: dict[str, dict] = {}
        self.frames: dict[str, list[tuple]] = defaultdict(list)  # conn -> (t, epoch, seq, kind, frame)
        self.answers: dict[str, dict] = {}  # conn -> rejoin's event log answer
        self.sent: dict[str, list[tuple]] = defaultdict(list)
        self.unsequenced: dict[str, list[tuple]] = defaultdict(list)  # conn -> (t, frame)
        self.turns = [e for e in events if e["kind"] == "turn"]
        self.faults = fault_intervals(events)
        for event in events:
            self.index(event)
        self.seen = self.sightings()

    def index(self, event: dict) -> None:
        kind, conn = event["kind"], event.get("conn")
        if kind == "open":
            self.conns[conn] = {**event, "epoch": (event.get("rejoin") or [None])[0]}
        elif kind == "send":
            self.sent[conn].append((event["t"], event["frame"]))
        elif kind == "recv" and "frame" in event:
            self.received(conn, event["t"], event["frame"])

    def received(self, conn: str, t: float, frame: dict) -> None:
        state = self.conns.setdefault(conn, {"epoch": None, "session": frame.get("session_id")})
        log = event_log(frame)
        if log is not None:
            self.answers[conn] = log
            if log.get("epoch"):
                state["epoch"] = log["epoch"]
            return
        if frame.get("type") == "turn_started":
            state["epoch"] = frame["turn_started"]["epoch"]
        elif frame.get("type") == "stream_info" and "turn_id" in frame:
            state["epoch"] = frame["epoch"]
        if "seq" not in frame:
            self.unsequenced[conn].append((t, frame))
            return
        kind = kind_of(frame)
        if kind is None:
            return
        frames = self.frames[conn]
        if frames and frames[-1][1:3] == (state["epoch"], frame["seq"]) and frames[-1][3] == ("text",) \
                and kind[0] == "end":
            # Gnosari sends a reply's unstreamed text as a last token with
            # its terminal's seq: one entry of the log.
            frames.pop()
        frames.append((t, state["epoch"], frame["seq"], kind, frame))

    def session_of(self, conn: str) -> str:
        return self.conns.get(conn, {}).get("session")

    def sightings(self) -> dict[tuple, list[tuple]]:
        """(session, epoch, seq) -> [(kind, conn, t)] over every socket."""
        seen = defaultdict(list)
        for conn, frames in self.frames.items():
            for t, epoch, seq, kind, _ in frames:
                seen[(self.session_of(conn), epoch, seq)].append((kind, conn, t))
        return seen


def event_log(frame: dict) -> dict | None:
    if frame.get("type") == "connected":
        return frame.get("capabilities", {}).get("event_log")
    if frame.get("type") == "stream_info" and "replayed" in frame:
        return frame
    return None


def fault_intervals(events: list[dict]) -> list[dict]:
    """Each nemesis step with its real start and end times (an unhealed
    one ends at infinity)."""
    started: dict[tuple, dict] = {}
    done = []
    for event in events:
        if event["kind"] != "nemesis":
            continue
        step = {("kind" if k == "fault" else k): v for k, v in event.items()
                if k not in ("t", "phase", "kind")}
        key = (event["replica"], step["kind"], event["at"])
        if event["phase"] == "start":
            started[key] = {**step, "start": event["t"], "end": float("inf")}
        elif key in started:
            started[key]["end"] = event["t"]
            done.append(started.pop(key))
    return done + list(started.values())


def active(faults: list[dict], replica: str | None, start: float, end: float, kinds=None) -> list[dict]:
    return [f for f in faults
            if (replica is None or f["replica"] == replica)
            and (kinds is None or f["kind"] in kinds)
            and f["start"] <= end and f["end"] >= start]


class Verdict:
    def __init__(self, history: History):
        self.history = history
        self.violations: list[dict] = []

    def reject(self, check: str, session: str | None, detail: str, t: float | None = None, **extra):
        faults = []
        if t is not None:
            faults = [{k: v for k, v in f.items()} for f in active(self.history.faults, None, t - 15, t + 1)]
        self.violations.append({"check": check, "session": session, "detail": detail, "t": t,
                                "faults": faults, **extra})


def check(events: list[dict], store: list[dict]) -> dict:
    history = History(events)
    verdict = Verdict(history)
    turns = turn_ranges(history, verdict)
    check_sockets(history, verdict)
    check_terminals(history, verdict, turns)
    check_store(history, verdict, turns, store)
    check_cancels(history, verdict, turns)
    check_readyz(history, verdict)
    return {"violations": verdict.violations, "figures": figures(history, turns, store)}


def whole_entries(history: History, sightings: list[tuple]) -> list[tuple]:
    """One seq's sightings, without the Gnosari `token` of a socket that
    closed before the `agent_completed` of the same entry, when another
    socket saw that entry's end: the token is the first half of the end."""
    ends = [s for s in sightings if s[0][0] == "end"]
    if not ends:
        return sightings
    def half_of_an_end(sighting: tuple) -> bool:
        kind, conn, _ = sighting
        return kind == ("text",) and history.conns.get(conn, {}).get("dialect") == "gnosari"
    return [s for s in sightings if not half_of_an_end(s)]


def turn_ranges(history: History, verdict: Verdict) -> dict[tuple, dict]:
    """(session, epoch, turn_id) -> {start seq, terminals: {seq: kind}, last seq}
    from every sighting. One seq seen as two different frames means two
    writers of one log (`one-log`)."""
    by_log: dict[tuple, dict[int, set]] = defaultdict(dict)
    for (session, epoch, seq), sightings in history.seen.items():
        sightings = whole_entries(history, sightings)
        kinds = {k for k, _, _ in sightings}
        if len(kinds) > 1:
            t = min(t for _, _, t in sightings)
            verdict.reject("one-log", session,
                           f"two writers: seq {seq} of epoch {epoch} seen as "
                           + ", ".join(f"{k} on {c} ({history.conns.get(c, {}).get('replica')})"
                                       for k, c, _ in sightings if k != sightings[0][0] or c == sightings[0][1]),
                           t)
        by_log[(session, epoch)][seq] = kinds
    turns = {}
    for (session, epoch), seqs in by_log.items():
        current = None
        for seq in sorted(seqs):
            for kind in sorted(seqs[seq], key=lambda k: k[0] != "start"):
                if kind[0] == "start":
                    current = {"session": session, "epoch": epoch, "turn_id": kind[1], "start": seq,
                               "terminals": {}, "last": seq}
                    turns[(session, epoch, kind[1])] = current
                elif current is not None:
                    current["last"] = seq
                    if kind[0] == "end":
                        current["terminals"][seq] = kind
    return turns


def check_sockets(history: History, verdict: Verdict) -> None:
    """Per socket: seqs grow, nothing missing that others saw, a rejoin
    resends nothing; two turns open at once on one socket."""
    union = defaultdict(set)
    for (session, epoch, seq) in history.seen:
        union[(session, epoch)].add(seq)
    for conn, frames in history.frames.items():
        session = history.session_of(conn)
        rejoin = history.conns.get(conn, {}).get("rejoin")
        answer = history.answers.get(conn, {})
        previous = None
        if rejoin and answer.get("replayed") and frames and frames[0][1] == rejoin[0] \
                and frames[0][2] > rejoin[1] + 1:
            # Every entry of the test agent's turns makes a frame, so the
            # replay starts right after the client's position.
            verdict.reject("gap-free", session, f"{conn}: rejoined after {rejoin[1]}, "
                           f"the replay starts at seq {frames[0][2]}", frames[0][0])
        open_turn = None
        for t, epoch, seq, kind, _ in frames:
            if rejoin and answer.get("replayed") and epoch == rejoin[0] and seq <= rejoin[1]:
                verdict.reject("gap-free", session, f"{conn}: rejoined after {rejoin[1]} and got seq {seq} again", t)
            if previous is not None and previous[0] == epoch and seq <= previous[1]:
                verdict.reject("gap-free", session, f"{conn}: seq {seq} after {previous[1]} (duplicate or out of order)", t)
            elif previous is not None and previous[0] == epoch:
                missing = sorted(s for s in union[(session, epoch)] if previous[1] < s < seq)
                if missing:
                    verdict.reject("gap-free", session, f"{conn}: seqs {missing[:10]} seen elsewhere, missing here", t)
            previous = (epoch, seq)
            if kind[0] == "start":
                if open_turn is not None:
                    verdict.reject("one-turn-at-a-time", session,
                                   f"{conn}: turn {kind[1]} started at seq {seq} while turn {open_turn} had not ended", t)
                open_turn = kind[1]
            elif kind[0] == "end":
                open_turn = None


def reloaded_after(history: History, session: str, t: float) -> bool:
    """A socket of `session` opened after `t` was told `replayed:false`."""
    for conn, answer in history.answers.items():
        opened = history.conns.get(conn, {})
        if opened.get("session") == session and answer.get("replayed") is False and opened.get("t", 0) >= t:
            return True
    return False


def first_seen(history: History, session: str, epoch: str, seq: int) -> float:
    times = [t for _, _, t in history.seen.get((session, epoch, seq), [])]
    return min(times) if times else 0.0


def check_terminals(history: History, verdict: Verdict, turns: dict) -> None:
    for (session, epoch, turn_id), turn in turns.items():
        ends = turn["terminals"]
        if len(ends) > 1:
            verdict.reject("one-terminal", session,
                           f"turn {turn_id} (epoch {epoch}) ended {len(ends)} times: "
                           + ", ".join(f"seq {s} {k[1]}" for s, k in sorted(ends.items())),
                           first_seen(history, session, epoch, turn["start"]))
        elif not ends:
            t = first_seen(history, session, epoch, turn["start"])
            if not reloaded_after(history, session, t):
                verdict.reject("one-terminal", session,
                               f"turn {turn_id} (epoch {epoch}, seq {turn['start']}..{turn['last']}) has no terminal", t)


def terminal_of(turns: dict, summary: dict) -> tuple | None:
    if summary.get("turn") is None:
        return None
    epoch, turn_id = summary["turn"]
    turn = turns.get((summary["session"], epoch, turn_id))
    if turn is None or not turn["terminals"]:
        return None
    return turn["terminals"][min(turn["terminals"])]


def stored_turns(store: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """session -> question -> the records after each time it was asked (its
    tool records, answer, failure) up to the next question."""
    sessions: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    current = None
    for row in sorted(store, key=lambda r: (r["session"], r["seq"])):
        if row["role"] == "user":
            current = {"question": row, "records": []}
            sessions[row["session"]][row["content"]].append(current)
        elif current is not None and current["question"]["session"] == row["session"]:
            current["records"].append(row)
    return sessions


def check_store(history: History, verdict: Verdict, turns: dict, store: list[dict]) -> None:
    stored = stored_turns(store)
    for session, questions in stored.items():
        for content, asked in questions.items():
            for turn in asked:
                roles = {r["role"] for r in turn["records"]}
                if "assistant" in roles and "error" in roles:
                    verdict.reject("interrupted-and-stored", session,
                                   f"{content!r} stored with its answer and a failure: "
                                   + "; ".join(f"{r['role']} {r['content'][:60]!r}" for r in turn["records"]
                                               if r["role"] != "tool"), None)
    for summary in history.turns:
        session, content = summary["session"], summary["content"]
        asked = stored.get(session, {}).get(content, [])
        end = terminal_of(turns, summary)
        t = summary["sent_t"]
        if len(asked) > 1:
            verdict.reject("stored-once", session, f"{content!r} stored {len(asked)} times", t)
            continue
        if summary.get("refusal") is not None and summary.get("turn") is None:
            if asked:
                verdict.reject("stored-once", session, f"{content!r} was refused ({summary['refusal']}) yet stored", t)
            continue
        if end is None:
            continue
        answers = [r for r in asked[0]["records"] if r["role"] == "assistant"] if asked else []
        if end[1] in ("done", "cancelled"):
            if not asked:
                verdict.reject("stored-once", session, f"acknowledged turn {content!r} ({end[1]}) not stored", t)
            elif len(answers) != 1 or not same_answer(answers[0]["content"], end[2], summary):
                verdict.reject("stored-once", session,
                               f"acknowledged turn {content!r} stored with answers "
                               f"{[a['content'] for a in answers]!r}, the client saw {end[2]!r}", t)
        elif answers:
            verdict.reject("interrupted-and-stored", session,
                           f"turn {content!r} ended with error {end[2]!r} for the client, but the store holds "
                           f"its answer {answers[0]['content']!r}", t)


def same_answer(stored: str, seen: str | None, summary: dict) -> bool:
    if seen is None:
        return False
    if summary.get("dialect") == "gnosari":
        # full_response is all the text streamed; the store keeps the last round's.
        return seen.endswith(stored)
    return stored == seen


def check_cancels(history: History, verdict: Verdict, turns: dict) -> None:
    for summary in history.turns:
        if not summary.get("cancels") or summary.get("turn") is None:
            continue
        session = summary["session"]
        cancel = summary["cancels"][0]
        end = terminal_of(turns, summary)
        if end is not None and end[1] == "cancelled":
            continue
        refused = [f for t, f in history.unsequenced.get(cancel["conn"], [])
                   if t >= cancel["t"] and f.get("type") == "error"]
        if refused:
            continue
        running = summary["replica"]
        horizon = summary.get("t", cancel["t"]) + 60
        if end is not None and end[1] == "error":
            # It failed on its own, or was interrupted by a takeover when
            # its replica died, froze or lost its lease: it ended, and the
            # client knows; a lost cancel leaves a turn running.
            continue
        tags = []
        if active(history.faults, running, cancel["t"] - 1, cancel["t"] + 1, REDIS_CUTS):
            tags.append("during-redis-cut")
        if active(history.faults, cancel["replica"], cancel["t"] - 1, cancel["t"] + 1, REDIS_CUTS):
            tags.append("cancel-replica-cut-from-redis")
        outcome = "no terminal" if end is None else f"{end[1]} {end[2]!r}"
        verdict.reject("cancel-reached", session,
                       f"cancel of {summary['content']!r} (running on {running}) sent via "
                       f"{cancel['replica']} at {cancel['t']} was lost: the turn ended {outcome}",
                       cancel["t"], tags=tags)


def check_readyz(history: History, verdict: Verdict) -> None:
    for probe in (e for e in history.events if e["kind"] == "readyz"):
        replica, sent = probe["replica"], probe["sent_t"]
        cuts = [f for f in active(history.faults, replica, sent, probe["t"], STORE_CUTS + ("cut-redis",))
                if f["start"] + READY_GRACE <= sent and probe["t"] <= f["end"]]
        if not cuts:
            continue
        others = active(history.faults, replica, sent, probe["t"], ("cut-clients", "pause", "kill", "loss", "heavy-loss"))
        if others:
            continue  # the probe itself could not get through
        if probe["status"] == 200:
            verdict.reject("readyz", None, f"{replica} answered /readyz 200 while {cuts[0]['kind']}", sent)
        elif probe["status"] == "timeout":
            verdict.reject("readyz", None, f"{replica} did not answer /readyz within 5 s while {cuts[0]['kind']}", sent)


def figures(history: History, turns: dict, store: list[dict]) -> dict:
    outcomes = defaultdict(int)
    for summary in history.turns:
        end = terminal_of(turns, summary)
        if end is not None:
            outcomes[end[1]] += 1
        elif summary.get("refusal") is not None:
            outcomes["refused"] += 1
        else:
            outcomes["unseen"] += 1
    answers = [a.get("replayed") for c, a in history.answers.items() if history.conns.get(c, {}).get("rejoin")]
    errors = defaultdict(int)
    for summary in history.turns:
        end = terminal_of(turns, summary)
        if end is not None and end[1] == "error":
            errors[str(end[2])] += 1
    probes = defaultdict(int)
    for e in history.events:
        if e["kind"] == "readyz":
            probes[str(e["status"])] += 1
    return {
        "messages_sent": len(history.turns),
        "turn_outcomes": dict(outcomes),
        "turn_errors": dict(errors),
        "turns_in_logs": len(turns),
        "sockets": len(history.conns),
        "rejoins": {"replayed": answers.count(True), "not_replayed": answers.count(False)},
        "cancels": sum(1 for s in history.turns if s.get("cancels")),
        "faults": len(history.faults),
        "readyz": dict(probes),
        "stored_messages": len(store),
    }


def summary(verdict: dict) -> str:
    lines = [f"figures: {verdict['figures']}"]
    by_check = defaultdict(list)
    for v in verdict["violations"]:
        by_check[v["check"]].append(v)
    for name in ["stored-once", "interrupted-and-stored", "one-turn-at-a-time", "one-log", "one-terminal",
                 "gap-free", "cancel-reached", "readyz"]:
        found = by_check.get(name, [])
        lines.append(f"{name}: {'ok' if not found else f'{len(found)} violations'}")
        for v in found[:5]:
            tags = f" [{', '.join(v['tags'])}]" if v.get("tags") else ""
            lines.append(f"  t={v['t']} {v['session']}: {v['detail']}{tags}")
    lines.append("ACCEPTED" if not verdict["violations"] else "REJECTED")
    return "\n".join(lines)
