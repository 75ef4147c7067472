"""The nemesis: a schedule of faults drawn from the seed up front (written
to schedule.json before the run), applied one at a time to one replica,
each start and heal recorded in the history."""

import asyncio
import random
import signal

import net

# Every fault the nemesis knows. `cut-*` drop a replica's packets to Redis,
# to PostgreSQL, to both, or from its clients; `loss` drops a share of all
# its packets at random (10 or 30 %; `heavy-loss` 60 %); `delay` holds its Redis and PostgreSQL traffic in
# the proxies 50 or 300 ms each way, `slow` 1.5 s (a round trip over
# `redis.timeout`); `pause` is SIGSTOP (SIGCONT at the heal); `kill` is SIGKILL
# (a restart at the heal).
FAULTS = ["cut-redis", "cut-pg", "cut-both", "cut-clients", "loss", "heavy-loss", "delay", "slow",
          "pause", "kill"]


def schedule(seed: int, duration: float, replicas: list[str], faults: list[str]) -> list[dict]:
    rng = random.Random(seed)
    steps = []
    at = 5.0
    # The last 10 s stay healthy, so the last turns end before the settle.
    while at < duration - 15:
        kind = rng.choice(faults)
        length = {
            "kill": rng.uniform(1, 5),
            # Some pauses outlast the 10 s lease: the paused replica wakes
            # to find its session taken over (fencing).
            "pause": rng.choice([rng.uniform(1, 4), rng.uniform(11, 16)]),
        }.get(kind, rng.uniform(3, 18))
        length = min(length, duration - 10 - at)
        step = {"at": round(at, 2), "duration": round(length, 2), "kind": kind,
                "replica": rng.choice(replicas)}
        if kind == "loss":
            step["percent"] = rng.choice([10, 30])
        if kind == "heavy-loss":
            step["percent"] = 60
        if kind == "delay":
            step["ms"] = rng.choice([50, 300])
        if kind == "slow":
            step["ms"] = 1500
        steps.append(step)
        at += length + rng.uniform(2, 8)
    return steps


class Nemesis:
    def __init__(self, rec, network: net.Network, replicas: dict, proxies: dict):
        self.rec = rec
        self.net = network
        self.replicas = replicas  # name -> services.Replica
        self.proxies = proxies  # name -> [DelayProxy]
        self.active: dict[str, list[dict]] = {name: [] for name in replicas}

    async def run(self, steps: list[dict], t0: float) -> None:
        loop = asyncio.get_running_loop()
        for step in steps:
            await asyncio.sleep(max(0.0, t0 + step["at"] - loop.time()))
            await self.start(step)
            await asyncio.sleep(step["duration"])
            await self.heal(step)

    async def start(self, step: dict) -> None:
        replica = self.replicas[step["replica"]]
        kind = step["kind"]
        if kind == "pause":
            replica.signal(signal.SIGSTOP)
        elif kind == "kill":
            replica.kill()
        elif kind in ("delay", "slow"):
            for proxy in self.proxies[replica.name]:
                proxy.delay = step["ms"] / 1000
        else:
            self.active[replica.name].append(step)
            net.apply_rules(self.net, replica.name, self.active[replica.name])
        self.record("start", step)

    async def heal(self, step: dict) -> None:
        replica = self.replicas[step["replica"]]
        kind = step["kind"]
        if kind == "pause":
            replica.signal(signal.SIGCONT)
        elif kind == "kill":
            replica.start()
            await asyncio.to_thread(replica.wait_healthy)
        elif kind in ("delay", "slow"):
            for proxy in self.proxies[replica.name]:
                proxy.delay = 0.0
        else:
            self.active[replica.name].remove(step)
            net.apply_rules(self.net, replica.name, self.active[replica.name])
        self.record("end", step)

    def record(self, phase: str, step: dict) -> None:
        fields = {("fault" if k == "kind" else k): v for k, v in step.items()}
        self.rec.emit("nemesis", phase=phase, **fields)

    async def heal_all(self) -> None:
        for name, replica in self.replicas.items():
            replica.signal(signal.SIGCONT)
            self.active[name].clear()
            net.apply_rules(self.net, name, [])
            for proxy in self.proxies[name]:
                proxy.delay = 0.0
            if replica.process is None or replica.process.poll() is not None:
                replica.start()
                await asyncio.to_thread(replica.wait_healthy)
