"""The HTTP driver: a Bandit Forest policy played through a running Grove.

Each decision is ``POST /apps/{app}/decide`` with a client-chosen ``eventId``; its reward is
``POST /apps/{app}/reward``. Logged-feedback replays decide with ``deferActivation``: only the
decisions that match the logged action (the replay method) are activated and rewarded, the
others are never learned (the service drops them at their deadline instead of learning them
with the default reward).

Synchronisation (``sync_every`` = B > 0): the rewards of a block of B steps are held back and
sent at the block's end, then the driver waits until the app's served snapshot includes every
reward it sent (``eventsLearned + eventsRejected`` in ``GET /apps/{app}``). So no event reaches
the trainer during a block, and every decision of a block comes from a model that has learned
exactly the previous blocks, as in the in-process driver. With B = 0 each reward is sent at once
and the driver never waits (free running, as production traffic would be: then results depend
on the trainer's timing). The app must be left alone during the run.
"""

from __future__ import annotations

import time
import uuid

import httpx

from service.replay.policies import AutoFigures, Choice, Policy


class ServiceError(RuntimeError):
    """The service could not be reached or refused a request."""


class GroveClient:
    """A small client of Grove's HTTP API."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, key: str | None, body: dict | None = None
                ) -> dict:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            answer = self.http.request(method, path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ServiceError(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}") from None
        if answer.status_code >= 400:
            try:
                detail = answer.json().get("detail", answer.text)
            except ValueError:
                detail = answer.text
            raise ServiceError(
                f"{method} {self.url}{path}: HTTP {answer.status_code}: {str(detail)[:300]}")
        return answer.json() if answer.content else {}

    def create_app(self, admin_key: str, name: str, params: dict, actions: list[str],
                   reward_range: tuple[float, float], kind: str = "bandit-forest") -> str:
        """Create ``name`` with a policy of ``kind`` and ``params``; returns its API key."""
        body = {
            "name": name,
            "policy": {"kind": kind, "params": params},
            "actions": list(actions),
            "rewardWaitTime": 600,
            "defaultReward": reward_range[0],
            "rewardRange": list(reward_range),
        }
        return self.request("POST", "/apps", admin_key, body)["apiKey"]

    def close(self) -> None:
        self.http.close()


class HttpForest(Policy):
    """One app of a running Grove, driven decision by decision."""

    kind = "forest"

    def __init__(self, label: str, client: GroveClient, app: str, key: str, *, logged: bool,
                 sync_every: int, params: dict | None = None, sync_timeout: float = 300.0):
        self.label, self.client, self.app, self.key = label, client, app, key
        self.params = params
        self.logged = logged
        self.sync_every = sync_every
        self.sync_timeout = sync_timeout
        self.latencies = []
        self._run = uuid.uuid4().hex[:12]
        self._n = 0
        self._base = self._learned()  # events the app had learned before this run
        self._sent = 0
        self._pending: list[tuple[str, float]] = []

    def _learned(self) -> int:
        app = self.client.request("GET", f"/apps/{self.app}", self.key)
        return int(app["eventsLearned"]) + int(app["eventsRejected"])

    def decide(self, context: dict, actions: list[str]) -> Choice:
        self._n += 1
        body = {"eventId": f"replay-{self._run}-{self._n}", "context": context,
                "actions": actions, "deferActivation": self.logged}
        start = time.perf_counter()
        answer = self.client.request("POST", f"/apps/{self.app}/decide", self.key, body)
        self.latencies.append(time.perf_counter() - start)
        probabilities = {r["id"]: float(r["probability"]) for r in answer["ranking"]}
        return Choice(answer["action"], float(answer["probability"]), probabilities,
                      handle=answer["eventId"])

    def learn(self, choice: Choice, context: dict, reward: float) -> None:
        if self.sync_every > 0:
            self._pending.append((choice.handle, reward))
        else:
            self._send(choice.handle, reward)

    def _send(self, event_id: str, reward: float) -> None:
        if self.logged:  # decided with deferActivation
            self.client.request("POST", f"/apps/{self.app}/activate", self.key,
                                {"eventId": event_id})
        self.client.request("POST", f"/apps/{self.app}/reward", self.key,
                            {"eventId": event_id, "reward": reward})
        self._sent += 1

    def sync(self) -> None:
        if self.sync_every <= 0:
            return
        for event_id, reward in self._pending:
            self._send(event_id, reward)
        self._pending.clear()
        target = self._base + self._sent
        deadline = time.monotonic() + self.sync_timeout
        delay = 0.01
        while self._learned() < target:
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"app {self.app!r}: the trainer did not learn the replayed rewards within "
                    f"{self.sync_timeout:.0f}s (is a trainer running? `grove serve` runs one)")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)

    def describe(self) -> dict:
        out = {"label": self.label, "kind": self.kind, "app": self.app}
        if self.params is not None:
            out["params"] = self.params
        return out


class HttpAuto(HttpForest):
    """An auto app of a running Grove: decides and learns as :class:`HttpForest`; after every
    block (and at the end) its candidates' figures from ``GET /apps/{app}/evaluations``."""

    kind = "auto"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.figures = AutoFigures()
        self._evaluations()  # fail before the run if the app is not an auto app

    def _evaluations(self) -> dict:
        return self.client.request("GET", f"/apps/{self.app}/evaluations", self.key)

    def sync(self) -> None:
        super().sync()
        if self.sync_every > 0:
            self.figures.note(self._sent, self._evaluations()["candidates"])

    def describe(self) -> dict:
        figures = self._evaluations()
        self.figures.note(self._sent, figures["candidates"])
        return {**super().describe(),
                **self.figures.describe(figures["candidates"], figures["switches"],
                                        figures["serving"])}
