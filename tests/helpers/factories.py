"""Factories for the service tests: settings, app configs and bodies, apps created through the
API, and a trainer stepped until idle."""

from __future__ import annotations

import time
import uuid

from fastapi.testclient import TestClient

from service.api.deps import hash_key
from service.records import Action, Aggregation, AppConfig
from service.settings import Settings
from service.trainer import Trainer

ADMIN_KEY = "test-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
#: small forests keep the tests fast
FOREST = {"kind": "bandit-forest", "params": {"n_trees": 5, "warmup": 20, "seed": 1}}


def make_settings(redis_url: str, **overrides) -> Settings:
    values = dict(
        redis_url=redis_url,
        admin_key=ADMIN_KEY,
        trainer_lease=1.0,
        snapshot_interval=0.05,
        trainer_poll=0.01,
        redis_timeout=0.5,
    )
    values.update(overrides)
    return Settings(**values)


def make_config(name: str = "shop", **overrides) -> AppConfig:
    """An app config for store-level tests (no learner involved)."""
    values = dict(
        name=name,
        uid=uuid.uuid4().hex,
        policy_kind="bandit-forest",
        policy_params={},
        actions=(Action("a"), Action("b")),
        reward_wait_time=60.0,
        default_reward=0.0,
        reward_range=(0.0, 1.0),
        reward_aggregation=Aggregation.earliest,
        api_key_hash=hash_key("k"),
        created_at=time.time(),
        updated_at=time.time(),
    )
    values.update(overrides)
    return AppConfig(**values)


def app_body(name: str = "shop", **overrides) -> dict:
    """A POST /apps body with a small Bandit Forest."""
    body = {
        "name": name,
        "policy": FOREST,
        "actions": ["a", "b", "c"],
        "rewardWaitTime": 60,
        "defaultReward": 0.0,
    }
    body.update(overrides)
    return body


def create(client: TestClient, name: str = "shop", **overrides) -> dict:
    """Create an app through the API; returns headers carrying its API key."""
    answer = client.post("/apps", json=app_body(name, **overrides), headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return {"Authorization": f"Bearer {answer.json()['apiKey']}"}


def drain(trainer: Trainer, rounds: int = 200) -> None:
    """Step the trainer until it is idle, then publish what it learned."""
    trainer.refresh_leases()
    for _ in range(rounds):
        if not trainer.step() and not trainer.wait_refits():
            break
    for name in list(trainer.owned):
        trainer.maybe_publish(name, force=True)
