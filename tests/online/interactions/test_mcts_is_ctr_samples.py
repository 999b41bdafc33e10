"""MCTS-IS on the real CTR samples in ../shared/data (issue 6: "use them for format tests").

Avazu (999 rows, 22 hashed string fields besides the row id) and Criteo (200 rows, 13 integer
counts with missing values and 26 hashed categoricals) are far too small for figures; here
they check that real ad-serving records go through ``MCTSInteractions`` as they come from
pandas: string and integer values, NaN for missing, many unseen categories at predict time.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from online import MCTSInteractions
from service import codec
from tests.helpers.shared_data import shared_file


def sample(name: str) -> tuple[pd.DataFrame, np.ndarray]:
    file = shared_file(f"{name}_sample.csv.gz")
    if name == "avazu":  # every column a hashed string; "id" is unique per row, not a field
        frame = pd.read_csv(file, dtype=str).drop(columns=["id"])
        return frame.drop(columns=["click"]), frame["click"].astype(int).to_numpy()
    frame = pd.read_csv(file)  # I1..I13 integer counts (NaN = missing), C1..C26 strings
    return frame.drop(columns=["label"]), frame["label"].to_numpy()


def fields_and_values(frame: pd.DataFrame) -> dict[str, set]:
    return {c: {None if pd.isna(v) else str(v) for v in frame[c]} for c in frame.columns}


@pytest.mark.parametrize("name", ["avazu", "criteo"])
def test_real_ctr_records_learn_predict_explain_and_round_trip(name):
    X, y = sample(name)
    train, test = X.iloc[: len(X) * 3 // 4], X.iloc[len(X) * 3 // 4 :]
    model = MCTSInteractions(seed=0, max_nodes=50_000)
    model.learn_many(train, y[: len(train)])
    assert model.n_nodes["data_nodes"] > len(X.columns)

    # predictions on held-out records (most hashed ids unseen): probabilities, and a record
    # with NaN predicts as the same record without those keys (NaN is the missing category)
    records = test.to_dict("records")
    probs = [model.predict_proba_one(x)[True] for x in records]
    assert all(0.0 <= p <= 1.0 for p in probs)
    if name == "criteo":
        with_nan = next(x for x in records if any(isinstance(v, float) and math.isnan(v)
                                                  for v in x.values()))
        without = {k: v for k, v in with_nan.items()
                   if not (isinstance(v, float) and math.isnan(v))}
        assert model.predict_proba_one(with_nan) == model.predict_proba_one(without)

    # the explanations name real fields and values of the data
    seen = fields_and_values(train)
    found = model.interactions(top=10)
    assert found
    for item in found:
        assert 0 < item["support"] <= 1 and 0 <= item["mean"] <= 1
        for field, value in item["terms"].items():
            assert field in seen and (value is None or str(value) in seen[field]
                                      or value == "<other>"), item
    for tree in model.trees():
        assert tree["root"] in seen

    # state and serving copy through the store's codec (msgpack + raw arrays, no pickle, no
    # object arrays): the restored models answer the same
    restored = MCTSInteractions.from_state(codec.decode(codec.encode(model.to_state())))
    serving = MCTSInteractions.from_state(
        codec.decode(codec.encode(model.to_state(statistics=False))))
    for x in records[:50]:
        expected = model.predict_proba_one(x)
        assert restored.predict_proba_one(x) == expected
        assert serving.predict_proba_one(x) == expected
        assert restored.transform_one(x) == model.transform_one(x)
