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

A request answered 503 (the service's Redis unavailable for a moment) or lost on the way back
is tried again, up to :data:`TRIES` times, after the answer's ``Retry-After``: a decide is
repeated with its eventId (the service answers a repeat with its first decision, if the first
try's write had happened), and a reward or an activation found done already (409 after a
retry) was done by the earlier try.
"""

from __future__ import annotations

import time
import uuid

import httpx

from service.replay.policies import AutoFigures, Choice, Policy

#: tries of a request that may be repeated (``retry=True``), the service answering 503 or the
#: answer lost; the waits between them follow the answers' Retry-After (at most 5 s each)
TRIES = 8


class ServiceError(RuntimeError):
    """The service could not be reached or refused a request. ``status``: the HTTP status
    (None: no answer); ``retried``: an earlier try of the request may have been carried out."""

    def __init__(self, message: str, status: int | None = None, retried: bool = False):
        super().__init__(message)
        self.status, self.retried = status, retried


class GroveClient:
    """A small client of Grove's HTTP API."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, key: str | None, body: dict | None = None,
                retry: bool = False) -> dict:
        """The answer's JSON; :class:`ServiceError` for an error answer or none. ``retry``:
        the request may be sent again (see the module doc) after a 503 or a lost answer."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        where = f"{method} {self.url}{path}"
        attempt = 0
        while True:
            more = retry and attempt < TRIES - 1
            try:
                answer = self.http.request(method, path, json=body, headers=headers)
            except httpx.HTTPError as exc:
                if not more:
                    raise ServiceError(f"{where}: {type(exc).__name__}: {exc}", None,
                                       attempt > 0) from None
                wait = 0.1 * 2.0 ** attempt
            else:
                if answer.status_code != 503 or not more:
                    return _read(answer, where, attempt > 0)
                wait = _retry_after(answer, 0.1 * 2.0 ** attempt)
            time.sleep(min(wait, 5.0))
            attempt += 1

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


def _read(answer: httpx.Response, where: str, retried: bool) -> dict:
    if answer.status_code >= 400:
        try:
            detail = answer.json().get("detail", answer.text)
        except ValueError:
            detail = answer.text
        raise ServiceError(f"{where}: HTTP {answer.status_code}: {str(detail)[:300]}",
                           answer.status_code, retried)
    return answer.json() if answer.content else {}


def _retry_after(answer: httpx.Response, default: float) -> float:
    try:
        return float(answer.headers.get("Retry-After", default))
    except ValueError:  # (an HTTP date: not what Grove sends)
        return default


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
        answer = self.client.request("POST", f"/apps/{self.app}/decide", self.key, body,
                                     retry=True)
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
            self._once("activate", {"eventId": event_id})
        self._once("reward", {"eventId": event_id, "reward": reward})
        self._sent += 1

    def _once(self, what: str, body: dict) -> None:
        """``POST /apps/{app}/{what}``, tried again after a 503 or a lost answer: a 409 then
        says an earlier try was carried out (the reward joined, the decision activated)."""
        try:
            self.client.request("POST", f"/apps/{self.app}/{what}", self.key, body, retry=True)
        except ServiceError as exc:
            if not (exc.status == 409 and exc.retried):
                raise

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
