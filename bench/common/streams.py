"""Supervised-to-bandit streams, as in the Bandit Forest paper (Féraud et al. 2016, sec. 5).

A labeled data set becomes a contextual-bandit stream:

1. recode every variable into binary variables, on the whole data set (as the paper did):
   a continuous variable into 5 equal-frequency bins (one binary variable per bin), a
   categorical variable into disjunctive (one-hot) binary variables;
2. shuffle the rows and play them in a loop;
3. at each step flip each binary variable with probability 0.05 (so that every context-reward
   vector comes from a stationary random process, not a replay);
4. the class label is the best action: reward 1 when the played action equals the label, else 0.

Generation is vectorized: ``BanditStream.chunks(n)`` yields ``(X, labels)`` blocks (numpy uint8
rows, int labels), and ``BanditStream.steps(n)`` yields one ``(context_dict, row, label)`` per
step for the policies that take dicts. The same seed gives the same stream, and a shorter run
is a prefix of a longer one.

Choices where the paper is silent or ambiguous
----------------------------------------------
- "Continuous" means a numeric column with more than two distinct values; a numeric column with
  only the values 0 and 1 stays one binary variable; every non-numeric column is categorical.
- Equal-frequency cut points are the 20/40/60/80 % quantiles of the whole column; a value v goes
  to bin j when edge[j-1] < v <= edge[j] (right-closed, like ``pandas.cut``). With heavy ties
  (Adult's capital-gain is 0 in 92 % of the rows) several edges coincide, so some bins are empty;
  empty (constant-zero) binary variables are dropped, which leaves "zero" vs "positive" there.
- Rows are shuffled once (seeded) and the same order is replayed in each loop; the noise makes
  each loop different. Adult: rows with ``?`` in any column are dropped (45,222 rows remain) and
  the ``split`` helper column is not a variable; ``income`` is a context variable.
- The noise flips one-hot variables independently too, so a noisy context may have zero or two
  ones in a group: the paper flips "each binary variable".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common.paths import DATA

# the recoding is the one `grove replay` uses: one implementation
from service.replay.sources import Recoded, equal_frequency_codes, recode  # noqa: F401

# the shared data sets: ../shared/data or $GROVE_BENCH_DATA (bench/common/paths.py)
DATA_DIR = DATA

# name -> (file, target column, columns that are not variables, drop rows holding this marker)
DATASETS = {
    "adult": ("adult.csv.gz", "occupation", ("split",), "?"),
    "letter": ("letter.csv.gz", "lettr", (), None),
    "shuttle": ("shuttle.csv.gz", "Class", (), None),
}


def load(name: str, data_dir: Path | str | None = None) -> Recoded:
    """Load and recode one of ``DATASETS`` (adult, letter, shuttle)."""
    if name == "synthetic":
        return synthetic()
    file, target, drop, missing = DATASETS[name]
    frame = pd.read_csv(Path(data_dir or DATA_DIR) / file)
    frame = frame.drop(columns=list(drop))
    if missing is not None:
        frame = frame[~(frame.astype(str) == missing).any(axis=1)].reset_index(drop=True)
    return recode(frame, target, name=name)


def synthetic(
    n_rows: int = 50_000, n_features: int = 100, n_actions: int = 7, seed: int = 0
) -> Recoded:
    """A ``n_features``-variable stream whose label is a depth-3 tree on variables 0, 1, 2
    (10 % of labels replaced at random): for the speed benchmark at the issue's size."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n_rows, n_features)) < 0.5).astype(np.uint8)
    leaf = 4 * X[:, 0] + 2 * X[:, 1] + X[:, 2]
    y = (leaf % n_actions).astype(np.int64)
    noisy = rng.random(n_rows) < 0.1
    y[noisy] = rng.integers(n_actions, size=int(noisy.sum()))
    return Recoded(
        X, y, [f"v{j}" for j in range(n_features)], [f"k{a}" for a in range(n_actions)], "synthetic"
    )


def reward(action: int, label: int) -> float:
    """Sec. 5: reward 1 when the chosen action corresponds to the class label, 0 otherwise."""
    return 1.0 if action == label else 0.0


class BanditStream:
    """Rows of a ``Recoded`` data set, shuffled, played in a loop, each binary variable flipped
    with probability ``noise`` at each step.

    >>> data = Recoded(np.eye(3, dtype=np.uint8), np.arange(3), ["a", "b", "c"], ["x", "y", "z"])
    >>> stream = BanditStream(data, noise=0.0, seed=1, chunk_size=2)
    >>> [(x, label) for x, _, label in stream.steps(4)]
    [({'a': 1, 'b': 0, 'c': 0}, 0), ({'a': 0, 'b': 1, 'c': 0}, 1),
     ({'a': 0, 'b': 0, 'c': 1}, 2), ({'a': 1, 'b': 0, 'c': 0}, 0)]
    """

    def __init__(self, data: Recoded, noise: float = 0.05, seed: int = 0, chunk_size: int = 4096):
        self.data = data
        self.noise = noise
        self.seed = seed
        self.chunk_size = chunk_size

    @property
    def n_features(self) -> int:
        return self.data.X.shape[1]

    @property
    def n_actions(self) -> int:
        return len(self.data.actions)

    @property
    def actions(self) -> list[str]:
        return self.data.actions

    @property
    def feature_names(self) -> list[str]:
        return self.data.feature_names

    def chunks(self, n_steps: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(X, labels)`` blocks of at most ``chunk_size`` steps, ``n_steps`` in all."""
        rng = np.random.default_rng(self.seed)
        n = len(self.data.y)
        order = rng.permutation(n)
        start = 0
        while start < n_steps:
            # always draw a full chunk so that a shorter run is a prefix of a longer one
            idx = order[(start + np.arange(self.chunk_size)) % n]
            flips = rng.random((self.chunk_size, self.n_features), dtype=np.float32) < self.noise
            X = self.data.X[idx] ^ flips.view(np.uint8)
            m = min(self.chunk_size, n_steps - start)
            yield X[:m], self.data.y[idx[:m]]
            start += m

    def steps(self, n_steps: int) -> Iterator[tuple[dict[str, int], np.ndarray, int]]:
        """Yield ``(context dict var -> 0/1, numpy row, label index)`` for each step."""
        names = self.feature_names
        for X, y in self.chunks(n_steps):
            for row, rowlist, label in zip(X, X.tolist(), y.tolist()):
                yield dict(zip(names, rowlist)), row, label
