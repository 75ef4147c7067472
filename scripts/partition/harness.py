"""The partition harness: three replicas, PostgreSQL and Redis in network
namespaces of their own, clients of both dialects, a nemesis, and at the end
the checker over what the clients saw and what PostgreSQL holds.

    harness.py --run-id ID --out DIR --binary PATH [--duration 120] [--seed N]
               [--faults cut-redis,cut-pg,...] [--workers 6]

Exit 0: the checker accepted the history; 1: it rejected it (the
violations are in DIR/verdict.json and printed); 2: the harness failed.
Run through scripts/partition.sh, which installs what it needs and cleans up
the namespaces whatever happens."""

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

import checker
import net
import nemesis
from clients import Worker
from history import Recorder
from services import Postgres, Redis, Replica, replica_config

REPLICAS = 3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--faults", default=",".join(nemesis.FAULTS))
    parser.add_argument("--workers", type=int, default=6)
    return parser.parse_args()


async def probe(rec: Recorder, replica: Replica) -> None:
    """One GET /readyz: its status, or `timeout` after 5 s, `refused`."""
    sent = rec.now()
    host, port = replica.address.split(":")
    status: int | str
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5)
        writer.write(f"GET /readyz HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        head, _, body = answer.decode(errors="replace").partition("\r\n\r\n")
        status = int(head.split(" ")[1]) if head else "empty"
    except asyncio.TimeoutError:
        status, body = "timeout", ""
    except OSError as e:
        status, body = "refused", str(e)[:100]
    rec.emit("readyz", replica=replica.name, sent_t=sent, status=status, body=body.strip())


async def prober(rec: Recorder, replicas: dict, until: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        for replica in replicas.values():
            asyncio.create_task(probe(rec, replica))
        await asyncio.sleep(1)


async def start_proxies(network: net.Network, replicas: dict) -> dict:
    proxies = {}
    for name, replica in replicas.items():
        pg = net.DelayProxy((network.host, net.PG_PROXY + replica.index),
                            (network.address("pg"), 5432))
        redis = net.DelayProxy((network.host, net.REDIS_PROXY + replica.index),
                               (network.address("redis"), 6379))
        await pg.start()
        await redis.start()
        proxies[name] = [pg, redis]
    return proxies


async def exercise(args, rec: Recorder, network, replicas: dict, steps: list[dict]) -> None:
    proxies = await start_proxies(network, replicas)
    for replica in replicas.values():
        replica.start()
    for replica in replicas.values():
        await asyncio.to_thread(replica.wait_healthy)
    rec.emit("replicas_up")
    loop = asyncio.get_running_loop()
    t0 = loop.time() - rec.now()
    until = t0 + args.duration
    rng = random.Random(args.seed)
    addresses = {name: replica.address for name, replica in replicas.items()}
    workers = [Worker(rec, f"w{i}", "omnia" if i % 2 == 0 else "gnosari", addresses,
                      random.Random(rng.random())) for i in range(args.workers)]
    the_nemesis = nemesis.Nemesis(rec, network, replicas, proxies)
    tasks = [asyncio.create_task(w.run(until)) for w in workers]
    tasks.append(asyncio.create_task(prober(rec, replicas, until)))
    await the_nemesis.run(steps, t0)
    await asyncio.gather(*tasks)
    await the_nemesis.heal_all()
    rec.emit("settle")
    await asyncio.gather(*[w.settle(sorted(replicas)) for w in workers])
    rec.emit("end")
    for pair in proxies.values():
        for proxy in pair:
            await proxy.stop()


def write_rejected(out: Path, events: list[dict], verdict: dict) -> None:
    """Each session the checker rejected: its sockets' events, its turns and
    the nemesis steps, in DIR/rejected/<session>.jsonl."""
    sessions = {v["session"] for v in verdict["violations"] if v["session"]}
    if not sessions:
        return
    (out / "rejected").mkdir(exist_ok=True)
    conns = {e["conn"]: e["session"] for e in events if e["kind"] == "open"}
    for session in sessions:
        with open(out / "rejected" / f"{session}.jsonl", "w") as lines:
            for e in events:
                mine = e.get("session") == session or conns.get(e.get("conn")) == session
                if mine or e["kind"] == "nemesis":
                    lines.write(json.dumps(e) + "\n")


def main() -> int:
    args = parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    args.out.mkdir(parents=True, exist_ok=True)
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - set(nemesis.FAULTS)
    if unknown:
        print(f"unknown faults {sorted(unknown)}; known: {nemesis.FAULTS}", file=sys.stderr)
        return 2
    names = [f"r{i}" for i in range(1, REPLICAS + 1)]
    steps = nemesis.schedule(args.seed, args.duration, names, faults)
    (args.out / "schedule.json").write_text(json.dumps(
        {"seed": args.seed, "duration": args.duration, "faults": faults, "steps": steps}, indent=1))
    print(f"partition: seed {args.seed}, {len(steps)} faults, {args.duration:.0f} s; "
          f"output in {args.out}", file=sys.stderr)
    network = net.create(args.run_id, REPLICAS)
    rec = Recorder(args.out / "history.jsonl")
    postgres, redis = Postgres(network, args.out), Redis(network, args.out)
    replicas = {}
    try:
        postgres.start()
        redis.start()
        for i, name in enumerate(names, start=1):
            config = replica_config(postgres.url(i), redis.url(i))
            replicas[name] = Replica(network, i, args.binary, config, args.out)
        started = time.monotonic()
        asyncio.run(exercise(args, rec, network, replicas, steps))
        store = postgres.dump()
        (args.out / "store.json").write_text(json.dumps(store, indent=1))
        rec.close()
        verdict = checker.check(rec.events, store)
        verdict["figures"]["wall_seconds"] = round(time.monotonic() - started, 1)
        verdict["seed"] = args.seed
        (args.out / "verdict.json").write_text(json.dumps(verdict, indent=1))
        write_rejected(args.out, rec.events, verdict)
        print(checker.summary(verdict), file=sys.stderr)
        return 0 if not verdict["violations"] else 1
    finally:
        for replica in replicas.values():
            replica.stop()
        redis.stop()
        postgres.stop()
        net.destroy(args.run_id)


if __name__ == "__main__":
    sys.exit(main())
