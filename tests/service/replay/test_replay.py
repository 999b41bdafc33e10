"""`grove replay`: sources, estimates, bad input, and end-to-end runs against a real
`grove serve`."""

from __future__ import annotations

import copy
import gzip
import json
import signal
import subprocess
import sys

import httpx
import numpy as np
import pandas as pd
import pytest

from service.cli import main, parser
from service.redis_server import free_port
from service.replay.command import execute
from service.replay.policies import Choice, InProcessForest
from service.replay.sources import supervised_stream
from tests.helpers.processes import REPO, service_env, spawn, wait_until
from tests.helpers.replay_data import write_flag_labeled, write_labeled, write_obd, write_plain

PNG = b"\x89PNG\r\n\x1a\n"


def replay(*args: str) -> int:
    return main(["replay", "--no-progress", *map(str, args)])


def read(path) -> dict:
    return json.loads(path.read_text())


def by_label(summary: dict) -> dict:
    return {p["label"]: p for p in summary["policies"]}


def test_uniform_replay_on_uniform_obd_logs_matches_the_logged_mean(tmp_path, capsys):
    data, out = tmp_path / "all.csv", tmp_path / "summary.json"
    frame = write_obd(data, n=3000, n_items=4)
    code = replay("--in-process", "--data", data, "--format", "obd",
                  "--policy", "uniform", "--policy", "best-fixed", "--out", out)
    assert code == 0
    summary = read(out)
    logged = frame["click"].mean()
    assert summary["reference"]["value"] == pytest.approx(logged)
    uniform = by_label(summary)["uniform"]
    est = uniform["average_reward"]  # the replay method
    assert est["low"] <= logged <= est["high"]
    assert uniform["matched"] == est["n"] and abs(est["n"] - 750) < 100
    # pi = mu = 1/4 for every event: IPS and SNIPS are exactly the logged mean
    assert uniform["estimates"]["ips"]["value"] == pytest.approx(logged)
    assert uniform["estimates"]["snips"]["value"] == pytest.approx(logged)
    lo, hi = uniform["estimates"]["dr"]["low"], uniform["estimates"]["dr"]["high"]
    assert lo <= logged <= hi
    best = by_label(summary)["best-fixed"]
    assert best["fixed_action"] in {"0", "1", "2", "3"}
    assert best["matched"] == int((frame["item_id"] == int(best["fixed_action"])).sum())
    table = capsys.readouterr().out
    assert "SNIPS" in table and "reference: logging policy" in table


def test_plain_logs_with_a_forest_in_process_write_json_and_png(tmp_path):
    data, out, png = tmp_path / "logs.csv", tmp_path / "s.json", tmp_path / "c.png"
    write_plain(data, n=300)
    code = replay("--in-process", "--data", data, "--format", "plain", "--sync-every", "50",
                  "--policy", "forest:n_trees=5,warmup=30,max_depth=2", "--policy", "uniform",
                  "--out", out, "--plot", png)
    assert code == 0 and png.read_bytes().startswith(PNG)
    forest = by_label(read(out))["forest:n_trees=5,warmup=30,max_depth=2"]
    assert forest["params"]["n_trees"] == 5 and "seed" in forest["params"]
    assert 0 < forest["matched"] < 300
    for name in ("replay", "ips", "snips", "dr"):
        e = forest["estimates"][name]
        assert e["low"] <= e["value"] <= e["high"]


def test_plain_layout_with_other_column_names_and_non_uniform_logging(tmp_path, capsys):
    data, out = tmp_path / "logs.csv", tmp_path / "s.json"
    frame = write_plain(data, n=200)
    frame["probability"] = np.where(frame["action"] == "ad0", 0.5, 0.25)
    frame.rename(columns={"action": "ad", "reward": "clicked", "probability": "p"}).to_csv(
        data, index=False)
    assert replay("--in-process", "--data", data, "--format", "plain", "--action-column", "ad",
                  "--reward-column", "clicked", "--propensity-column", "p",
                  "--policy", "uniform", "--out", out) == 0
    summary = read(out)
    assert summary["source"]["actions"] == ["ad0", "ad1", "ad2"]
    assert summary["source"]["uniform_logging"] is False
    assert "replay method (avg reward) is biased" in capsys.readouterr().out
    ips_value = by_label(summary)["uniform"]["estimates"]["ips"]["value"]
    w = (1 / 3) / np.where(frame["action"] == "ad0", 0.5, 0.25)
    assert ips_value == pytest.approx(float((w * frame["reward"]).mean()))


def _without_timing(summary: dict) -> dict:
    summary = copy.deepcopy(summary)
    summary.pop("run")
    for p in summary["policies"]:
        p.pop("timing")
        p.pop("app", None)
    return summary


def test_supervised_stream_is_reproducible_for_a_seed(tmp_path):
    data = tmp_path / "labeled.csv"
    write_labeled(data)
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        out = tmp_path / f"{name}.json"
        assert replay("--in-process", "--data", data, "--label", "class", "--steps", 400,
                      "--seed", seed, "--sync-every", 100, "--policy", "forest:n_trees=5,warmup=50",
                      "--policy", "uniform", "--policy", "best-fixed", "--out", out) == 0
        runs[name] = read(out)
    assert _without_timing(runs["a"]) == _without_timing(runs["b"])
    assert runs["a"]["source"]["fingerprint"] != runs["c"]["source"]["fingerprint"]
    source = runs["a"]["source"]
    assert source["actions"] == ["A", "B", "C"] and source["steps"] == 400
    # x -> 5 bins, flag stays one variable, color -> 3 categories
    assert source["binary_variables"] == 9
    policies = by_label(runs["a"])
    assert policies["best-fixed"]["fixed_action"] == "A"  # flag == 1 in half the rows
    assert policies["uniform"]["expected_reward"]["value"] == pytest.approx(1 / 3)


BAD = "grove replay: error: "


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("missing-propensity", "missing column 'propensity_score'"),
        ("zero-propensity", "propensities must be in (0, 1]"),
        ("big-propensity", "propensities must be in (0, 1]"),
        ("text-propensity", "must hold finite numbers"),
        ("empty", "the file is empty"),
        ("header-only", "no data rows"),
        ("directory", "is a directory"),
        ("no-file", "no such file"),
        ("garbage-gz", "cannot read it as CSV"),
        ("missing-label", "no label column 'class'"),
        ("plain-missing-action", "missing column 'action'"),
        ("label-and-format", "not both or neither"),
        ("bad-noise", "--noise must be in [0, 1]"),
        ("bad-policy", "unknown policy 'greedy'"),
        ("bad-forest-params", "invalid forest params"),
        ("http-without-key", "give the app's --key"),
        ("out-dir-missing", "does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, case, needle):
    obd = tmp_path / "obd.csv"
    frame = write_obd(obd, n=20)
    plain = tmp_path / "plain.csv"
    write_plain(plain, n=20)
    labeled = tmp_path / "labeled.csv"
    write_labeled(labeled, n=20)
    logs = ["--in-process", "--format", "obd", "--data"]

    def variant(change) -> str:
        f = frame.copy()
        change(f)
        path = tmp_path / "variant.csv"
        f.to_csv(path)
        return str(path)

    def set_cell(row: int, value):
        return lambda f: f.__setitem__("propensity_score",
                                       f["propensity_score"].where(f.index != row, value))

    labeled_run = ["--in-process", "--data", labeled, "--label", "class"]
    args = {
        "missing-propensity": lambda: [*logs, variant(lambda f: f.pop("propensity_score"))],
        "zero-propensity": lambda: [*logs, variant(set_cell(3, 0.0))],
        "big-propensity": lambda: [*logs, variant(set_cell(5, 1.5))],
        "text-propensity": lambda: [*logs, variant(set_cell(2, "high"))],
        "empty": lambda: [*logs, _write(tmp_path / "empty.csv", b"")],
        "header-only": lambda: [*logs, _write(tmp_path / "head.csv", obd.read_text()
                                              .splitlines()[0].encode() + b"\n")],
        "directory": lambda: [*logs, tmp_path],
        "no-file": lambda: [*logs, tmp_path / "nope.csv"],
        "garbage-gz": lambda: [*logs, _write(tmp_path / "bad.csv.gz", b"not gzip at all")],
        "missing-label": lambda: ["--in-process", "--data", plain, "--label", "class"],
        "plain-missing-action": lambda: [
            "--in-process", "--format", "plain", "--data",
            _write(tmp_path / "p.csv", plain.read_bytes().replace(b"action", b"act"))],
        "label-and-format": lambda: [*labeled_run, "--format", "plain"],
        "bad-noise": lambda: [*labeled_run, "--noise", "2"],
        "bad-policy": lambda: [*labeled_run, "--policy", "greedy"],
        "bad-forest-params": lambda: [*labeled_run, "--policy", "forest:n_trees=0"],
        "http-without-key": lambda: ["--url", "http://127.0.0.1:9", "--app", "x", "--data",
                                     labeled, "--label", "class"],
        "out-dir-missing": lambda: [*labeled_run, "--out", tmp_path / "no" / "s.json"],
    }[case]()
    assert replay(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(BAD) and needle in err[0], err


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_the_command_never_shows_a_traceback(tmp_path):
    """The real `grove replay` process: bad input and an unreachable service."""
    empty = _write(tmp_path / "empty.csv.gz", gzip.compress(b""))
    labeled = tmp_path / "labeled.csv"
    write_labeled(labeled, n=20)
    cases = [
        (["--in-process", "--data", empty, "--format", "obd"], 2, "the file is empty"),
        (["--url", f"http://127.0.0.1:{free_port()}", "--app", "x", "--key", "k", "--data",
          str(labeled), "--label", "class"], 1, "service error: GET"),
    ]
    for args, code, needle in cases:
        done = subprocess.run([sys.executable, "-m", "service.cli", "replay", *args], cwd=REPO,
                              env=service_env(None), capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and needle in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# -- end to end against a real `grove serve` ----------------------------------------------------
DECIDE_SEED = 11  # the served snapshots draw as `--in-process --decide-seed 11` does


@pytest.fixture(scope="module")
def grove(tmp_path_factory):
    """`grove serve` (embedded redis-server, API, trainer) on a free port; yields (url, admin
    key)."""
    root = tmp_path_factory.mktemp("grove")
    data, log, port = root / "data", root / "serve.log", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = spawn(["-m", "service.cli", "serve", "--port", str(port), "--data-dir", str(data)],
                 service_env(None, GROVE_DECIDE_SEED=str(DECIDE_SEED)), log)

    def ready() -> bool:
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, proc, log, timeout=60, what="grove serve")
        yield url, (data / "admin-key").read_text().strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


FOREST = "forest:n_trees=5"  # default warmup (200) > the steps below: the forest draws uniformly


@pytest.mark.slow
def test_http_run_writes_json_and_png_and_matches_the_in_process_run(tmp_path, grove):
    url, admin = grove
    data = tmp_path / "labeled.csv"
    write_labeled(data)
    common = ["--data", data, "--label", "class", "--steps", 90, "--seed", 7, "--sync-every", 30,
              "--policy", FOREST, "--policy", "uniform", "--policy", "best-fixed"]
    http_out, png = tmp_path / "http.json", tmp_path / "curves.png"
    assert replay("--url", url, "--app", "replay-e2e", "--create", "--admin-key", admin,
                  *common, "--out", http_out, "--plot", png) == 0
    assert png.read_bytes().startswith(PNG)
    local_out = tmp_path / "local.json"
    assert replay("--in-process", *common, "--out", local_out) == 0
    over_http, local = read(http_out), read(local_out)

    forest = by_label(over_http)[FOREST]
    assert forest["app"] == "replay-e2e" and over_http["run"]["driver"] == "http"
    assert forest["timing"]["decide_ms_p50"] > 0
    assert forest["timing"]["decide_ms_p99"] >= forest["timing"]["decide_ms_p50"]
    app = httpx.get(f"{url}/apps/replay-e2e", headers={"Authorization": f"Bearer {admin}"}).json()
    assert app["eventsLearned"] == 90 and app["policy"]["params"] == forest["params"]

    # Same seed, same summary: stream, baselines, the forest's params and its decision
    # probabilities (uniform during warmup) are identical. The forest's realized reward is not:
    # the service draws its exploration from each API process's own generator (by design).
    a, b = _without_timing(over_http), _without_timing(local)
    for p in (*a["policies"], *b["policies"]):
        if p["label"] == FOREST:
            for key in ("average_reward", "lift", "cumulative_reward", "regret",
                        "regret_vs_best_fixed"):
                p.pop(key)
    assert a == b
    assert by_label(a)[FOREST]["expected_reward"]["value"] == pytest.approx(1 / 3)


#: a forest that exploits write_flag_labeled's data after 120-320 steps (in-process, 60 seeds).
#: Not max_depth=1 alone: once every stump of such a forest is a leaf, its state does not restore
#: (ForestStorage.from_state infers the variable count from zero live slots) and decide says 503.
LEARNER = "forest:n_trees=4,warmup=30,max_depth=[1,2],delta=0.9,epsilon=1.0"


@pytest.mark.slow
def test_http_forest_decides_with_the_model_the_in_process_driver_learns(tmp_path, grove):
    """Over HTTP, block by block, the served model is the in-process learner's: fed the actions
    the service drew, the in-process forest gives every decision the same probabilities."""
    url, admin = grove
    data = tmp_path / "flag.csv"
    write_flag_labeled(data)
    steps, block = 400, 40
    args = parser().parse_args([
        "replay", "--no-progress", "--url", url, "--app", "replay-model", "--create",
        "--admin-key", admin, "--data", str(data), "--label", "class", "--steps", str(steps),
        "--seed", "5", "--sync-every", str(block), "--policy", LEARNER])
    summary, result = execute(args, record=True)
    served = result.traces[0].choices
    assert len(served) == steps
    assert sum(max(p.values()) > 0.55 for _, p in served) >= 10  # it learned and exploits

    params = by_label(summary)[LEARNER]["params"]
    local = InProcessForest("local", params, ["A", "B"], (0.0, 1.0), sync_every=block)
    stream = supervised_stream(data, "class", noise=0.05, seed=5)
    for t, (context, label) in enumerate(stream.steps(steps)):
        action, probabilities = served[t]
        mine = local.decide(context, ["A", "B"])
        assert mine.probabilities == pytest.approx(probabilities, abs=1e-12), t
        played = Choice(action, probabilities[action], probabilities)
        local.learn(played, context, 1.0 if action == label else 0.0)
        if (t + 1) % block == 0:
            local.sync()


@pytest.mark.slow
def test_http_replay_of_logged_feedback_learns_only_matched_events(tmp_path, grove):
    url, admin = grove
    data, out = tmp_path / "logs.csv", tmp_path / "s.json"
    write_plain(data, n=90)
    assert replay("--url", url, "--app", "replay-logs", "--create", "--admin-key", admin,
                  "--data", data, "--format", "plain", "--sync-every", 45,
                  "--policy", FOREST, "--policy", "uniform", "--out", out) == 0
    forest = by_label(read(out))[FOREST]
    app = httpx.get(f"{url}/apps/replay-logs", headers={"Authorization": f"Bearer {admin}"})
    # unmatched decisions were deferred and never activated: the trainer learned the others only
    assert app.json()["eventsLearned"] == forest["matched"] > 0
    assert np.isfinite(forest["estimates"]["dr"]["value"])


@pytest.mark.slow
def test_with_a_decide_seed_http_and_in_process_give_the_same_results(tmp_path, grove):
    """GROVE_DECIDE_SEED on the server and --decide-seed in-process: the same draws, so the
    forest's realized rewards (not only its probabilities) are the same over HTTP."""
    url, admin = grove
    data = tmp_path / "flag.csv"
    write_flag_labeled(data)
    common = ["--data", data, "--label", "class", "--steps", 300, "--seed", 5, "--sync-every", 30,
              "--policy", LEARNER, "--policy", "uniform"]
    http_out, local_out = tmp_path / "http.json", tmp_path / "local.json"
    assert replay("--url", url, "--app", "replay-seeded", "--create", "--admin-key", admin,
                  *common, "--out", http_out) == 0
    assert replay("--in-process", "--decide-seed", DECIDE_SEED, *common, "--out", local_out) == 0
    over_http, local = _without_timing(read(http_out)), _without_timing(read(local_out))
    forest = by_label(local)[LEARNER]
    assert forest["average_reward"]["value"] > 0.6  # it explored, then exploited
    assert over_http == local


def write_favorite_labeled(path, n: int = 500, seed: int = 4):
    """The five-action problem as a labeled CSV: the label is the context's favourite."""
    rng = np.random.default_rng(seed)
    favorite = rng.choice([f"a{i}" for i in range(5)], size=n)
    frame = pd.DataFrame({"favorite": favorite, "device": rng.choice(["pc", "phone"], size=n),
                          "class": favorite})
    frame.to_csv(path, index=False)
    return frame


AUTO = ('auto:candidates=[{"kind":"bandit-forest","params":{"n_trees":5}},{"kind":"linucb"}],'
        'min_events=200')
AUTO_KEYS = {"name", "kind", "estimate", "lower", "upper", "events", "serving"}


def _check_auto_figures(auto: dict, steps: int) -> None:
    assert auto["kind"] == "auto" and auto["serving"] == "linucb"
    assert [c["name"] for c in auto["candidates"]] == ["bandit-forest", "linucb"]
    for c in auto["candidates"]:
        assert set(c) == AUTO_KEYS and c["events"] == steps
        # for a candidate that learns, lower bounds the best value it has had and upper the
        # worst (online/confidence.py): LinUCB's band may be inverted and miss its average
        assert 0.0 <= c["lower"] <= 1.0 and 0.0 <= c["upper"] <= 1.0
        assert c["serving"] == (c["name"] == "linucb")
    [switch] = auto["switches"]
    assert (switch["from"], switch["to"], switch["reason"]) == ("bandit-forest", "linucb",
                                                                "evaluation")
    assert 200 <= switch["at"] < steps
    both = switch["estimates"]
    assert both["linucb"]["lower"] > both["bandit-forest"]["upper"]
    events = [h["events"] for h in auto["history"]]
    assert events == sorted(events) and events[-1] == steps and len(events) >= 5
    assert all({c["name"] for c in h["candidates"]} == {"bandit-forest", "linucb"}
               for h in auto["history"])


def test_an_auto_policy_in_process_reports_its_candidates_and_switches(tmp_path, capsys):
    data, out, png = tmp_path / "fav.csv", tmp_path / "s.json", tmp_path / "curves.png"
    write_favorite_labeled(data)
    code = replay("--in-process", "--data", data, "--label", "class", "--steps", 2000,
                  "--sync-every", 100, "--policy", AUTO, "--policy", "uniform",
                  "--out", out, "--plot", png)
    assert code == 0
    auto = by_label(read(out))[AUTO]
    _check_auto_figures(auto, 2000)
    assert auto["params"]["min_events"] == 200 and "seed" in auto["params"]
    assert auto["average_reward"]["value"] > 0.6  # LinUCB served most of the run
    printed = capsys.readouterr().out
    assert "candidates (serving: linucb)" in printed
    assert "switch at event" in printed and "bandit-forest -> linucb" in printed
    assert png.read_bytes().startswith(PNG)
    assert (tmp_path / "curves-candidates.png").read_bytes().startswith(PNG)
    assert f"candidates plot: {tmp_path / 'curves-candidates.png'}" in printed


def test_an_auto_policy_learning_event_by_event_notes_its_figures(tmp_path):
    data, out = tmp_path / "fav.csv", tmp_path / "s.json"
    write_favorite_labeled(data)
    assert replay("--in-process", "--data", data, "--label", "class", "--steps", 2500,
                  "--sync-every", 0, "--policy", AUTO, "--out", out) == 0
    _check_auto_figures(by_label(read(out))[AUTO], 2500)


def test_auto_params_are_checked_before_the_run(tmp_path, capsys):
    data = tmp_path / "fav.csv"
    write_favorite_labeled(data, n=20)
    code = replay("--in-process", "--data", data, "--label", "class", "--steps", 10,
                  "--policy", 'auto:candidates=[{"kind":"nope"}]')
    err = capsys.readouterr().err
    assert code == 2 and "invalid auto params" in err and "nope" in err
    assert replay("--in-process", "--data", data, "--label", "class", "--policy",
                  "uniform:x=1") == 2


@pytest.mark.slow
def test_http_auto_app_reports_the_figures_of_the_in_process_run(tmp_path, grove):
    """An auto app over HTTP (--create), block by block and with the server's decide seed: the
    same figures as in-process, up to the trainer's batching. Not equal: the trainer learns the
    rewards of a block in batches as they arrive and each batch's probabilities are taken at
    its start (the in-process driver learns a block at once), so the estimates, and with them
    the block in which the switch happens and the decisions after it, may differ a little."""
    url, admin = grove
    data = tmp_path / "fav.csv"
    write_favorite_labeled(data)
    common = ["--data", data, "--label", "class", "--steps", 1500, "--seed", 5,
              "--sync-every", 100, "--policy", AUTO]
    http_out, local_out = tmp_path / "http.json", tmp_path / "local.json"
    assert replay("--url", url, "--app", "replay-auto", "--create", "--admin-key", admin,
                  *common, "--out", http_out, "--plot", tmp_path / "c.png") == 0
    assert (tmp_path / "c-candidates.png").read_bytes().startswith(PNG)
    assert replay("--in-process", "--decide-seed", DECIDE_SEED, *common, "--out", local_out) == 0
    over_http, local = by_label(read(http_out))[AUTO], by_label(read(local_out))[AUTO]
    _check_auto_figures(over_http, 1500)
    assert over_http["app"] == "replay-auto"
    assert over_http["average_reward"]["value"] == pytest.approx(
        local["average_reward"]["value"], abs=0.1)
    assert [(w["from"], w["to"]) for w in over_http["switches"]] == [
        (w["from"], w["to"]) for w in local["switches"]]
    for a, b in zip(over_http["candidates"], local["candidates"], strict=True):
        assert (a["name"], a["events"], a["serving"]) == (b["name"], b["events"], b["serving"])
        assert a["estimate"] == pytest.approx(b["estimate"], abs=0.05)
