"""Personalizer's learning settings as Grove reads them: the policies its clients were given."""

from __future__ import annotations

import pytest

from service.personalizer.learning_settings import LearningSettingsError, parse, render

# (where each comes from, the arguments, what adf takes from them)
GIVEN = [
    ("Personalizer's default (its reset)",
     "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::",
     {"power_t": 0, "learning_rate": 0.001, "cb_type": "mtr", "interactions": ["::"]}),
    ("microsoft/learning-loop's deployment",
     "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type ips -q ::",
     {"power_t": 0, "learning_rate": 0.001, "cb_type": "ips", "interactions": ["::"]}),
    ("the SDKs' policy update test",
     "--cb_explore_adf --quadratic GT --quadratic MR --ignore A --cb_type ips --epsilon 0.2",
     {"interactions": ["GT", "MR"], "ignore": ["A"], "cb_type": "ips"}),
    ("VW's doubly robust cb_type with Personalizer's other defaults",
     "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type dr -q ::",
     {"power_t": 0, "learning_rate": 0.001, "cb_type": "dr", "interactions": ["::"]}),
    ("the SDKs' evaluation test",
     "--cb_explore_adf --epsilon 0.2 --dsjson --cb_type ips -l 0.5 --l1 1E-07 --power_t 0.5",
     {"cb_type": "ips", "learning_rate": 0.5, "l1": 1e-07, "power_t": 0.5}),
    ("VW's clipped importance weights",
     "--cb_explore_adf --epsilon 0.2 --cb_type mtr --clip_p 0.05",
     {"cb_type": "mtr", "clip_p": 0.05}),
]


@pytest.mark.parametrize("source, arguments, params", GIVEN, ids=[g[0] for g in GIVEN])
def test_personalizers_policies_are_adf_with_vws_meaning(source, arguments, params):
    settings = parse(arguments, "auto")
    assert (settings.kind, settings.params, settings.exploration) == ("adf", params, 0.2)
    again = parse(render(settings.kind, settings.params, settings.exploration), "auto")
    assert (again.kind, again.params, again.exploration) == ("adf", params, 0.2)


def test_options_that_change_nothing_in_grove_are_taken():
    plain = parse("--cb_explore_adf --epsilon 0.2 -l 0.5", "auto")
    more = parse("--cb_explore_adf --epsilon 0.2 -l 0.5 --dsjson --save_resume "
                 "--preserve_performance_counters --quiet", "auto")
    assert more == plain
    with pytest.raises(LearningSettingsError, match="'--l2' has no Grove counterpart"):
        parse("--cb_explore_adf --l2 1e-6", "auto")
