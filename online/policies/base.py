"""The shared root of Grove's hosted contextual-bandit policies.

As in river, the public methods hold the rules every policy shares (input checks, the action
inventory, drawing from the distribution, the state format) and a subclass writes only its
algorithm in a few underscore methods:

* ``_new_encoder()`` -> the :class:`~online.policies.features.FeatureEncoder` it wants;
* ``_distribution(x, known)`` -> the probability of each candidate (``known[j]`` is the
  candidate's action index, -1 for an action the policy has never had);
* ``_learn(x, k, reward, probability)`` -> learn one encoded event (``_learn_batch`` for many);
* ``_resize(n_actions, n_columns)`` -> make room for new actions or feature columns;
* ``_model_state(statistics)`` / ``_load_model_state(state)`` -> its arrays and metadata;
* optionally ``_on_action_removed(k)``, and the refit hooks ``refit_due`` / ``start_refit`` /
  ``finish_refit`` for a policy whose model is rebuilt off the serving path (see there);
* optionally ``_forget_horizon()`` and ``_keep_actions(keep)``, for a policy that forgets the
  actions it no longer needs (see :meth:`Policy._forget_stale`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, ClassVar

import numpy as np
from river import bandit
from river import base as river_base

from online.decision import Decision, stored_action_id
from online.policies.draw import draw
from online.policies.features import FeatureEncoder

__all__ = ["Policy", "rng_state", "rng_from_state"]

#: the fewest stale actions a policy forgets at once (a compaction renumbers every per-action
#: array: done when at least half the actions, and this many, are stale)
FORGET_AT_ONCE = 64


class Policy(bandit.base.ContextualPolicy):
    """A contextual-bandit policy that gives the exact probability of every action it may play.

    Contexts are dicts (nested dicts are flattened, see
    :class:`~online.policies.features.FeatureEncoder`); action ids are any hashable values
    (strings in the service, ints as in river). A NaN or infinite feature is a ``ValueError``
    naming it; keys and categories never seen while learning are ignored when deciding.

    Subclasses call ``super().__init__(seed=seed)`` after storing their hyperparameters under
    their own names (``to_state`` reads them from the constructor's signature).
    """

    #: the state's format name and version (each subclass sets its own)
    FORMAT: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    def __init__(self, seed: int | None = None):
        super().__init__(burn_in=0)
        self.seed = seed
        self._actions: list = []  # action index -> action id (shrinks as actions are forgotten)
        self._index: dict = {}  # action id -> action index
        self._active = np.zeros(0, bool)  # action index -> in the inventory
        # action index -> came with an event, never added (leaves the inventory when forgotten)
        self._implicit = np.zeros(0, bool)
        # action index -> events learned when it was last learned (or added)
        self._last_event = np.zeros(0, np.int64)
        self._forgotten = 0  # actions forgotten (see _forget_stale)
        self._grown = False  # an action index was created since the last _forget_stale
        self._n_learned = 0
        self._rng = np.random.default_rng(seed)
        self._encoder = self._new_encoder()
        self._inventory: tuple[list, np.ndarray] | None = None  # cached active actions
        self._last_decision: Decision | None = None

    # -- what a subclass writes ----------------------------------------------------------------

    def _new_encoder(self) -> FeatureEncoder:
        return FeatureEncoder()

    def _distribution(self, x: np.ndarray, known: np.ndarray) -> np.ndarray:
        """The probability of each candidate (sums to 1) for the encoded context ``x``."""
        raise NotImplementedError

    def _learn(self, x: np.ndarray, k: int, reward: float, probability: float) -> None:
        raise NotImplementedError

    def _learn_batch(self, X: np.ndarray, ks: np.ndarray, rewards: np.ndarray,
                     probabilities: np.ndarray) -> None:
        """Learn encoded events in order (rows of ``X`` are padded with the missing value)."""
        for x, k, r, p in zip(X, ks.tolist(), rewards.tolist(), probabilities.tolist()):
            self._learn(x, k, r, p)

    def _resize(self, n_actions: int, n_columns: int) -> None:
        """Make room for ``n_actions`` actions and ``n_columns`` feature columns (only grows)."""

    def _on_action_removed(self, k: int) -> None:
        """Action ``k`` left the inventory (its statistics may be kept for its return)."""

    def _forget_horizon(self) -> int | None:
        """After how many events without one of its own a stale action is forgotten (see
        :meth:`_forget_stale`); None: never."""
        return None

    def _refits_inline(self) -> bool:
        """Whether learning an event may refit the model there and then, from the coding's
        columns as they are (:meth:`learn_many` then learns event by event: coding the whole
        batch first would give such a refit the columns of the events after it)."""
        return False

    def _can_forget(self) -> bool:
        """Whether action indices may be renumbered now (not while a refit job holds them)."""
        return True

    def _keep_actions(self, keep: np.ndarray) -> None:
        """Keep the statistics of the action indices ``keep`` only (ascending): ``keep[i]``
        becomes index i. Called by :meth:`_forget_stale` after the inventory is renumbered."""

    def _model_state(self, statistics: bool) -> dict:
        return {}

    def _load_model_state(self, state: dict) -> None:
        pass

    # -- refits off the serving path (policies whose oracle is rebuilt in batches) --------------

    def refit_due(self) -> bool:
        """Whether :meth:`start_refit` should be called now (the trainer asks after learning)."""
        return False

    def start_refit(self) -> Callable[[], Any] | None:
        """A job that rebuilds the model from a snapshot of the training data.

        The job runs in a worker thread while this policy keeps learning and deciding: it must
        not read or write the policy's mutable state. Its result goes to :meth:`finish_refit`,
        called by the thread that owns the policy. None: nothing to refit.
        """
        return None

    def finish_refit(self, result: Any) -> None:
        """Install what a :meth:`start_refit` job returned."""

    #: whether the host runs the refit hooks itself (see :meth:`defer_refits`)
    _refits_deferred = False

    def defer_refits(self) -> None:
        """Leave refits to the caller from now on: ``learn_one`` never refits inline, the caller
        runs :meth:`refit_due` / :meth:`start_refit` / :meth:`finish_refit` (a service's trainer
        runs the job in a worker thread). A property of the host, not of the policy: not part of
        the state, so a restored copy refits inline until told otherwise."""
        self._refits_deferred = True

    def __repr__(self) -> str:
        # river's bandit policies print a table of each arm's reward statistics, which these do
        # not keep (it raised on every Grove policy); the class and its parameters instead
        return river_base.Base.__repr__(self)

    # -- actions -------------------------------------------------------------------------------

    @property
    def actions(self) -> list:
        """The actions of the inventory (added, not removed), in the order they were added."""
        return list(self._active_inventory()[0])

    def add_action(self, action: Hashable) -> None:
        """Put ``action`` in the inventory (back with its statistics if it was removed and is
        not yet forgotten)."""
        _check_action(action)
        self._forget_stale()
        self._add(action, implicit=False)

    def _add(self, action: Hashable, implicit: bool) -> None:
        """Into the inventory; ``implicit``: with an event (an added action stays added)."""
        k = self._index.get(action)
        if k is None:
            k = len(self._actions)
            self._actions.append(action)
            self._index[action] = k
            if k >= len(self._active):
                grow = max(4, k + 1)
                self._active = np.concatenate([self._active, np.zeros(grow, bool)])
                self._implicit = np.concatenate([self._implicit, np.zeros(grow, bool)])
                self._last_event = np.concatenate([self._last_event, np.zeros(grow, np.int64)])
            self._implicit[k] = implicit
            self._last_event[k] = self._n_learned
            self._grown = True
            self._resize(k + 1, self._encoder.n_columns)
        elif not implicit:
            self._implicit[k] = False
        self._active[k] = True
        self._inventory = None

    def _forget_stale(self) -> None:
        """Forget the actions that are stale: removed from the inventory, or never added to
        it (they came with events), and without an event of their own for
        :meth:`_forget_horizon` events.

        Why: an ad inventory changes (campaigns end, a Personalizer request brings the actions
        of the day), and every action a policy keeps costs its per-action arrays (LinUCB's
        ``A^-1`` and the trees' linear base's, 8 d^2 bytes each with d coded columns; the
        change test's errors), in memory and in every state the trainer writes. Without
        forgetting, they grow with every action ever seen.
        A stale action has nothing left in a window (its events have slid out), so what is
        forgotten is what the policy would no longer fit on; a forgotten action that comes back
        is a new one (with an event: into the inventory, as any action the policy never had).
        An action that came with an event and was never added leaves the inventory as it is
        forgotten (its next event would bring it back).

        Amortised: called where no action index is held (before learning, adding, after a
        refit), it looks only when an index was created since it last looked, and renumbers
        (:meth:`_keep_actions`) only when at least half the actions, and ``FORGET_AT_ONCE``,
        are stale: the arrays stay within twice what the live actions need.
        """
        if not self._grown or not self._can_forget():
            return
        self._grown = False
        horizon = self._forget_horizon()
        n = len(self._actions)
        if horizon is None or n < FORGET_AT_ONCE:
            return
        stale = ((self._n_learned - self._last_event[:n] >= horizon)
                 & (~self._active[:n] | self._implicit[:n]))
        n_stale = int(stale.sum())
        if n_stale < max(FORGET_AT_ONCE, n - n_stale):
            return
        keep = np.flatnonzero(~stale)
        self._actions = [self._actions[k] for k in keep.tolist()]
        self._index = {a: k for k, a in enumerate(self._actions)}
        room = max(4, 2 * len(keep))
        for name in ("_active", "_implicit", "_last_event"):
            old = getattr(self, name)
            new = np.zeros(room, old.dtype)
            new[: len(keep)] = old[keep]
            setattr(self, name, new)
        self._inventory = None
        self._forgotten += n_stale
        self._keep_actions(keep)

    @property
    def n_forgotten(self) -> int:
        """Stale actions forgotten so far (see :meth:`_forget_stale`)."""
        return self._forgotten

    def remove_action(self, action: Hashable) -> None:
        """Take ``action`` out of the inventory; KeyError if it is not in it."""
        k = self._index.get(action)
        if k is None or not self._active[k]:
            raise KeyError(f"action {action!r} is not in the inventory")
        self._active[k] = False
        self._inventory = None
        self._on_action_removed(k)

    def _active_inventory(self) -> tuple[list, np.ndarray]:
        if self._inventory is None:
            ks = np.flatnonzero(self._active[: len(self._actions)])
            self._inventory = ([self._actions[k] for k in ks.tolist()], ks.astype(np.int64))
        return self._inventory

    def _offered_candidates(self, offers: list) -> tuple[np.ndarray, list[np.ndarray]]:
        """For rows that each offer their own actions (``offered_rows``): the action index of
        every action of their union (as :meth:`_candidates`), and each row's actions as
        positions in that union, in its own order, repeats dropped."""
        offers = [tuple(dict.fromkeys(offer)) for offer in offers]
        union, known = self._candidates(list(dict.fromkeys(a for o in offers for a in o)), ())
        position = {a: j for j, a in enumerate(union)}
        return known, [np.array([position[a] for a in offer], np.int64) for offer in offers]

    def _candidates(self, actions: Iterable | None, excluded: Iterable) -> tuple[list, np.ndarray]:
        """Candidate actions and their indices (-1: an action the policy has never had, or one
        removed from the inventory: it has no statistics to decide with)."""
        if actions is None and not excluded:
            candidates, known = self._active_inventory()
        else:
            excluded = set(excluded)
            pool = self._active_inventory()[0] if actions is None else dict.fromkeys(actions)
            candidates = [a for a in pool if a not in excluded]
            index, active = self._index, self._active
            known = np.array([k if k is not None and active[k] else -1
                              for k in map(index.get, candidates)], np.int64)
        if not candidates:
            raise ValueError("no action to choose from: the list is empty or all are excluded")
        if actions is not None and None in pool:  # (an action learn_one would refuse)
            raise ValueError("an action id must be hashable and not None")
        return candidates, known

    # -- acting --------------------------------------------------------------------------------

    def probabilities(self, x: dict, actions: Iterable | None = None,
                      excluded: Iterable = (), action_features: Mapping | None = None) -> dict:
        """The distribution :meth:`decide` draws from, most probable first, without drawing.

        Changes nothing (not even the random generator): an evaluator can ask what this policy
        would have played for a logged context.
        """
        candidates, probs = self._decide_distribution(x, actions, excluded,
                                                      action_features=action_features)
        order = np.argsort(-probs, kind="stable")
        return {candidates[j]: float(probs[j]) for j in order.tolist()}

    def decide(self, x: dict, actions: Iterable | None = None,
               excluded: Iterable = (), action_features: Mapping | None = None) -> Decision:
        """Draw an action for context ``x`` among ``actions`` (default: the inventory) minus
        ``excluded``; the decision carries the exact probability of every candidate.

        ``action_features`` (action id -> dict) are the candidates' own features, read by the
        policies that score actions by them (``ActionFeaturePolicy``); the others learn one
        model per action id and ignore them. Does not change what the policy has learned (only
        its random generator moves on). ``explored`` is True when the drawn action is less
        probable than the most probable one.
        """
        candidates, probs = self._decide_distribution(x, actions, excluded, checked=False,
                                                      action_features=action_features)
        if probs.shape != (len(candidates),):
            _not_a_distribution(self, probs, candidates)
        order = np.empty(len(probs), np.int64)
        j, explored = draw(probs, self._rng.random(), order)
        if j < 0:
            _not_a_distribution(self, probs, candidates)
        decision = Decision(candidates[j], float(probs[j]), None, explored,
                            _ranking=(candidates, probs, order))
        self._last_decision = decision
        return decision

    def predict_one(self, x: dict, actions: Iterable | None = None, excluded: Iterable = ()):
        """The most probable action (the first listed among equals)."""
        candidates, probs = self._decide_distribution(x, actions, excluded)
        return candidates[int(np.argmax(probs))]

    def _decide_distribution(self, x, actions, excluded, checked: bool = True,
                             action_features: Mapping | None = None) -> tuple[list, np.ndarray]:
        """The candidates and their probabilities (``checked``: RuntimeError if they are not a
        distribution; :meth:`decide` checks them as it draws)."""
        xv, _ = self._encoder.encode(x)
        candidates, known = self._candidates(actions, excluded)
        probs = np.asarray(self._distribution(xv, known), float)
        if checked and (probs.shape != (len(candidates),) or not abs(probs.sum() - 1.0) < 1e-9
                        or (probs < 0).any()):
            _not_a_distribution(self, probs, candidates)
        return candidates, probs

    # -- learning ------------------------------------------------------------------------------

    def learn_one(self, x: dict, action: Hashable, reward: float, probability: float = 1.0,
                  action_features: Mapping | None = None) -> None:
        """Learn that playing ``action`` in context ``x`` gave ``reward``.

        ``probability`` is the propensity with which ``action`` was played (what :meth:`decide`
        gave, or what another logging policy gave: see each policy for how it is used);
        ``action_features``, the action's own features, as in :meth:`decide`. An
        action the policy has never had is added to the inventory; a removed action's event (a
        late reward for a campaign that ended) is learned without putting it back.
        """
        reward, probability = _check_feedback(reward, probability)
        _check_action(action)
        self._forget_stale()
        xv = self._learn_encode(x)
        k = self._action_index(action)
        self._sync_columns()
        self._learn(xv, k, reward, probability)
        self._n_learned += 1
        self._last_event[k] = self._n_learned

    def learn_many(self, events: Iterable[tuple]) -> int:
        """:meth:`learn_one` for each ``(x, action, reward, probability)``, in order.

        An event may carry a fifth item, the actions its decision was drawn among (None: the
        inventory): an evaluator of policies reads it (``AutoPolicy``); learning does not (a
        policy learns from the action played). A sixth, the offered actions' features by id
        (None: none given), is read by the policies that use them.

        Ends as the same calls to :meth:`learn_one` would, also when an event is rejected: the
        events before it are learned, then its error is raised. Returns the number learned.
        """
        learned = 0

        def flush() -> None:  # learn the rows encoded so far: their columns are to change
            nonlocal learned
            learned += self._learn_rows(rows, ks, rewards, probs)

        if self._refits_inline():  # a refit reads the coding: as the events before it left it
            for x, action, reward, probability, *_ in events:
                self.learn_one(x, action, reward, probability)
                learned += 1
            return learned
        rows: list[np.ndarray] = []
        ks: list[int] = []
        rewards: list[float] = []
        probs: list[float] = []
        self._forget_stale()  # (not below: the indices of the batch must stay)
        try:
            for x, action, reward, probability, *_ in events:
                reward, probability = _check_feedback(reward, probability)
                _check_action(action)
                rows.append(self._learn_encode(x, flush))
                ks.append(self._action_index(action))
                rewards.append(reward)
                probs.append(probability)
                if len(rows) >= 4096:
                    learned += self._learn_rows(rows, ks, rewards, probs)
        finally:
            learned += self._learn_rows(rows, ks, rewards, probs)
        return learned

    def _learn_encode(self, x: dict, flush: Callable[[], None] | None = None) -> np.ndarray:
        """``x``'s vector, after adding columns for its new features. At ``max_columns``, a
        policy that can tell features that are gone (:meth:`_stale_columns`) takes them out of
        its statistics (:meth:`_forget_columns`) and frees their columns for ``x``'s new ones;
        ``flush`` first learns the events encoded but not learned yet (their columns are about
        to change meaning)."""
        encoder = self._encoder
        before = encoder.left_out
        xv = encoder.learn_encode(x)
        missed = encoder.left_out - before
        if missed and self._forgets_columns:
            if flush is not None:  # (the choice reads when each feature was last learned)
                flush()
            self._sync_columns()  # (this context's new columns: the model's arrays hold them)
            stale = self._stale_columns(missed, xv)
            if stale:
                self._forget_columns(stale)
                encoder.free(stale)
                encoder.left_out = before  # (counted again below: those still left out)
                xv = encoder.learn_encode(x)
        return xv

    _forgets_columns = False  # whether _stale_columns may find any

    def _stale_columns(self, n: int, xv: np.ndarray) -> list[int]:
        """At most ``n`` columns whose features the policy finds gone from the stream (none of
        ``xv``'s, the context being learned), to give to new features; none by default (a
        policy whose bound is reached leaves new features out)."""
        return []

    def _forget_columns(self, columns: list[int]) -> None:
        """Take ``columns`` out of the statistics: the models as if those features had never
        been seen, the columns fresh (see :meth:`_stale_columns`)."""

    def _learn_rows(self, rows: list, ks_list: list, rewards: list, probs: list) -> int:
        """Learn the encoded events of :meth:`learn_many` (and empty the lists)."""
        n = len(rows)
        if not n:
            return 0
        self._sync_columns()
        X = np.tile(self._encoder.encode({})[0], (n, 1))  # every column missing
        for i, row in enumerate(rows):
            X[i, : len(row)] = row
        ks = np.array(ks_list, np.int64)
        self._learn_batch(X, ks, np.array(rewards), np.array(probs))
        self._touch(ks)
        for buffer in (rows, ks_list, rewards, probs):
            buffer.clear()
        return n

    def _touch(self, ks: np.ndarray) -> None:
        """Count the learned events of action indices ``ks`` (in order)."""
        np.maximum.at(self._last_event, ks, self._n_learned + 1 + np.arange(len(ks)))
        self._n_learned += len(ks)

    def check_context(self, x: dict) -> None:
        """Raise what learning ``x`` would raise for its values (``ValueError`` or ``TypeError``
        naming the feature), changing nothing: a policy that feeds one stream to several others
        (:class:`~online.policies.auto.AutoPolicy`) checks an event with each before any learns
        it, so that they stay in step."""
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        self._encoder.encode(x)

    def _action_index(self, action: Hashable) -> int:
        k = self._index.get(action)
        if k is None:  # new: into the inventory (a removed action stays out of it)
            self._add(action, implicit=True)
            k = self._index[action]
        return k

    def _sync_columns(self) -> None:
        """Tell the model about feature columns the encoder added."""
        n = self._encoder.n_columns
        if n != self._n_columns:
            self._resize(len(self._actions), n)
            self._n_columns = n

    _n_columns = 0

    @property
    def n_learned(self) -> int:
        """Number of events learned."""
        return self._n_learned

    @property
    def feature_columns(self) -> int:
        """The feature columns the policy codes (a number, a category's codes or a one-hot
        category each take one; a column freed for a new feature is not counted until one
        takes it)."""
        return self._encoder.n_columns - self._encoder.n_free

    @property
    def features_left_out(self) -> int:
        """Features of learned events that got no column, the policy's ``max_columns`` reached
        (counted at each event that had one: a key sent with every event counts every time)."""
        return self._encoder.left_out

    def reseed(self, seed: int | None) -> None:
        """Restart the generator of :meth:`decide` from ``seed`` (learning is not affected).

        A service running several copies of one policy (API replicas) gives each its own stream
        of draws this way; the probabilities, and so the logged propensities, are unchanged.
        """
        self._rng = np.random.default_rng(seed)

    # -- river's ContextualPolicy ----------------------------------------------------------------

    def _pull(self, arm_ids, context):
        return self.decide(context or {}, actions=arm_ids).action

    def update(self, arm_id, context, *reward_args, **reward_kwargs):
        """river's update: learns with the propensity of the last decision (1 if unknown)."""
        super().update(arm_id, context, *reward_args, **reward_kwargs)
        last = self._last_decision
        probability = (last.probabilities.get(arm_id) if last is not None else None) or 1.0
        self.learn_one(context or {}, arm_id, reward_args[0], probability)

    # -- state -----------------------------------------------------------------------------------

    def params(self) -> dict:
        """The constructor's arguments, as stored (JSON-able for the hosted policies)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def to_state(self, statistics: bool = True) -> dict:
        """Numpy arrays and JSON-able metadata; :meth:`from_state` restores the same policy.

        With ``statistics=False`` a policy may leave out what it needs only to learn (a smaller
        copy that decides the same, for serving).
        """
        return {
            "format": self.FORMAT,
            "version": self.VERSION,
            "params": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in self.params().items()},
            "actions": list(self._actions),
            "active": self._active[: len(self._actions)].copy(),
            "implicit": self._implicit[: len(self._actions)].copy(),
            "last_event": self._last_event[: len(self._actions)].copy(),
            "forgotten": self._forgotten,
            "n_learned": self._n_learned,
            "rng": rng_state(self._rng),
            "encoder": self._encoder.to_state(),
            "statistics": bool(statistics),
            "model": self._model_state(statistics),
        }

    @classmethod
    def from_state(cls, state: dict) -> Policy:
        cls._check_state(state)
        policy = cls(**state["params"])
        policy._restore_inventory(state)
        policy._load_model_state(state["model"])
        return policy

    @classmethod
    def _check_state(cls, state: dict) -> None:
        """``ValueError`` unless ``state`` is this class's format, at a version it reads."""
        if state.get("format") != cls.FORMAT:
            raise ValueError(f"not a {cls.FORMAT} state (format={state.get('format')!r})")
        if state.get("version") != cls.VERSION:
            raise ValueError(f"unsupported {cls.FORMAT} state version {state.get('version')!r}")

    def _restore_inventory(self, state: dict) -> None:
        """What every policy's state holds: encoder, actions, events learned, the draws."""
        self._encoder = FeatureEncoder.from_state(state["encoder"])
        self._actions = list(map(stored_action_id, state["actions"]))  # (tuples as lists)
        self._index = {a: k for k, a in enumerate(self._actions)}
        self._active = np.asarray(state["active"], bool).copy()
        self._n_learned = int(state["n_learned"])
        n = len(self._actions)  # (states written before forgetting: every action seen now)
        self._implicit = np.asarray(state.get("implicit", np.zeros(n, bool)), bool).copy()
        self._last_event = np.asarray(state.get("last_event", np.full(n, self._n_learned)),
                                      np.int64).copy()
        self._forgotten = int(state.get("forgotten", 0))
        self._rng = rng_from_state(state["rng"])
        self._n_columns = self._encoder.n_columns


def _not_a_distribution(policy: Policy, probs: np.ndarray, candidates: list):
    raise RuntimeError(f"{type(policy).__name__}._distribution gave {probs!r} for "
                       f"{len(candidates)} candidates: not a distribution")


def _check_feedback(reward, probability) -> tuple[float, float]:
    """Checked reward and probability of a learning event (the rules of every policy)."""
    try:
        reward = float(reward)
        probability = float(probability)
    except (TypeError, ValueError, OverflowError):  # (an int past a float's range: overflow)
        raise ValueError(f"reward and probability must be numbers, got {reward!r} and "
                         f"{probability!r}") from None
    if not math.isfinite(reward):
        raise ValueError(f"reward must be a finite number, got {reward}")
    if not 0.0 < probability <= 1.0:
        raise ValueError(f"probability must be in (0, 1], got {probability}")
    return reward, probability


def _check_action(action) -> None:
    if action is None or not isinstance(action, Hashable):
        raise ValueError(f"an action id must be hashable and not None, got {action!r}")


def rng_state(rng: np.random.Generator) -> dict:
    """PCG64 state with its 128-bit integers as strings (JSON and msgpack safe)."""
    s = rng.bit_generator.state
    if s["bit_generator"] != "PCG64":
        raise ValueError(f"only PCG64 generators are stored, got {s['bit_generator']}")
    return {"state": str(s["state"]["state"]), "inc": str(s["state"]["inc"]),
            "has_uint32": int(s["has_uint32"]), "uinteger": int(s["uinteger"])}


def rng_from_state(state: dict) -> np.random.Generator:
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64",
                    "state": {"state": int(state["state"]), "inc": int(state["inc"])},
                    "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}
    return np.random.Generator(bitgen)
