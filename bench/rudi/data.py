"""Behaviour-sequence data sets for the RuDi bench: VEWS edits and KDD Cup 2015 MOOC days.

Each loader returns (events DataFrame, labels Series indexed by entity id, description).
The event columns are what the teacher and RuDi may see (see ../shared/data/README.md):

VEWS: the revert / ClueBot / STiki columns are the outcome of Wikipedia's anti-vandalism
process and leak the label (71% of vandal edits are reverted vs 6% of benign ones); an early
warning teacher cannot see them, so they are dropped. Per edit we keep the namespace and derive
pattern codes in the spirit of VEWS (re-edit of the previous page, first edit of a page by the
user, fast edit < 15 min after the previous one) and the log gap to the previous edit.

MOOC: one event per day (30 per enrollment): the 7 event-type counts, the weekday and whether
the day was active.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.common.paths import DATA


def _subsample(entities: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    if n is None or n >= len(entities):
        return entities
    return np.sort(np.random.default_rng(seed).choice(entities, n, replace=False))


def load_vews(n_entities: int | None = None, seed: int = 0):
    users = pd.read_csv(DATA / "vews_users.csv.gz", usecols=["user_id", "label"])
    keep = _subsample(users["user_id"].to_numpy(), n_entities, seed)
    edits = pd.read_csv(
        DATA / "vews_edits.csv.gz", usecols=["user_id", "seq", "revtime", "pagetitle", "namespace"]
    )
    edits = edits[edits["user_id"].isin(keep)].sort_values(["user_id", "seq"], kind="stable")
    stamp = pd.to_datetime(edits["revtime"], utc=True)
    t = (stamp - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    same_user = np.r_[False, edits["user_id"].to_numpy()[1:] == edits["user_id"].to_numpy()[:-1]]
    gap = np.where(same_user, np.r_[np.nan, np.diff(t)], np.nan)
    prev_page = np.r_[None, edits["pagetitle"].to_numpy()[:-1]]
    seen = edits.groupby(["user_id", "pagetitle"]).cumcount().to_numpy()
    events = pd.DataFrame(
        {
            "user_id": edits["user_id"].to_numpy(),
            "seq": edits["seq"].to_numpy(),
            "namespace": edits["namespace"].to_numpy(),
            "reedit": np.where(
                same_user & (edits["pagetitle"].to_numpy() == prev_page), "yes", "no"
            ),
            "first_on_page": np.where(seen == 0, "yes", "no"),
            "fast": np.where(gap < 900, "yes", "no"),
            "log_gap": np.log1p(np.nan_to_num(np.clip(gap, 0, None), nan=0.0)),
        }
    )
    labels = users.set_index("user_id")["label"].loc[keep]
    return events, labels, "VEWS (no revert/ClueBot/STiki columns)"


def load_mooc(n_entities: int | None = None, seed: int = 0):
    labels = pd.read_csv(DATA / "mooc_kddcup15_labels.csv.gz", usecols=["enrollment_id", "dropout"])
    keep = _subsample(labels["enrollment_id"].to_numpy(), n_entities, seed)
    days = pd.read_csv(DATA / "mooc_kddcup15_daily.csv.gz")
    days = days[days["enrollment_id"].isin(keep)].sort_values(["enrollment_id", "day"])
    counts = [c for c in days.columns if c.startswith("event_")]
    events = days[["enrollment_id", "day"] + counts].copy()
    events["weekday"] = pd.to_datetime(days["date"]).dt.day_name().to_numpy()
    events["active"] = np.where(days[counts].sum(axis=1) > 0, "yes", "no")
    labels = labels.set_index("enrollment_id")["dropout"].loc[keep]
    return events.reset_index(drop=True), labels, "KDD Cup 2015 MOOC (31 courses)"


LOADERS = {"vews": (load_vews, "user_id", "seq"), "mooc": (load_mooc, "enrollment_id", "day")}
