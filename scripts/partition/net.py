"""The harness's network: one namespace per process, veth pairs to a bridge,
nftables rules for cuts and loss, and a delaying TCP proxy for latency.

Layout (SUBNET is 10.213.N.0/24, N from the run id):

    host (root namespace)  .1 on the bridge: the clients, the proxies, the prober
    pg                      .2  PostgreSQL on :5432
    redis                   .3  Redis on :6379
    r1, r2, r3              .11 .. .13  the replicas on :8080

Every replica reaches PostgreSQL and Redis through proxies of its own in the
host namespace (ports PG_PROXY + i and REDIS_PROXY + i on .1), so a delay can
be put on one replica's links, and a cut is a drop rule in the replica's own
namespace matching that proxy's port: the packets are lost, as in a real
partition (no reset tells the replica), and come through again once the rule
goes.
"""

import asyncio
import subprocess
from dataclasses import dataclass, field

PG_PROXY = 15400
REDIS_PROXY = 16400
REPLICA_PORT = 8080


def run(*args: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess:
    """Runs a command (in namespace `ns`), capturing its output."""
    command = list(args)
    if ns is not None:
        command = ["ip", "netns", "exec", ns, *command]
    done = subprocess.run(command, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done


@dataclass
class Network:
    run_id: str
    subnet: str  # "10.213.N"
    names: dict[str, str] = field(default_factory=dict)  # role -> namespace

    @property
    def host(self) -> str:
        return f"{self.subnet}.1"

    @property
    def bridge(self) -> str:
        return f"aw{self.run_id}br"

    def address(self, role: str) -> str:
        octet = {"pg": 2, "redis": 3}.get(role)
        if octet is None:
            octet = 10 + int(role[1:])  # r1 -> .11
        return f"{self.subnet}.{octet}"

    def ns(self, role: str) -> str:
        return self.names[role]


def subnet_for(run_id: str) -> str:
    return f"10.213.{int(run_id, 16) % 250 + 1}"


def create(run_id: str, replicas: int) -> Network:
    net = Network(run_id, subnet_for(run_id))
    if net.subnet + ".0/24" in run("ip", "route").stdout:
        raise RuntimeError(f"subnet {net.subnet}.0/24 is in use: pick another run id")
    run("ip", "link", "add", net.bridge, "type", "bridge")
    run("ip", "addr", "add", f"{net.host}/24", "dev", net.bridge)
    run("ip", "link", "set", net.bridge, "up")
    for role in ["pg", "redis", *[f"r{i}" for i in range(1, replicas + 1)]]:
        add_namespace(net, role)
    return net


def add_namespace(net: Network, role: str) -> None:
    ns = f"aw{net.run_id}-{role}"
    net.names[role] = ns
    outside, inside = f"aw{net.run_id}{role}h", f"aw{net.run_id}{role}n"
    run("ip", "netns", "add", ns)
    run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
    run("ip", "link", "set", inside, "netns", ns)
    run("ip", "link", "set", outside, "master", net.bridge)
    run("ip", "link", "set", outside, "up")
    run("ip", "addr", "add", f"{net.address(role)}/24", "dev", inside, ns=ns)
    run("ip", "link", "set", inside, "up", ns=ns)
    run("ip", "link", "set", "lo", "up", ns=ns)
    run("nft", "add", "table", "inet", "aw", ns=ns)
    for hook in ["input", "output"]:
        run("nft", f"add chain inet aw {hook} {{ type filter hook {hook} priority 0 ; }}", ns=ns)


def destroy(run_id: str) -> None:
    """Removes every namespace and link of run `run_id`, killing what runs
    in them. Safe to call twice, and on a half-made network."""
    listed = run("ip", "netns", "list", check=False).stdout.split("\n")
    for line in listed:
        ns = line.split(" ")[0]
        if not ns.startswith(f"aw{run_id}-"):
            continue
        pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            run("kill", "-9", pid, check=False)
        run("ip", "netns", "del", ns, check=False)
    run("ip", "link", "del", f"aw{run_id}br", check=False)


def apply_rules(net: Network, role: str, faults: list[dict]) -> None:
    """Makes replica `role`'s drop rules exactly those of `faults`
    (one nft transaction: flush, then add)."""
    lines = ["flush chain inet aw input", "flush chain inet aw output"]
    index = int(role[1:])
    for fault in faults:
        lines.extend(rules_for(net, index, fault))
    script = "\n".join(lines) + "\n"
    done = subprocess.run(
        ["ip", "netns", "exec", net.ns(role), "nft", "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"nft in {role}: {done.stderr.strip()}\n{script}")


def rules_for(net: Network, index: int, fault: dict) -> list[str]:
    host = net.host
    ports = {"redis": REDIS_PROXY + index, "pg": PG_PROXY + index}

    def cut(port: int) -> list[str]:
        return [
            f"add rule inet aw output ip daddr {host} tcp dport {port} drop",
            f"add rule inet aw input ip saddr {host} tcp sport {port} drop",
        ]

    kind = fault["kind"]
    if kind == "cut-redis":
        return cut(ports["redis"])
    if kind == "cut-pg":
        return cut(ports["pg"])
    if kind == "cut-both":
        return cut(ports["redis"]) + cut(ports["pg"])
    if kind == "cut-clients":
        return [
            f"add rule inet aw input tcp dport {REPLICA_PORT} drop",
            f"add rule inet aw output tcp sport {REPLICA_PORT} drop",
        ]
    if kind in ("loss", "heavy-loss"):
        percent = int(fault["percent"])
        return [
            f"add rule inet aw {hook} meta l4proto tcp numgen random mod 100 < {percent} drop"
            for hook in ["input", "output"]
        ]
    return []


class DelayProxy:
    """Forwards TCP from `listen` to `upstream`, holding every chunk for
    `delay` seconds in each direction (order kept): latency on one link."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int]):
        self.listen = listen
        self.upstream = upstream
        self.delay = 0.0
        self.server: asyncio.base_events.Server | None = None
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, *self.listen)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), timeout=5
            )
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        for source, sink in [(reader, up_writer), (up_reader, writer)]:
            task = asyncio.create_task(self._pipe(source, sink))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    break
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                sink.write(data)
                await sink.drain()

        sender = asyncio.create_task(deliver())
        try:
            while data := await source.read(65536):
                await queue.put((loop.time() + self.delay, data))
            await queue.put((0, None))
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
        finally:
            try:
                sink.close()
            except OSError:
                pass
