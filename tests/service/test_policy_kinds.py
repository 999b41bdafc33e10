"""The hosted policy kinds through the API and the trainer: the default app, the tree-ensemble
policy's refits in the trainer's refit thread, propensities equal to the served snapshot's."""

from __future__ import annotations

import random

from online.policies.registry import DEFAULT_POLICY_KIND, POLICY_KINDS
from service import codec
from service.models import MODEL_KINDS, model_kind
from tests.helpers.factories import ADMIN, drain

ACTIONS = [f"a{i}" for i in range(5)]


def _create(client, name: str, policy: dict | None = None) -> dict:
    body = {"name": name, "actions": ACTIONS, "rewardWaitTime": 600}
    if policy is not None:
        body["policy"] = policy
    answer = client.post("/apps", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return {"Authorization": f"Bearer {answer.json()['apiKey']}"}


def _play(client, headers, app: str, n: int, rng: random.Random,
          shift: int = 0) -> list[float]:
    """``n`` decide/reward rounds of the five-action problem (``shift``: the action that many
    places after the favourite earns); the rewards earned."""
    earned = []
    for _ in range(n):
        favourite = rng.choice(ACTIONS)
        context = {"favorite": favourite, "device": rng.choice(["pc", "phone", "tablet"])}
        decision = client.post(f"/apps/{app}/decide", json={"context": context}, headers=headers)
        assert decision.status_code == 200, decision.text
        body = decision.json()
        best = ACTIONS[(ACTIONS.index(favourite) + shift) % len(ACTIONS)]
        reward = float(body["action"] == best)
        answer = client.post(f"/apps/{app}/reward", json={"eventId": body["eventId"],
                                                          "reward": reward}, headers=headers)
        assert answer.status_code == 200, answer.text
        earned.append(reward)
    return earned


def test_every_policy_kind_is_a_model_kind():
    assert set(POLICY_KINDS) <= set(MODEL_KINDS)
    assert DEFAULT_POLICY_KIND == "auto"


def test_an_app_that_names_no_policy_gets_auto_with_the_tree_policy_serving(client):
    _create(client, "plain")
    app = client.get("/apps/plain", headers=ADMIN).json()
    assert app["policy"]["kind"] == "auto"
    figures = client.get("/apps/plain/evaluations", headers=ADMIN).json()
    assert [c["kind"] for c in figures["candidates"]] == ["trees", "linucb"]
    assert [c["serving"] for c in figures["candidates"]] == [True, False]
    assert [c["changes"] for c in figures["candidates"]] == [0, 0]  # found in rewards: none yet
    assert app["changesFound"] == 0  # the serving candidate's
    assert app["eventsSinceRefit"] == 0  # nothing learned yet
    assert app["featureColumns"] == 0 and app["featuresLeftOut"] == 0
    assert app["explainedShare"] == 0.0  # no refit yet
    _create(client, "forest", {"kind": "bandit-forest", "params": {"n_trees": 5}})
    forest = client.get("/apps/forest", headers=ADMIN).json()
    assert forest["changesFound"] is None and forest["eventsSinceRefit"] is None
    assert forest["featureColumns"] is None and forest["featuresLeftOut"] is None
    assert forest["explainedShare"] is None
    listed = client.get("/apps", headers=ADMIN).json()
    assert {a["name"] for a in listed} >= {"plain", "forest"}
    assert all(a["changesFound"] is None and a["featureColumns"] is None for a in listed)


def test_unknown_params_of_a_policy_kind_are_a_422_naming_them(client):
    answer = client.post("/apps", json={"name": "bad", "actions": ACTIONS,
                                        "policy": {"kind": "trees", "params": {"depth": 3}}},
                         headers=ADMIN)
    assert answer.status_code == 422 and "'depth'" in answer.text and "gamma_scale" in answer.text


def test_the_trainer_refits_the_tree_policy_and_serves_the_refitted_model(client, trainer, store):
    """Refits run in the trainer's refit thread; the snapshot it publishes decides the favourite
    (the five-action problem), and every logged propensity is the served snapshot's."""
    headers = _create(client, "trees", {"kind": "trees", "params": {"n_trees": 20, "seed": 3}})
    rng = random.Random(5)
    for _ in range(8):
        _play(client, headers, "trees", 100, rng)
        drain(trainer)
    learner = trainer.owned["trees"].learner
    assert learner.n_refits >= 3 and trainer.owned["trees"].refit is None
    late = _play(client, headers, "trees", 300, rng)
    assert sum(late) / len(late) >= 0.85, sum(late) / len(late)

    # the served snapshot's distribution is what the API logged with its decisions
    info, state = store.load_snapshot("trees", serving=True)
    served = model_kind("trees").load(state)
    context = {"favorite": "a2", "device": "pc"}
    decision = client.post("/apps/trees/decide", json={"context": context},
                           headers=headers).json()
    assert decision["modelVersion"] == info.version
    expected = served.probabilities(context)
    assert {r["id"]: r["probability"] for r in decision["ranking"]} == expected
    assert decision["probability"] == expected[decision["action"]]
    assert codec.decode(codec.encode(state))["format"] == "grove.trees"
    # the favourite is the context's: the served models explain much of the rewards, and the
    # app's status says how much (the weight of the served snapshot's optimism bonus)
    app = client.get("/apps/trees", headers=ADMIN).json()
    assert app["explainedShare"] == served.explained > 0.2


def test_the_tree_policy_in_the_service_earns_again_after_tastes_change(client, trainer):
    """After 1,200 rounds every action's reward moves to the next favourite's: the trainer's
    learner finds the change in its held-out errors, refits on the events since, and the served
    snapshots earn again after 500 rounds (0.97 over the next 300 here; the window alone keeps
    the old world for thousands)."""
    headers = _create(client, "moving", {"kind": "trees", "params": {"n_trees": 20, "seed": 3}})
    rng = random.Random(6)
    for _ in range(12):
        _play(client, headers, "moving", 100, rng)
        drain(trainer)
    for _ in range(5):
        _play(client, headers, "moving", 100, rng, shift=1)
        drain(trainer)
    learner = trainer.owned["moving"].learner
    assert learner.n_changes >= 1
    late = _play(client, headers, "moving", 300, rng, shift=1)
    assert sum(late) / len(late) >= 0.8, sum(late) / len(late)
    # what the served snapshot found, for an operator
    app = client.get("/apps/moving", headers=ADMIN).json()
    assert 1 <= app["changesFound"] <= learner.n_changes
    # the served trees were refitted within the last quarter of the window's events
    assert 0 <= app["eventsSinceRefit"] <= 0.25 * app["eventsLearned"]
