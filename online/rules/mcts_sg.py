"""MCTS-SG: statistics generation by Monte Carlo tree search (sec. 3.2, Algorithms 1 and 2).

Algorithm 1 builds K statistics one operator at a time: for each position d <= D a fresh search
tree rooted at the partial statistic S is grown for ``n_simulations`` iterations (Algorithm 2),
the best child of the root by mean reward (eq. 6) fixes the next operator, and once S is a
valid statistic it is marked invalid (V <- V \\ {S}) and the target is residualised on all the
statistics found so far (eq. 7), so the next search maximises a partial correlation (eqs. 8-9).

Choices where the paper is silent or ambiguous
----------------------------------------------
- The root's visit count is incremented with its children's (Algorithm 2 stops the
  backpropagation at the root, but eq. 2 at the root needs ln C(v_0)).
- Untried operators are expanded in a random order; an operator counts as valid (and a node as
  not fully expanded) only if some completion of it is a valid, not yet invalidated statistic.
- The random completion (eq. 3) draws each next operator uniformly among those valid ones.
- A statistic whose batch values (or target) are constant gets reward 0 (corr is undefined).
  Eq. 5/9 (multiple correlation, least squares with intercept) is used whenever the statistic
  has more than one dimension (a categorical Select); eq. 4/8 otherwise.
- Each simulation draws a fresh batch of B entities without replacement (all entities if
  N < B). Eq. 7 is solved by least squares with an intercept on all N entities.
- Ties in eq. 6 go to the first child created.
- Eq. 6 (and the exploitation term of eq. 2) use the *mean* reward Q(v)/C(v), as the paper
  writes it, not the best reward seen below a child. On deceptive spaces this prefers a Select
  whose random completions are all fair over one whose few completions are the best (see the
  recovery test in tests/online/rules/test_rudi.py); more simulations reduce it only slowly.
- Eq. 5/9 as written favours statistics of many dimensions (by about sqrt(p / B) with no
  signal). ``adjusted=True`` (off by default, not the paper) uses the adjusted R^2 instead;
  bench/rudi/reward_bias.py measures both.

Checked against the paper, equation by equation: eq. 2 (UCT, c = 1/sqrt(2), ln of the parent's
visits), Algorithm 2's expansion of one untried valid operator, eq. 3 (uniform random
completion to a valid statistic), eqs. 4-5 (|corr| or multiple correlation on a fresh batch
of B entities), eq. 6 (mean reward of the root's children), eq. 7 (OLS with intercept of y on
all chosen statistics, on all N), eqs. 8-9 (rewards against the residual, statistic values not
residualised), and V <- V \\ {S_k} (also excluded from completions). Table 2's B = 128 and 500
simulations per tree are the defaults.
"""

from __future__ import annotations

import math
import time

import numpy as np

from online.rules.events import EventTable
from online.rules.operators import Grammar

UCT_C = 1 / math.sqrt(2)  # exploration constant of eq. 2


def abs_corr(x: np.ndarray, y: np.ndarray) -> float:
    """|Pearson correlation| (eq. 4), 0 when either side is constant."""
    xc, yc = x - x.mean(), y - y.mean()
    den = math.sqrt(float(xc @ xc) * float(yc @ yc))
    return 0.0 if den <= 1e-12 else abs(float(xc @ yc)) / den


def multiple_corr(X: np.ndarray, y: np.ndarray) -> float:
    """Coefficient of multiple correlation (eq. 5): |corr(fitted, y)| of OLS with intercept."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.shape[1] == 1:
        return abs_corr(X[:, 0], y)
    A = np.column_stack([np.ones(len(y)), X])
    beta, *_ = np.linalg.lstsq(A, y, rcond=None)
    return abs_corr(A @ beta, y)


def residualise(y: np.ndarray, Xs: list[np.ndarray]) -> np.ndarray:
    """Eq. 7: y minus its least-squares fit on the statistics found so far (with intercept)."""
    A = np.column_stack([np.ones(len(y))] + [X.reshape(len(y), -1) for X in Xs])
    beta, *_ = np.linalg.lstsq(A, y, rcond=None)
    return y - A @ beta


class _Node:
    __slots__ = ("C", "Q", "action", "children", "state", "untried")

    def __init__(self, state: tuple, action=None):
        self.state = state  # S(v): operator indices, T_1 first
        self.action = action  # A(v)
        self.Q = 0.0
        self.C = 0
        self.children: list[_Node] = []
        self.untried: list[int] | None = None


class MCTSSG:
    """Generates K statistics whose values track the teacher's scores.

    Parameters
    ----------
    K, D, B, n_simulations
        Number of statistics, maximum depth, batch size, simulations per tree (Table 2:
        20, 4, 128, 500).
    c
        Exploration constant of UCT (eq. 2), 1/sqrt(2).
    adjusted
        False (the paper): the reward is the multiple correlation of eqs. 5/9. True (a
        departure, for the bench's reward-bias study): its adjusted version
        sqrt(max(0, 1 - (1 - r^2) (B - 1) / (B - p - 1))) for a statistic of p dimensions,
        which removes the upward bias of about sqrt(p / B) that a p-dimensional categorical
        statistic gets on a batch of B entities even when it carries no signal.
    random_state
        Seed (int), ``numpy.random.Generator`` or None.

    Attributes
    ----------
    statistics_ : list of tuples of operator indices (into ``grammar.operators``)
    values_ : list of arrays (N, p_k), the statistics on all entities
    partial_correlations_ : reward of each statistic against the residualised target at the
        time it was chosen (eqs. 8-9, on all N entities)
    search_seconds_, evaluation_seconds_ : time in tree search (independent of N, sec. 3.2.5)
        and in evaluating the chosen statistics on all N entities plus eq. 7 (wall clock)
    search_cpu_seconds_ : CPU time of the tree search (``time.process_time``)
    n_rewards_, reward_entities_, reward_events_ : simulations run, and the entities and events
        their rewards evaluated (at most K x D x simulations, and B entities each: sec. 3.2.5's
        cost, which does not depend on N)

    Examples
    --------
    >>> import numpy as np
    >>> from online.rules.events import EventTable, infer_schema
    >>> from online.rules.operators import Grammar, build_operators
    >>> rng = np.random.default_rng(0)
    >>> n = 200
    >>> lengths = rng.integers(1, 8, n)
    >>> ev = {"user": np.repeat(np.arange(n), lengths),
    ...       "amount": rng.exponential(5.0, lengths.sum())}
    >>> schema = infer_schema(ev, "user")
    >>> table = EventTable.from_events(ev, "user", schema)
    >>> y = np.add.reduceat(ev["amount"], np.r_[0, np.cumsum(lengths)[:-1]])
    >>> grammar = Grammar(build_operators(schema), max_depth=2)
    >>> sg = MCTSSG(K=1, D=2, B=64, n_simulations=60, random_state=0).fit(table, y, grammar)
    >>> grammar.dimension_labels(sg.statistics_[0])
    ['Sum(Select amount)']
    """

    def __init__(self, K=20, D=4, B=128, n_simulations=500, c=UCT_C, adjusted=False,
                 random_state=None):
        self.K = K
        self.D = D
        self.B = B
        self.n_simulations = n_simulations
        self.c = c
        self.adjusted = adjusted
        self.random_state = random_state

    # -- validity under invalidation ------------------------------------------------------
    def _completable(self, seq: tuple) -> bool:
        """Can ``seq`` still be completed to a valid statistic not marked invalid?"""
        hit = self._complete_memo.get(seq)
        if hit is not None:
            return hit
        g = self.grammar_
        if g.is_terminal(seq):
            ok = g.canonical_key(seq) not in self.invalid_
        else:
            ok = any(self._completable(seq + (i,)) for i in g.next_ops(seq))
        self._complete_memo[seq] = ok
        return ok

    def valid_next(self, seq: tuple) -> list[int]:
        return [i for i in self.grammar_.next_ops(seq) if self._completable(seq + (i,))]

    def random_completion(self, seq: tuple) -> tuple:
        """Eq. 3: append uniformly drawn valid operators until the statistic is valid."""
        while not self.grammar_.is_terminal(seq):
            options = self.valid_next(seq)
            seq = seq + (options[self._rng.integers(len(options))],)
        return seq

    # -- reward (eqs. 4, 5, 8, 9) ----------------------------------------------------------
    def reward(self, seq: tuple, target: np.ndarray) -> float:
        N = self.table_.n_entities
        if N <= self.B:
            batch = np.arange(N)
        else:
            batch = self._rng.choice(N, self.B, replace=False)
        offsets = self.table_.offsets
        self.n_rewards_ += 1
        self.reward_entities_ += len(batch)
        self.reward_events_ += int((offsets[batch + 1] - offsets[batch]).sum())
        x = self.grammar_.evaluate(seq, self.table_, batch)
        r = multiple_corr(x, target[batch])
        if self.adjusted:  # not the paper: adjusted R^2 (see the class docstring)
            n, p = len(batch), (x.shape[1] if x.ndim > 1 else 1)
            if n - p - 1 <= 0:
                return 0.0
            r = math.sqrt(max(0.0, 1.0 - (1.0 - r * r) * (n - 1) / (n - p - 1)))
        return r

    # -- Algorithm 2 -----------------------------------------------------------------------
    def _uct_child(self, v: _Node) -> _Node:
        log_n = math.log(max(v.C, 1))
        best, best_score = None, -math.inf
        for ch in v.children:  # eq. 2
            score = ch.Q / ch.C + self.c * math.sqrt(2 * log_n / ch.C)
            if score > best_score:
                best, best_score = ch, score
        return best

    def grow(self, root: _Node, target: np.ndarray) -> None:
        g = self.grammar_
        v, path = root, [root]
        while not g.is_terminal(v.state):  # selection
            if v.untried is None:
                v.untried = self.valid_next(v.state)
                self._rng.shuffle(v.untried)
            if v.untried:  # expansion of an untried valid operator
                op = v.untried.pop()
                child = _Node(v.state + (op,), op)
                v.children.append(child)
                v = child
                path.append(v)
                break
            v = self._uct_child(v)
            path.append(v)
        stat = v.state if g.is_terminal(v.state) else self.random_completion(v.state)
        r = self.reward(stat, target)
        for node in path:  # backpropagation
            node.C += 1
            node.Q += r

    # -- Algorithm 1 -----------------------------------------------------------------------
    def fit(self, table: EventTable, y, grammar: Grammar, progress=None) -> MCTSSG:
        rng = self.random_state
        self._rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.table_ = table
        self.grammar_ = grammar
        self.invalid_: set = set()
        self._complete_memo: dict = {}
        y = np.asarray(y, dtype=np.float64)
        target = y.copy()
        self.statistics_, self.values_, self.partial_correlations_ = [], [], []
        steps = self.K * self.D
        self.search_seconds_ = self.evaluation_seconds_ = self.search_cpu_seconds_ = 0.0
        self.n_rewards_ = self.reward_entities_ = self.reward_events_ = 0
        for k in range(self.K):
            if not self._completable(()):
                break  # every valid statistic has been chosen
            S: tuple = ()
            tic, cpu = time.perf_counter(), time.process_time()
            for d in range(self.D):
                root = _Node(S)
                for _ in range(self.n_simulations):
                    self.grow(root, target)
                best = max(root.children, key=lambda ch: ch.Q / ch.C)  # eq. 6
                S = S + (best.action,)
                if progress is not None:
                    progress((k * self.D + d + 1) / steps, f"statistic {k + 1}/{self.K}: "
                             f"{' o '.join(grammar.operators[i].name for i in reversed(S))}")
                if grammar.is_terminal(S):
                    break
            self.invalid_.add(grammar.canonical_key(S))  # V <- V \ {S}
            self._complete_memo = {}
            toc = time.perf_counter()
            self.search_seconds_ += toc - tic
            self.search_cpu_seconds_ += time.process_time() - cpu
            X = grammar.evaluate(S, table)
            self.statistics_.append(S)
            self.values_.append(X)
            self.partial_correlations_.append(multiple_corr(X, target))
            target = residualise(y, self.values_)  # eq. 7
            self.evaluation_seconds_ += time.perf_counter() - toc
        return self


def random_statistics(grammar: Grammar, K: int, random_state=None) -> list[tuple]:
    """K distinct valid statistics, each drawn by the random completion of eq. 3 from the
    empty composition (the "Random" baseline of sec. 4.2)."""
    sg = MCTSSG(D=grammar.max_depth, random_state=random_state)
    rng = sg.random_state
    sg._rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    sg.grammar_, sg.invalid_, sg._complete_memo = grammar, set(), {}
    out = []
    while len(out) < K and sg._completable(()):
        s = sg.random_completion(())
        out.append(s)
        sg.invalid_.add(grammar.canonical_key(s))
        sg._complete_memo = {}
    return out
