"""The official Personalizer SDKs, unchanged, against Grove's API served over real HTTP.

``azure-ai-personalizer`` 1.0.0b1 (the current SDK: ``/personalizer/...?api-version=
2022-09-01-preview``) and ``azure-cognitiveservices-personalizer`` 0.1.1 (``/personalizer/v1.0``)
talk to uvicorn serving :func:`service.api.main.create_app` in a thread of the test process, on
the real redis-server of the fixtures; the trainer is stepped by :func:`drain`.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from azure.ai.personalizer import PersonalizerClient as Client
from azure.cognitiveservices.personalizer import PersonalizerClient as OldClient
from azure.cognitiveservices.personalizer.models import (
    ErrorResponseException,
    RankableAction,
    RankRequest,
)
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from msrest.authentication import CognitiveServicesCredentials

from online import make_policy
from service import keys
from service.models import model_kind
from tests.helpers.factories import ADMIN, drain
from tests.helpers.personalizer_sdk import make_app

ACTIONS = [
    {"id": "NewsArticle", "features": [{"type": "News"}]},
    {"id": "SportsArticle", "features": [{"type": "Sports"}]},
    {"id": "EntertainmentArticle", "features": [{"type": "Entertainment"}]},
]


def test_rank_reward_activate_with_the_current_sdk(client, store):
    request = {
        "contextFeatures": [{"timeOfDay": "Morning"}, {"user": {"tier": "pro"}}],
        "actions": ACTIONS,
        "excludedActions": ["SportsArticle"],
        "eventId": "ev-1",
    }
    answer = client.rank(request)
    assert answer["eventId"] == "ev-1"
    assert answer["rewardActionId"] in {"NewsArticle", "EntertainmentArticle"}
    assert answer["ranking"][0]["id"] == answer["rewardActionId"]
    assert {r["id"]: r["probability"] for r in answer["ranking"]}["SportsArticle"] == 0.0
    assert client.reward("ev-1", {"value": 1.0}) is None
    # a second reward under 'earliest': Personalizer kept the first and answered 204
    assert client.reward("ev-1", {"value": 0.0}) is None
    deferred = client.rank({"actions": ACTIONS, "eventId": "ev-2", "deferActivation": True})
    assert client.activate(deferred["eventId"]) is None
    client.reward("ev-2", {"value": -0.5})  # Personalizer's range on a default-range app
    assert store.redis.xlen(keys.stream("news")) == 2
    generated = client.rank({"actions": ACTIONS})  # no eventId: Grove makes one
    assert generated["eventId"]


def test_errors_are_personalizers_with_the_current_sdk(client, server):
    with pytest.raises(HttpResponseError) as bad:
        client.rank({"actions": []})
    assert bad.value.status_code == 400 and bad.value.error.code == "BadRequest"
    with pytest.raises(HttpResponseError) as out_of_range:
        client.rank({"actions": ACTIONS, "eventId": "r1"})
        client.reward("r1", {"value": 2.0})
    assert out_of_range.value.error.code == "InvalidRewardRequest"
    # an id never ranked (or past its wait): accepted and ignored, as Personalizer did
    assert client.reward("never-ranked", {"value": 1.0}) is None
    assert client.activate("never-ranked") is None
    stranger = Client(server, AzureKeyCredential("not-a-key"), retry_total=0)
    with stranger, pytest.raises(ClientAuthenticationError):
        stranger.rank({"actions": ACTIONS})


def test_multi_slot_rank_reward_activate(client, store):
    body = {
        "contextFeatures": [{"user": {"tier": "pro"}}],
        "actions": ACTIONS,
        "slots": [
            {"id": "Main Article", "baselineAction": "NewsArticle", "features": [{"size": "L"}]},
            {"id": "Side", "baselineAction": "SportsArticle", "excludedActions": ["NewsArticle"]},
        ],
        "eventId": "ms-1",
        "deferActivation": True,
    }
    answer = client.rank_multi_slot(body)
    assert answer["eventId"] == "ms-1"
    chosen = {s["id"]: s["rewardActionId"] for s in answer["slots"]}
    assert list(chosen) == ["Main Article", "Side"]
    assert chosen["Side"] != "NewsArticle" and chosen["Main Article"] != chosen["Side"]
    assert client.activate_multi_slot("ms-1") is None
    client.reward_multi_slot("ms-1", {"reward": [{"slotId": "Side", "value": 1.0}]})
    client.reward_multi_slot("ms-1", {"reward": [{"slotId": "Main Article", "value": 0.0}]})
    assert store.redis.xlen(keys.stream("news")) == 2
    # ids never ranked: accepted and ignored, as Personalizer did (its SDKs' own tests send them)
    assert client.activate_multi_slot("123456789") is None
    client.reward_multi_slot("123456789", {"reward": [{"slotId": "Side", "value": 1.0}]})
    assert store.redis.xlen(keys.stream("news")) == 2
    with pytest.raises(HttpResponseError) as bad:
        client.rank_multi_slot(
            {"actions": ACTIONS, "slots": [{"id": "a", "baselineAction": "nope"}]}
        )
    assert bad.value.status_code == 400 and "baselineAction" in bad.value.error.message


def test_the_v1_sdk_ranks_rewards_and_activates(server, key, store):
    sdk = OldClient(server, CognitiveServicesCredentials(key))
    actions = [RankableAction(id=a["id"], features=a["features"]) for a in ACTIONS]
    answer = sdk.rank(
        RankRequest(
            actions=actions,
            context_features=[{"timeOfDay": "Evening"}],
            event_id="old-1",
            defer_activation=True,
        )
    )
    assert answer.event_id == "old-1" and answer.reward_action_id in {a["id"] for a in ACTIONS}
    sdk.events.activate("old-1")
    sdk.events.reward("old-1", 1.0)
    assert store.redis.xlen(keys.stream("news")) == 1
    with pytest.raises(ErrorResponseException) as bad:
        sdk.rank(RankRequest(actions=[]))
    assert bad.value.response.status_code == 400


def test_both_path_styles_and_unsupported_routes(server, key):
    import httpx

    headers = {"Ocp-Apim-Subscription-Key": key}
    for path in (
        "/personalizer/v1.0/rank",
        "/personalizer/v1.1-preview.3/rank",
        "/personalizer/rank?api-version=2022-09-01-preview",
    ):
        answer = httpx.post(server + path, json={"actions": ACTIONS}, headers=headers)
        assert answer.status_code == 201, path
    old = "/personalizer/rank?api-version=2019-01-01"
    wrong = httpx.post(server + old, json={}, headers=headers)
    assert wrong.status_code == 400 and "api-version" in wrong.json()["error"]["message"]
    for query in ("api-version=", "api-version=2022-09-01-preview&api-version=2019-01-01"):
        wrong = httpx.post(server + "/personalizer/rank?" + query, json={"actions": ACTIONS},
                           headers=headers)
        assert wrong.status_code == 400 and "api-version" in wrong.json()["error"]["message"]
    twice = "api-version=2022-09-01-preview&api-version=2022-09-01-preview"
    answer = httpx.post(server + "/personalizer/rank?" + twice, json={"actions": ACTIONS},
                        headers=headers)
    assert answer.status_code == 201
    missing = httpx.post(server + "/personalizer/logs/interactions", headers=headers)
    assert missing.status_code == 501
    assert missing.json()["error"]["code"] == "UnsupportedOperation"
    method = httpx.get(server + "/personalizer/v1.0/rank", headers=headers)
    assert method.status_code == 405 and "POST" in method.headers["allow"]


@pytest.mark.slow
def test_rank_reward_loop_learns_through_the_current_sdk(server, client, settings, trainer):
    """2,000 events of a five-action problem (the policy issue's): the reward is 1 when the
    action is the context's favourite. The app has only a name: its default policy learns,
    the trainer's snapshots every 50 events, to >= 0.9 over events 1,000-2,000 (the issue's
    target through HTTP)."""
    import random

    rng = random.Random(7)
    actions = [{"id": f"a{i}", "features": [{"arm": f"a{i}"}]} for i in range(5)]
    devices = ["mobile", "desktop", "tablet"]
    hits = []
    for i in range(2000):
        favourite = f"a{rng.randrange(5)}"
        context = [{"favorite": favourite, "device": rng.choice(devices)}]
        answer = client.rank({"contextFeatures": context, "actions": actions, "eventId": f"e{i}"})
        value = 1.0 if answer["rewardActionId"] == favourite else 0.0
        client.reward(f"e{i}", {"value": value})
        hits.append(value)
        if i % 50 == 49:
            drain(trainer)
    assert sum(hits[1000:]) / 1000 >= 0.9, sum(hits[1000:]) / 1000


def test_app_created_with_only_a_name(server):
    import httpx

    key = make_app(server, "bare")
    assert key
    assert httpx.get(server + "/apps/bare", headers=ADMIN).json()["rewardRange"] == [0.0, 1.0]


def _rank_and_reward(client, n: int, prefix: str = "e") -> None:
    for i in range(n):
        answer = client.rank(
            {"contextFeatures": [{"tier": "pro" if i % 2 else "free"}], "actions": ACTIONS,
             "eventId": f"{prefix}{i}"}
        )
        client.reward(answer["eventId"], {"value": 1.0 if i % 3 == 0 else 0.0})


def test_service_configuration_get_and_update(admin):
    config = admin.get_service_configuration()
    assert config["rewardWaitTime"] == "PT10M" and config["rewardAggregation"] == "earliest"
    assert config["learningMode"] == "Online"
    config.update(
        rewardWaitTime="PT5M",
        explorationPercentage=0.1,
        logRetentionDays=30,
        rewardAggregation="sum",
        modelExportFrequency="PT1M",
    )
    updated = admin.update_service_configuration(config)
    assert updated["rewardWaitTime"] == "PT5M" and updated["explorationPercentage"] == 0.1
    again = admin.get_service_configuration()
    assert (again["logRetentionDays"], again["rewardAggregation"]) == (30, "sum")
    assert again["modelExportFrequency"] == "PT1M"
    # (an auto app, the default kind, explores a share strictly between 0 and 1: 0 was a 500
    # after the other fields had been written)
    for field, value in (("rewardAggregation", "median"), ("rewardWaitTime", "P1M"),
                         ("explorationPercentage", 1.5), ("defaultReward", 3.0),
                         ("explorationPercentage", 0.0), ("explorationPercentage", 1.0),
                         ("explorationPercentage", 1e-320), ("logRetentionDays", 10**20),
                         ("rewardWaitTime", "PT0.0000001S")):
        with pytest.raises(HttpResponseError) as bad:
            admin.update_service_configuration({**config, "rewardWaitTime": "PT1H", field: value}
                                               if field != "rewardWaitTime" else
                                               {**config, field: value})
        assert bad.value.status_code == 400, field
        assert bad.value.error.code == "InvalidServiceConfiguration", field
        assert field in bad.value.error.message, field
    assert admin.get_service_configuration()["rewardWaitTime"] == "PT5M"  # nothing written


def test_the_sdks_sample_configuration_is_taken(admin):
    """The configuration the SDKs' own tests update a loop with (azure-sdk-for-python,
    ``TestConfigurationAsync``), every field answered back as sent."""
    sample = {"rewardAggregation": "average", "modelExportFrequency": "PT3M",
              "defaultReward": 1.0, "modelRetrainDays": 2, "rewardWaitTime": "PT4H",
              "explorationPercentage": 0.3, "logRetentionDays": -1, "learningMode": "Online"}
    updated = admin.update_service_configuration(sample)
    again = admin.get_service_configuration()
    for field, value in sample.items():
        assert updated[field] == again[field] == value, field


def test_policy_get_update_reset(admin, client):
    policy = admin.get_policy()
    default_kind = policy["name"]
    assert f"--kind {default_kind}" in policy["arguments"]
    updated = admin.update_policy(
        {"name": "custom", "arguments": "--cb_explore_adf --epsilon 0.05 --kind bandit-forest "
                                        "--seed 3 --n_trees 5"}
    )
    assert updated["name"] == "custom" and "--seed 3" in updated["arguments"]
    assert admin.get_service_configuration()["explorationPercentage"] == 0.05
    assert client.rank({"actions": ACTIONS})["rewardActionId"]  # the new model serves
    with pytest.raises(HttpResponseError) as bad:
        admin.update_policy({"name": "vw", "arguments": "--cb_explore_adf --bag 5 -q GT"})
    assert bad.value.status_code == 400 and bad.value.error.code == "InvalidPolicyConfiguration"
    assert "'--bag' has no Grove counterpart" in bad.value.error.message
    assert "--epsilon" in bad.value.error.message  # says what Grove accepts
    with pytest.raises(HttpResponseError) as unknown:
        admin.update_policy({"name": "x", "arguments": "--kind nope"})
    assert "unknown policy kind" in unknown.value.error.message
    for arguments, says in (("--kind mcts-is", "ranks actions"),  # (a 200, then every rank 400)
                            ("--kind linucb --alpha", "'alpha'"),  # a flag is not a number
                            ("--kind trees --window 1e999", "'window'"),
                            ("--kind linucb --alpha 1e308", "'alpha'"),
                            # VW's learner is adf's
                            ("--kind trees -q GT", "--kind trees has no such setting"),
                            ("-q GT --cb_type ipx", "cb_type"), ("-q GTX", "two characters")):
        with pytest.raises(HttpResponseError) as refused:
            admin.update_policy({"name": "x", "arguments": arguments})
        assert refused.value.status_code == 400 and says in refused.value.error.message, arguments
    reset = admin.reset_policy()
    assert reset["name"] == default_kind


#: the policy the SDKs' own tests update a loop with (azure-sdk-for-net and -java,
#: ConfigurationsTests): what a loop tuned by Personalizer's offline evaluation looked like
SDK_SAMPLE_POLICY = ("--cb_explore_adf --quadratic GT --quadratic MR --quadratic GR --quadratic "
                     "ME --quadratic OT --quadratic OE --quadratic OR --quadratic MS --quadratic "
                     "GX --ignore A --cb_type ips --epsilon 0.2")


def test_the_sdks_sample_policy_is_taken_with_vws_meaning(admin, client, trainer):
    """Taken, and answered back as sent (the SDKs' tests check both the update's answer and a
    later read); once the floor changes, the policy is answered in Grove's terms."""
    sample = {"name": "app1", "arguments": SDK_SAMPLE_POLICY}
    assert admin.update_policy(sample) == sample
    assert admin.get_policy() == sample
    _rank_and_reward(client, 20)
    drain(trainer)
    learner = trainer.owned["news"].learner
    assert (learner.cb_type, learner.ignore, learner.epsilon) == ("ips", ["A"], 0.2)
    assert learner.interactions[:2] == ["GT", "MR"] and learner.n_learned == 20
    config = admin.get_service_configuration()
    admin.update_service_configuration({**config, "explorationPercentage": 0.1})
    now = admin.get_policy()
    for part in ("--kind adf", "--cb_type ips", "--ignore A", "-q GT", "-q GX", "--epsilon 0.1"):
        assert part in now["arguments"], now["arguments"]
    assert admin.update_policy(now) == now  # Grove's terms read back the same


def test_a_policy_without_a_floor_parameter_is_answered_as_sent_until_the_floor_moves(admin):
    sent = {"name": "t", "arguments": "--cb_explore_adf --kind trees --seed 2 --epsilon 0.3"}
    assert admin.update_policy(sent) == sent and admin.get_policy() == sent
    config = admin.get_service_configuration()
    admin.update_service_configuration({**config, "explorationPercentage": 0.1})
    now = admin.get_policy()
    assert "--kind trees" in now["arguments"] and "--epsilon 0.1" in now["arguments"], now


def test_model_export_import_reset_and_properties(admin, client, store, trainer):
    import io

    from service import codec

    _rank_and_reward(client, 20)
    drain(trainer)
    exported = b"".join(admin.export_model())
    assert codec.decode(exported)["format"] == "grove.personalizer-model"
    signed = b"".join(admin.export_model(signed=True))
    before = store.snapshot_info("news").version
    assert admin.import_model(io.BytesIO(signed)) is None
    assert store.snapshot_info("news").version == before + 1
    # the SDKs' own test: the same model exports the same bytes, an import exports back as sent
    assert signed == exported == b"".join(admin.export_model())
    assert client.rank({"actions": ACTIONS})["rewardActionId"]
    _rank_and_reward(client, 5, prefix="after")
    drain(trainer)  # the trainer's publish fails (the version moved): it drops its learner
    drain(trainer)  # ... and takes the imported model, which learns the 5 events
    assert store.snapshot_info("news").events_learned == 5
    # the 20 events before the import are the old model's: no lag (it stayed at 20 before)
    assert store.app_status("news")["trainer_lag"] == 0
    linucb = make_policy("linucb", actions=[a["id"] for a in ACTIONS])
    other_kind = codec.encode({**codec.decode(exported), "kind": "linucb", "params": {},
                               "state": linucb.to_state()})
    decoded = codec.decode(exported)
    assert "floor" in decoded["state"]["params"]
    # params the app would take (an import's become the app's) and its learner's own: checked
    # as POST /apps checks them (a reset answered 500 after ``ridge: -5`` as the file's params)
    bad_params = codec.encode({**decoded, "params": {"floor": -5.0}})
    bad_state = codec.encode({**decoded, "state": {**decoded["state"], "params": {
        **decoded["state"]["params"], "floor": 1e300}}})
    # a serving copy (what the trainer publishes for API processes) decides and cannot learn
    serving = codec.encode({**decoded, "state": model_kind("auto").dump_for_serving(
        model_kind("auto").load(decoded["state"]))})
    for payload in (b"not a model", codec.encode({"format": "other"}), bad_params, bad_state,
                    codec.encode({**codec.decode(exported), "state": {"junk": 1}}), serving,
                    other_kind):
        with pytest.raises(HttpResponseError) as bad:
            admin.import_model(io.BytesIO(payload))
        assert bad.value.status_code == 400 and bad.value.error.code == "InvalidModelImportFormat"
    assert "'linucb' model" in bad.value.error.message  # the last: a file of another kind
    assert store.snapshot_info("news").events_learned == 5  # none of them replaced the model
    assert admin.reset_model() is None
    assert store.snapshot_info("news").events_learned == 0
    assert store.app_status("news")["trainer_lag"] == 0
    properties = admin.get_model_properties()
    created, modified = (datetime.fromisoformat(properties[k]).timestamp()
                         for k in ("creationTime", "lastModifiedTime"))
    assert time.time() - 600 < created <= modified <= time.time() + 1  # the reset's model
    # both to the millisecond, so that the strings compare as their times do
    assert all(len(properties[k]) == len("2026-11-29T04:15:20.123Z")
               for k in ("creationTime", "lastModifiedTime"))


def test_logs_properties_and_delete(admin, client, store, trainer):
    assert admin.get_log_properties()["dateRange"] == {"from": None, "to": None}
    _rank_and_reward(client, 6)
    drain(trainer)
    span = admin.get_log_properties()["dateRange"]
    assert span["from"] <= span["to"]
    client.rank({"actions": ACTIONS, "eventId": "late"})
    client.reward("late", {"value": 1.0})  # joined, not learned yet: deleting keeps it
    assert admin.delete_logs() is None
    assert store.redis.xlen(keys.stream("news")) == 1
