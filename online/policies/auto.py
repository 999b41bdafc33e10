"""The auto policy: candidates learn from one stream, counterfactual evaluation picks the champion.

Every joined event is learned by every candidate (its own learning rule, off-policy, from the
logged propensity). Before a candidate learns an event, the probability it would have served
the logged action is recorded; from these, per candidate, IPS, SNIPS and doubly robust
estimates of its value with anytime-valid confidence sequences (:mod:`online.confidence`). The
app serves the champion's distribution mixed with an exploration floor; a challenger replaces
the champion only when its lower bound exceeds the champion's upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

import numpy as np

from online.confidence import OffPolicyEstimates, dr_lower_bounds
from online.policies.base import Policy, _check_action, _check_feedback
from online.policies.registry import policy_kind

__all__ = ["AutoPolicy", "CandidateConflict", "DEFAULT_CANDIDATES"]

#: the default candidate set, serving order first (see "The default candidates" in the class doc)
DEFAULT_CANDIDATES: tuple[dict, ...] = (
    {"kind": "trees"},
    {"kind": "linucb"},
)

#: the kind added as a candidate when events first bring their actions' features, and the
#: events after which, once, it serves if its estimate is the higher (see the class doc)
FEATURE_KIND = "adf"
FEATURE_TRIAL = 4000
#: an action with fewer events than this is young: a per-id model of it rests on little (the
#: trees' hierarchical prior is worth as many events)
YOUNG = 50
#: the events over which the share of recent plays of young actions is weighed (exponentially,
#: see "Actions with features of their own" in the class doc): the trial's second half
YOUNG_HORIZON = FEATURE_TRIAL // 2

_ESTIMATORS = ("ips", "dr")
#: the smallest exploration floor: the estimates weigh an event by up to K / floor, and their
#: bounds sum squares of those weights (a floor of 1e-308 made them infinite, and the events
#: were refused after they had been acknowledged); under 1e-6 nothing is left to evaluate with
MIN_FLOOR = 1e-6


class CandidateConflict(ValueError):
    """A change of candidates that would leave the app without a serving candidate."""


class _Candidate:
    """One candidate: its policy, its estimates and where it came from. In a serving copy
    (``to_state(statistics=False)``) a candidate that does not serve has no policy (None), and
    ``changes`` is its count of actions whose rewards it found changed."""

    __slots__ = ("name", "kind", "params", "serial", "policy", "created_at", "changes")

    def __init__(self, name, kind, params, serial, policy, created_at, changes=None):
        self.name = name
        self.kind = kind
        self.params = params
        self.serial = serial
        self.policy = policy
        self.created_at = created_at
        self.changes = changes

    def n_changes(self) -> int | None:
        """Actions whose rewards it found changed (None for a kind that does not watch)."""
        if self.policy is None:
            return self.changes
        return getattr(self.policy, "n_changes", None)

    def spec(self) -> dict:
        return {"name": self.name, "kind": self.kind, "params": dict(self.params)}


class AutoPolicy(Policy):
    """Several candidate policies learn from the same stream; the one that is surely best serves.

    Serving. The served distribution is the champion's, mixed with the exploration floor:
    ``(1 - floor) * pi_champion(a | x) + floor / K`` over the K candidate actions, so every
    allowed action has probability at least ``floor / K`` and every logged propensity is exact.
    The floor bounds the importance weights (by K / floor) of every candidate's estimate.

    Learning and evaluation. For a batch of events (``learn_many``; ``learn_one`` is a batch of
    one), each candidate's distribution for every event's context is taken first, with the state
    the candidate has before the batch, then the candidate learns the batch. The value estimated
    for a candidate is that of the distribution it would serve, its own mixed with the floor,
    w_i = pi_c(a_i | x_i) / p_i. Taking probabilities at the batch's start, not before each
    event, keeps them predictable (they depend on earlier events only), which is all the
    confidence sequences need, and lets the candidates learn a batch at once (the service's
    served snapshot lags the trainer in the same way).

    * IPS and DR with two-sided anytime-valid bands, SNIPS as a point estimate. DR's reward
      model is the running mean reward of each action over the earlier events (predictable, as
      the DR sequence needs; context-free, shared by the candidates).
    * The bands of the candidate created ``j``-th (1, 2, ...) are at level 1 - alpha / 2^j, so
      that all bands of all candidates ever created hold at all times with probability >=
      1 - alpha (a union bound over a series that sums to alpha).
    * Each event's distributions are over the actions its decision was drawn among: those the
      event carries (its fifth item: a request that named its actions, or excluded some, as
      the service records), else the inventory. A candidate is the policy it would serve on
      such a request, so that is the policy evaluated; over the inventory instead, a request's
      offer that differs from it (a Personalizer app's articles of the day) would be scored as
      a choice among actions it never offered (a LinUCB candidate, whose bound favours the
      actions never played, estimated 0.16-0.23 where it earns ~0.82: the test
      ``test_candidates_are_evaluated_over_the_actions_each_request_offered``).
    * An event whose action was removed from the inventory (a late reward of a campaign that
      ended) is learned by every candidate and counts in the estimates with weight 0: none of
      them would serve that action now.
    * ``estimator`` (``"ips"`` by default, or ``"dr"``) says which bands decide the switch; IPS
      by default because its bands stay valid when a hostile upload breaks the floor (below).

    Switching. After each batch, a challenger with at least ``min_events`` evaluated events whose
    lower bound exceeds the champion's upper bound replaces it (the highest lower bound among
    several). With probability >= 1 - alpha no band ever fails, so with fixed policies a switch
    only ever goes to a better one and two equal candidates never switch; for candidates that
    learn, the betting bands bound the best of a candidate's successive values from below and
    the worst from above (:mod:`online.confidence`), so a switch means the challenger has been
    better than the champion has been. Each switch is recorded: the event count at which it
    happened, from, to, and both candidates' estimates.

    Two guards keep learning candidates from trading places (found on the Shuttle stream: trees
    and LinUCB swapped at every event from event 15,459 on). For a candidate that learns, its
    lower bound bounds the best value it has had and its upper bound the worst, so the band may
    be inverted (lower > upper), and then "the challenger's lower bound exceeds the champion's
    upper bound" can hold both ways at once. So a switch also needs the challenger's estimate
    (the same estimator) above the champion's, which cannot hold both ways, and no switch
    happens within ``min_events`` events of the previous one (by evaluation or by an operator),
    which bounds the switches by events / ``min_events`` even when two estimates cross back and
    forth. Both only withhold switches, so what a switch guarantees is unchanged.

    Estimates run since each candidate was created, not over a sliding window: one
    supermartingale per candidate is what makes the bands valid although they are read after
    every batch; a window read repeatedly would need a union over windows and loses that.
    Traffic is non-stationary, so the candidates themselves keep adapting (each learns every
    event; ``trees`` and ``linucb`` also watch their held-out errors and forget an action's
    events from before a change they find: :mod:`~online.policies.drift`), and a candidate
    added later (:meth:`add_candidate`) is evaluated from its creation,
    on the current traffic only.

    The default candidates
    ----------------------
    ``trees`` serves first and ``linucb`` learns beside it: alone, LinUCB earns more than the
    trees over the first few hundred events of some streams, and after a change in the
    rewards (it restarts the changed actions; the trees drop their events from before it), for
    ~20-100 us per event.
    Bandit Forest is not a default candidate, by measurement (``bench/policies/AUTO.md``, "The
    default candidates"): it never served in any run on the paper's three streams or on the
    seven held-out ones (alone on the paper's streams it earned 0.05-0.54 where the trees
    earned 0.28-0.97; inside auto on the held-out streams its estimates were 0.03-0.57 against
    the trees' 0.06-0.94), so it changed no decision, while it took ~13 % of auto's learning
    CPU on Letter (999 -> 871 us per event without it, refits included) and 4.4 MB of the
    app's checkpoint. Dropping it leaves the app's decisions identical (the other candidates'
    seeds and band levels depend on their creation order only). It stays a kind of its own,
    and a candidate an operator can add.

    Actions with features of their own (a Personalizer request's articles with their topic):
    ``trees`` and ``linucb`` learn one model per action id and cannot read them. The first
    time a learned event brings its actions' features (the sixth item of a ``learn_many``
    event), an ``adf`` candidate (:class:`~online.policies.adf.ActionFeaturePolicy`, one model
    of the context and the actions' features) joins and serves at once (a switch recorded
    with the reason "action features"). Then, once, ``FEATURE_TRIAL`` (4,000) events later:
    if most events of the trial's second half played a *young* action (fewer than ``YOUNG``
    = 50 events of its own), ``adf`` keeps serving; otherwise the candidate that served
    before it takes the app back if its SNIPS estimate over that half is the higher. After
    that the usual rule switches, with one guard that holds from the join on: while ``adf``
    serves and most recent events (weighed exponentially over ``YOUNG_HORIZON`` = 2,000)
    played a young action, no candidate that learns per action id may replace it. Why a rule
    of its own: the two kinds of app that send features need opposite choices, and the usual
    bands take too long to tell them apart, or tell them apart wrongly (below).

    * Requests that bring new articles every day (``bench/policies/articles.py``): the per-id
      candidates earn 0.08-0.11 where ``adf`` earns 0.15-0.16. On such low click rates the
      bands had not separated after 20,000 events.
    * A fixed set of actions sent with features that add nothing (Letter's 26 labels, each
      with made-up features): the trees earn more (0.75 per event at 35,000-40,000 events,
      ``adf`` 0.59), and with ``adf`` serving the bands had not separated after 20,000
      events either (the trees' estimate 0.48 and lower bound 0.35, against adf's upper
      bound 0.45).
    * The estimates alone do not tell them apart: a per-id candidate evaluated on what
      ``adf`` served learns each new article from ``adf``'s exploration, which it could not
      do serving alone. On the article stream its SNIPS estimate over the trial's second
      half was 0.20 (seed 0) against adf's 0.13, and, switched back to it, the app earned
      0.10 (seeds 0 and 1).
    * Young actions tell them apart: over events 2,000-4,000 with ``adf`` serving, 56-61 % of
      the article stream's events played an action with fewer than 50 events (seeds 0-2),
      7 % of Letter's. Where most actions are young, a per-id model rests on too little of
      its own; where they are not, the per-id candidates have their own data and the
      estimates compare them fairly. Now: the article stream keeps ``adf`` (0.153 / 0.158 /
      0.167 over 40,000 events), Letter goes back to the trees at 4,096 events (0.75 over
      events 35,000-40,000, as without features).
    * The usual rule needs the same guard, for the same reason: what it compares is a per-id
      candidate fed by ``adf``'s exploration. On the article stream with the rewards drawn
      apart from the requests (a ``/tmp`` script, 40,000 events, five pairs of seeds), in two
      runs of five the trees' band rose above ``adf``'s (at events 3,840 and 5,120) and the
      trees took the app: it earned 0.119 and 0.090, against 0.161 and 0.138 with the guard
      (the other three runs never switched: 0.151-0.161 either way). Once an app's actions
      stop being young (a fixed catalogue sent with features), the guard lifts and the bands
      decide as for any app.

    Once only (``feature_candidate``; an operator who removes the candidate keeps it out),
    and never on a stream without action features, which decides as before.

    Bad and hostile input
    ---------------------
    * Rewards outside [0, 1] (the service rescales the app's range to [0, 1]) are clipped to it,
      for learning and estimates alike, and counted (``clipped_rewards``): every candidate is
      then valued on the same clipped reward, so their comparison is not biased.
    * A propensity of 0 (or not in (0, 1], or a reward that is not a finite number) is refused
      with ``ValueError`` as by every policy (``learn_many`` learns the events before it, then
      raises): no weight exists for it. The refusal depends on the log record, not on the reward.
    * A propensity below ``floor / K`` (never logged by Grove; possible in uploaded history) is
      raised to ``floor / K`` in the weights: a smaller weight than the true one for IPS, on both
      sides of its band (the terms w r and w (1 - r) both shrink), so the IPS band stays valid,
      only wider; DR's lower bounds stay correct by construction.
    * An event decided before a candidate existed (a late reward, uploaded history) is evaluated
      like any other: IPS needs only the logged propensity and the candidate's probability,
      taken before it learns the event, so the term is predictable and unbiased.

    Parameters
    ----------
    candidates
        ``[{"kind": ..., "params": {...}, "name": ...}, ...]``: kinds of
        :data:`online.policies.registry.POLICY_KINDS`; ``name`` defaults to the kind (with
        ``-2``, ``-3`` ... on repeats); the first serves first. ``None``: the defaults.
    floor
        The exploration floor in (0, 1): the share of probability spread over all actions.
        0.01 by default, by measurement (``bench/policies/AUTO.md``): the floor costs about
        ``floor * (V - 1/K)`` of reward on every event (the candidates explore by their own
        rules already), which at 0.1 left auto 0.02-0.08 below its best candidate on the
        paper's streams at 100k steps and at 0.01 within 0.01 of it; the switch on the
        five-action problem still came at ``min_events``. A smaller floor bounds the weights
        by a larger K / floor, so bands narrow more slowly.
    alpha
        Total error probability of all candidates' bands (see above).
    min_events
        Events a challenger must have been evaluated on before it may replace the champion.
    estimator
        ``"ips"`` or ``"dr"``: which bands decide a switch.
    feature_candidate
        Add an ``adf`` candidate when events first bring their actions' features (see above).
    seed
        Seed of the draws; candidates without a ``seed`` param get seeds derived from it.

    Examples
    --------
    Bandit Forest serves first; LinUCB learns the same events and takes over once its value is
    surely higher:

    >>> import random
    >>> rng = random.Random(0)
    >>> policy = AutoPolicy(candidates=[{"kind": "bandit-forest"}, {"kind": "linucb"}],
    ...                     actions=["a1", "a2", "a3", "a4", "a5"], seed=1)
    >>> for _ in range(4000):
    ...     x = {"favorite": rng.choice(policy.actions), "device": rng.choice(["pc", "phone"])}
    ...     d = policy.decide(x)
    ...     policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)
    >>> policy.serving
    'linucb'
    >>> [(s["from"], s["to"]) for s in policy.switches]
    [('bandit-forest', 'linucb')]
    >>> clone = AutoPolicy.from_state(policy.to_state())
    >>> clone.evaluations() == policy.evaluations()
    True
    """

    FORMAT = "grove.auto"
    VERSION = 1

    def __init__(self, candidates: list[dict] | None = None, floor: float = 0.01,
                 alpha: float = 0.05, min_events: int = 500, estimator: str = "ips",
                 feature_candidate: bool = True, actions: Iterable[Hashable] = (),
                 seed: int | None = None):
        check_floor(floor)
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if estimator not in _ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(_ESTIMATORS)}, got "
                             f"{estimator!r}")
        if int(min_events) != min_events or min_events < 0:
            raise ValueError(f"min_events must be a whole number >= 0, got {min_events}")
        self.floor = float(floor)
        self.alpha = float(alpha)
        self.min_events = int(min_events)
        self.estimator = estimator
        if not isinstance(feature_candidate, bool):
            raise ValueError(f"feature_candidate must be true or false, got {feature_candidate!r}")
        self.feature_candidate = feature_candidate
        # events learned when the features' candidate joined (None: not yet), and the
        # candidate that served then (the trial: the one comparison FEATURE_TRIAL events on)
        self._feature_joined_at: int | None = None
        self._feature_before: str | None = None
        # candidate -> (sum of weights, sum of weights x rewards) over the trial's second half;
        # its events, and those whose action was young
        self._trial_sums: dict[str, tuple[float, float]] = {}
        self._trial_young = [0, 0]
        # the recent events, and those that played a young action, weighed exponentially
        self._young_recent = [0.0, 0.0]
        super().__init__(seed=seed)
        self._candidates_: list[_Candidate] = []
        self._estimates = OffPolicyEstimates(rows=0)  # row j: candidate j
        self._serving = None
        self._serial = 0
        self._switches: list[dict] = []
        self._clipped = 0
        self._q_sum = np.zeros(0)  # per action index: sum of rewards, count (DR's model)
        self._q_count = np.zeros(0)
        specs = list(DEFAULT_CANDIDATES) if candidates is None else list(candidates)
        if not specs:
            raise ValueError("an auto policy needs at least one candidate")
        for spec in specs:
            self.add_candidate(spec)
        for action in actions:
            self.add_action(action)

    # -- the constructor's arguments (params() reads them by name) --------------------------------

    @property
    def candidates(self) -> list[dict]:
        """The current candidates' specs ({name, kind, params}), serving order of creation."""
        return [c.spec() for c in self._candidates_]

    # -- candidates ------------------------------------------------------------------------------

    @property
    def serving(self) -> str:
        """The name of the champion, whose distribution (with the floor) is served."""
        return self._serving

    @property
    def switches(self) -> list[dict]:
        """Every champion change: ``{"at", "from", "to", "estimates": {name: figures}}``."""
        return [dict(s) for s in self._switches]

    @property
    def clipped_rewards(self) -> int:
        return self._clipped

    @property
    def n_changes(self) -> int | None:
        """The serving candidate's count of actions whose rewards it found changed (None for a
        kind that does not watch); every candidate's: :meth:`evaluations`."""
        return self._get(self._serving).n_changes()

    @property
    def events_since_refit(self) -> int | None:
        """The serving candidate's events learned since its last refit (None for a kind that
        learns every event at once)."""
        return getattr(self._get(self._serving).policy, "events_since_refit", None)

    @property
    def explained(self) -> float | None:
        """The serving candidate's share of the rewards it explains (the trees'
        :attr:`~online.policies.trees.TreeEnsemblePolicy.explained`; None for a kind without
        it)."""
        return getattr(self._get(self._serving).policy, "explained", None)

    @property
    def feature_columns(self) -> int:
        """The serving candidate's feature columns."""
        return self._get(self._serving).policy.feature_columns

    @property
    def features_left_out(self) -> int:
        """The serving candidate's features left out (its ``max_columns`` reached)."""
        return self._get(self._serving).policy.features_left_out

    def candidate(self, name: str) -> Policy:
        """The policy of candidate ``name`` (KeyError if there is none; ValueError in a serving
        copy, for a candidate that does not serve)."""
        c = self._get(name)
        if c.policy is None:
            self._require_models()
        return c.policy

    def _require_models(self) -> None:
        """``ValueError`` in a serving copy, which holds its serving candidate's model only."""
        if any(c.policy is None for c in self._candidates_):
            raise ValueError("a serving copy of an auto policy (to_state(statistics=False)) "
                             "holds only its serving candidate's model: it decides; load the "
                             "full state to learn or to change its candidates or actions")

    def _get(self, name: str) -> _Candidate:
        for c in self._candidates_:
            if c.name == name:
                return c
        raise KeyError(f"no candidate named {name!r}; candidates: "
                       f"{', '.join(c.name for c in self._candidates_)}")

    def add_candidate(self, spec: dict) -> str:
        """Add a candidate (``{"kind", "params", "name"}``); returns its name. It starts empty
        and is evaluated from now on; the others keep what they learned.

        Unknown kinds, unknown parameters and bad values raise ``ValueError`` naming them.
        """
        self._require_models()
        kind, params = _checked_spec(spec)
        name = spec.get("name") or self._free_name(kind)
        if not isinstance(name, str) or any(c.name == name for c in self._candidates_):
            raise ValueError(f"candidate name {name!r} is not a new string")
        cls = policy_kind(kind).cls
        self._serial += 1
        if "seed" not in params and self.seed is not None:
            params["seed"] = int(np.random.SeedSequence([self.seed, self._serial])
                                 .generate_state(1)[0])
        try:
            policy = cls(**params)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"candidate {name!r} ({kind}, params {spec.get('params') or {}}): "
                             f"{exc}") from None
        for action in self.actions:
            policy.add_action(action)
        if self._refits_deferred and hasattr(policy, "defer_refits"):
            policy.defer_refits()
        self._candidates_.append(_Candidate(name, kind, params, self._serial, policy,
                                            self._n_learned))
        self._estimates.add_rows(self.alpha / 2.0 ** self._serial)
        if self._serving is None:
            self._serving = name
        return name

    def remove_candidate(self, name: str, serving: str | None = None) -> None:
        """Remove candidate ``name``; removing the serving one needs ``serving`` (another
        candidate's name), else :class:`CandidateConflict`."""
        self._require_models()
        victim = self._get(name)
        if serving is not None:
            self._get(serving)
        if name == self._serving or serving == name:
            if serving is None or serving == name:
                raise CandidateConflict(f"candidate {name!r} is serving: name another "
                                        "candidate to serve instead")
        if serving is not None:
            self.serve(serving)
        self._drop([victim])

    def serve(self, name: str) -> None:
        """Make candidate ``name`` the champion now (an operator's choice, recorded as a switch)."""
        self._require_models()
        c = self._get(name)
        if c.name != self._serving:
            self._record_switch(self._get(self._serving), c, reason="operator")

    def set_candidates(self, specs: list[dict], serving: str | None = None) -> None:
        """Make the candidates ``specs``: a spec whose name, kind and params match a current
        candidate keeps it (and all it learned); the others are new; the current ones not
        listed are removed. The serving one may only go if ``serving`` names another."""
        self._require_models()
        if not specs:
            raise ValueError("an auto policy needs at least one candidate")
        current = {c.name: c for c in self._candidates_}
        keep, new = [], []
        for spec in specs:
            if not isinstance(spec, dict):
                raise ValueError(f"a candidate is {{'kind': ..., 'params': {{...}}}}, got {spec!r}")
            c = current.get(spec.get("name") or spec.get("kind"))
            if c is not None and c.kind == spec.get("kind") and (
                    "params" not in spec or _same_params(spec.get("params") or {}, c.params)):
                keep.append(c.name)
            else:
                new.append(spec)
        for spec in new:  # a bad spec is named before a conflict over the serving candidate
            kind, params = _checked_spec(spec)
            try:
                policy_kind(kind).cls(**params)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"candidate {spec.get('name') or kind!r} ({kind}, params "
                                 f"{params}): {exc}") from None
        names = [s.get("name") or s.get("kind") for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"candidate names must differ, got {names}")
        target = serving or (self._serving if self._serving in keep else None)
        if target is None:
            raise CandidateConflict(f"candidate {self._serving!r} is serving and is not in the "
                                    "new list: name the candidate to serve instead")
        if target not in keep and target not in names:
            raise ValueError(f"serving candidate {target!r} is not in the list")
        snapshot = self.to_state()  # all or nothing: a bad spec leaves the policy as it was
        try:
            # the ones not kept go (a same name with other kind or params is a new candidate)
            self._drop([c for c in self._candidates_ if c.name not in keep])
            serving_before = self._serving
            if serving_before not in keep:
                self._serving = None
            for spec in new:
                self.add_candidate(spec)
            if self._serving is None:
                self._serving = target
                self._record_switch_names(serving_before, target, reason="operator")
            elif target != self._serving:
                self.serve(target)
        except Exception:
            restored = type(self).from_state(snapshot)
            self.__dict__.update(restored.__dict__)
            if self._refits_deferred:  # (the restored candidates are new objects: tell them)
                self.defer_refits()
            raise

    def _drop(self, victims: list[_Candidate]) -> None:
        rows = [j for j, c in enumerate(self._candidates_) if c in victims]
        self._estimates.remove_rows(rows)
        self._candidates_ = [c for c in self._candidates_ if c not in victims]

    def set_floor(self, floor: float) -> None:
        """Change the exploration floor (from the next decision; estimates keep their events)."""
        check_floor(floor)
        self.floor = float(floor)

    # -- refits off the serving path: each candidate's, in one job -------------------------------

    def defer_refits(self) -> None:
        """Every candidate's refits (and those of candidates added later) are the caller's."""
        super().defer_refits()
        for c in self._candidates_:  # (a serving copy's other candidates: None, no refits)
            if hasattr(c.policy, "defer_refits"):
                c.policy.defer_refits()

    def refit_due(self) -> bool:
        return any(c.policy.refit_due() for c in self._candidates_
                   if hasattr(c.policy, "refit_due"))

    def start_refit(self):
        jobs = []
        for c in self._candidates_:
            if hasattr(c.policy, "refit_due") and c.policy.refit_due():
                job = c.policy.start_refit()
                if job is not None:
                    jobs.append((c.name, c.policy, job))
        if not jobs:
            return None

        def run() -> list:
            return [(name, policy, job()) for name, policy, job in jobs]

        return run

    def finish_refit(self, result) -> None:
        current = {id(c.policy) for c in self._candidates_}
        for _, policy, outcome in result:
            if id(policy) in current:  # a candidate removed meanwhile has nothing to install
                policy.finish_refit(outcome)

    def _free_name(self, kind: str) -> str:
        taken = {c.name for c in self._candidates_}
        if kind not in taken:
            return kind
        j = 2
        while f"{kind}-{j}" in taken:
            j += 1
        return f"{kind}-{j}"

    # -- actions ---------------------------------------------------------------------------------

    def _add(self, action: Hashable, implicit: bool) -> None:
        self._require_models()
        super()._add(action, implicit)
        for c in self._candidates_:  # (the candidates' inventory is this one: added there)
            c.policy.add_action(action)
        n = len(self._actions)
        if len(self._q_sum) < n:
            self._q_sum = np.concatenate([self._q_sum, np.zeros(n - len(self._q_sum))])
            self._q_count = np.concatenate([self._q_count, np.zeros(n - len(self._q_count))])

    def _forget_horizon(self) -> int | None:
        """The longest of the candidates' (None if one never forgets): what this policy forgets,
        every candidate has forgotten or will forget as it leaves their inventory."""
        horizons = [getattr(c.policy, "_forget_horizon", lambda: None)()
                    for c in self._candidates_]
        return None if None in horizons else max(horizons)

    def _keep_actions(self, keep: np.ndarray) -> None:
        self._q_sum, self._q_count = self._q_sum[keep], self._q_count[keep]
        for c in self._candidates_:  # the forgotten actions still in their inventory (come
            for action in c.policy.actions:  # with events): out of it, then forgotten there
                if action not in self._index:
                    c.policy.remove_action(action)

    def remove_action(self, action: Hashable) -> None:
        self._require_models()
        super().remove_action(action)
        for c in self._candidates_:
            c.policy.remove_action(action)

    # -- acting ----------------------------------------------------------------------------------

    def _mixed(self, policy, x, actions, excluded, checked: bool = True,
               action_features=None) -> tuple[list, np.ndarray]:
        candidates, probs = policy._decide_distribution(x, actions, excluded, checked,
                                                        action_features)
        return candidates, (1.0 - self.floor) * probs + self.floor / len(candidates)

    def _decide_distribution(self, x, actions, excluded, checked: bool = True,
                             action_features=None) -> tuple[list, np.ndarray]:
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        if actions is None and not excluded and not self.actions:
            raise ValueError("no action to choose from: the list is empty or all are excluded")
        return self._mixed(self._get(self._serving).policy, x, actions, excluded, checked,
                           action_features)

    # -- learning --------------------------------------------------------------------------------

    def learn_one(self, x: dict, action: Hashable, reward: float, probability: float = 1.0,
                  action_features=None) -> None:
        """Learn one event (a batch of one: see the class doc)."""
        features = None if action_features is None else {action: action_features}
        self.learn_many([(x, action, reward, probability, None, features)])

    def check_context(self, x: dict) -> None:
        """Raise what any candidate would raise learning ``x``, changing nothing."""
        self._require_models()
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        for c in self._candidates_:
            c.policy.check_context(x)

    def learn_many(self, events: Iterable[tuple]) -> int:
        """Evaluate, then learn, the events with every candidate; returns the number learned.

        An event ``(x, action, reward, probability)`` may carry a fifth item, the actions its
        decision was drawn among (None: the inventory); each candidate is evaluated as it would
        have decided among those (see :meth:`_evaluate`). A sixth, the offered actions'
        features by id, goes to the candidates that score actions by their features.

        As every policy: the events before a bad one are learned, then its ``ValueError`` is
        raised. Events are taken in batches of up to 1024 (probabilities at the batch's start).
        """
        self._require_models()
        batch: list = []
        learned = 0
        try:
            for x, action, reward, probability, *extra in events:
                reward, probability = _check_feedback(reward, probability)
                _check_action(action)
                self.check_context(x)  # no candidate learns an event another would refuse
                if not 0.0 <= reward <= 1.0:
                    self._clipped += 1
                    reward = min(1.0, max(0.0, reward))
                features = extra[1] if len(extra) > 1 else None
                if features is not None and not isinstance(features, dict):
                    raise ValueError("the actions' features must be a dict of action id -> "
                                     f"features, got {type(features).__name__}")
                batch.append((x, action, reward, probability, _offered(extra), features))
                if len(batch) >= 1024:
                    learned += self._learn_batch_events(batch)
        finally:
            learned += self._learn_batch_events(batch)
        return learned

    def _learn_batch_events(self, batch: list) -> int:
        n = len(batch)
        if not n:
            return 0
        self._forget_stale()  # (before the batch's actions are looked up)
        if (self.feature_candidate and self._feature_joined_at is None
                and any(e[5] for e in batch)):
            self._feature_joined_at = self._n_learned  # (once: an operator may remove it)
            if not any(c.kind == FEATURE_KIND for c in self._candidates_):
                self._feature_before = self._serving
                name = self.add_candidate({"kind": FEATURE_KIND})
                self._record_switch(self._get(self._serving), self._get(name),
                                    reason="action features")
        for _, action, *_ in batch:
            # a new action joins the inventory; a removed one's events (a late reward) are
            # learned, not put back
            if action not in self._index:
                self._add(action, implicit=True)
        inventory, ks_active = self._active_inventory()
        rewards = np.array([e[2] for e in batch])
        if inventory:  # (no inventory: no candidate serves anything, nothing to evaluate)
            self._evaluate(batch, rewards, inventory, ks_active)
        # every candidate learns the events as they came: the played action's features by
        # id, and the actions offered (the trees count them)
        for c in self._candidates_:
            c.policy.learn_many(batch)
        ks = np.array([self._index[e[1]] for e in batch])
        start = self._n_learned
        young = int((self._q_count[ks] < YOUNG).sum())  # (each action's events at the start)
        if self._in_trial():
            self._trial_young[0] += len(ks)
            self._trial_young[1] += young
        decay = (1.0 - 1.0 / YOUNG_HORIZON) ** len(ks)
        self._young_recent = [decay * self._young_recent[0] + len(ks),
                              decay * self._young_recent[1] + young]
        np.add.at(self._q_sum, ks, rewards)
        np.add.at(self._q_count, ks, 1.0)
        self._touch(ks)
        batch.clear()
        self._feature_trial(start)
        self._maybe_switch()
        return n

    @property
    def _feature_trial_done(self) -> bool:
        joined = self._feature_joined_at
        return joined is not None and self._n_learned >= joined + FEATURE_TRIAL

    def _in_trial(self) -> bool:
        """Whether the batch about to be learned is in the trial's second half."""
        joined = self._feature_joined_at
        return (joined is not None
                and joined + FEATURE_TRIAL // 2 <= self._n_learned < joined + FEATURE_TRIAL)

    def _feature_trial(self, start: int) -> None:
        """Once, at the batch (its first event: ``start``) that reaches ``FEATURE_TRIAL``
        events after the features' candidate joined and served: unless most of the trial's
        second half played young actions, the candidate that served before it takes the app
        back if its SNIPS estimate there is the higher (see the class doc)."""
        joined = self._feature_joined_at
        if joined is None or not start < joined + FEATURE_TRIAL <= self._n_learned:
            return
        sums, self._trial_sums = self._trial_sums, {}
        (events, young), self._trial_young = self._trial_young, [0, 0]
        serving = self._get(self._serving)
        before = next((c for c in self._candidates_ if c.name == self._feature_before), None)
        if serving.kind != FEATURE_KIND or before is None or 2 * young >= events:
            return

        def snips(name: str) -> float:
            w, wr = sums.get(name, (0.0, 0.0))
            return wr / w if w > 0.0 else 0.0

        if snips(before.name) > snips(serving.name):
            self._record_switch(serving, before, reason="action features: the actions are "
                                "not young, and the former candidate did better over the "
                                f"trial's last {FEATURE_TRIAL // 2} events")

    def _evaluate(self, batch: list, rewards: np.ndarray, inventory: list,
                  ks_active: np.ndarray) -> None:
        """Add the batch's events to every candidate's estimates (each candidate's distribution
        taken before it learns them), over the actions each event's decision was drawn among:
        those it carries (a request that named its actions or excluded some), else the
        inventory. A candidate is evaluated as the policy it would serve: over the actions the
        request offered, with the floor spread over those. An event whose action is not among
        them (a late reward of a removed action) goes to an extra column that no candidate
        serves (probability 0: it counts with weight 0).

        The columns are the actions some event of the batch was drawn among: an action no
        request offered has probability 0 under every candidate, which adds nothing to an
        estimate or a bound (``dr_lower_bounds`` takes maxima of terms >= 0), so requests
        that bring their own actions cost what they offer, not the inventory."""
        n, K = len(batch), len(inventory)
        groups: dict = {}  # the actions offered (None: the inventory) -> their events
        for i, event in enumerate(batch):
            groups.setdefault(event[4], []).append(i)
        position = dict.fromkeys(inventory) if None in groups else {}
        for offer in groups:  # an offered action out of the inventory: a column too
            position.update(dict.fromkeys(offer or ()))
        position = {a: j for j, a in enumerate(position)}
        columns = len(position)
        logged = np.array([position.get(e[1], columns) for e in batch])
        width = columns + 1 if (logged == columns).any() else columns
        offered = np.array([K if e[4] is None else len(e[4]) for e in batch])
        p_min = self.floor / offered
        propensity = np.maximum(np.array([e[3] for e in batch]), p_min)
        # DR's reward model: per-action mean of the rewards before each event (predictable)
        onehot = np.zeros((n, width))
        onehot[np.arange(n), logged] = 1.0
        sums, counts = np.zeros(width), np.zeros(width)
        known = np.array([self._index.get(a, -1) for a in position], np.int64)
        kept = known >= 0
        sums[:columns][kept] = self._q_sum[known[kept]]
        counts[:columns][kept] = self._q_count[known[kept]]
        sums = sums + np.cumsum(onehot * rewards[:, None], axis=0) - onehot * rewards[:, None]
        counts = counts + np.cumsum(onehot, axis=0) - onehot
        q = (sums + 0.5) / (counts + 1.0)
        q_logged = q[np.arange(n), logged]
        C = len(self._candidates_)
        target = np.zeros((C, n, width))  # each candidate's served distribution per event
        for j, c in enumerate(self._candidates_):
            self._fill_target(target[j], c.policy, batch, groups, (position, inventory))
        low, low_c = dr_lower_bounds(target.reshape(C * n, width), np.tile(q, (C, 1)),
                                     np.tile(p_min, C))
        self._estimates.update(
            np.broadcast_to(rewards, (C, n)), target[:, np.arange(n), logged],
            np.broadcast_to(propensity, (C, n)), q_logged=np.broadcast_to(q_logged, (C, n)),
            q_policy=(target * q).sum(axis=2), dr_low=low.reshape(C, n),
            dr_low_c=low_c.reshape(C, n))
        self._trial_terms(target[:, np.arange(n), logged] / propensity, rewards)

    def _trial_terms(self, weights: np.ndarray, rewards: np.ndarray) -> None:
        """Add each candidate's importance weights of a batch (rows: candidates) and their
        products with the rewards to the trial's sums when the batch is in the trial's second
        half (see :meth:`_feature_trial`)."""
        if not self._in_trial():
            return
        for c, w, wr in zip(self._candidates_, weights.sum(axis=1).tolist(),
                            (weights @ rewards).tolist()):
            before = self._trial_sums.get(c.name, (0.0, 0.0))
            self._trial_sums[c.name] = (before[0] + w, before[1] + wr)

    def _fill_target(self, target: np.ndarray, policy, batch: list, groups: dict,
                     columns: tuple[dict, list]) -> None:
        """The candidate's served distribution of each event of ``batch`` into its row of
        ``target``, at the columns (``columns``: position of each action, the inventory) of
        the actions its decision was drawn among (``groups``: offered actions -> events).
        Events that carry their actions are scored in one call where the candidate can
        (``offered_rows``: the trees, LinUCB, ``adf`` with the actions' features each event
        brought), each over its own; else group by group."""
        position, inventory = columns
        offered = [i for offer, rows in groups.items() if offer is not None for i in rows]
        if offered and hasattr(policy, "offered_rows"):
            offers = [batch[i][4] for i in offered]
            probs = policy.offered_rows([batch[i][0] for i in offered], offers,
                                        [batch[i][5] for i in offered])
            sizes = np.array([len(offer) for offer in offers])
            values = (1.0 - self.floor) * np.concatenate(probs) + \
                self.floor / np.repeat(sizes, sizes)
            target[np.repeat(offered, sizes), [position[a] for o in offers for a in o]] = values
            groups = {None: groups[None]} if None in groups else {}
        for offer, rows in groups.items():
            actions = inventory if offer is None else list(offer)
            target[np.ix_(rows, [position[a] for a in actions])] = self._mixed_rows(
                policy, [batch[i] for i in rows], offer, actions)

    def _mixed_rows(self, policy, events: list, offer: tuple | None,
                    actions: list) -> np.ndarray:
        """The candidate's served distribution for each event of ``events`` over ``actions``
        (``offer``: those, None: the inventory), in that order: all rows at once from its
        ``distribution_rows`` when it has one (the trees, LinUCB, Bandit Forest), else
        ``probabilities(x)`` row by row, with the event's action features."""
        rows = np.zeros((len(events), len(actions)))
        at = {a: j for j, a in enumerate(actions)}
        if hasattr(policy, "distribution_rows"):
            names, probs = policy.distribution_rows([e[0] for e in events], offer)
            for a, column in zip(names, probs.T):
                j = at.get(a)
                if j is not None:
                    rows[:, j] = column
        else:
            for i, event in enumerate(events):
                for a, p in policy.probabilities(event[0], offer,
                                                 action_features=event[5]).items():
                    j = at.get(a)
                    if j is not None:
                        rows[i, j] = p
        return (1.0 - self.floor) * rows + self.floor / len(actions)

    # -- switching -------------------------------------------------------------------------------

    def _bands(self) -> list:
        return self._estimates.ips() if self.estimator == "ips" else self._estimates.dr()

    def _maybe_switch(self) -> None:
        if self._switches and self._n_learned - self._switches[-1]["at"] < self.min_events:
            return  # cool-down: see "Switching" in the class doc
        bands = self._bands()
        j_champion = self._row(self._serving)
        champion = bands[j_champion]
        best, best_low = None, champion.high
        held = self._held_by_young_actions(self._candidates_[j_champion])
        for j, band in enumerate(bands):
            if (j != j_champion and band.n >= self.min_events and band.low > best_low
                    and band.value > champion.value
                    and not (held and self._candidates_[j].kind != FEATURE_KIND)):
                best, best_low = j, band.low
        if best is not None:
            self._record_switch(self._candidates_[j_champion], self._candidates_[best],
                                reason="evaluation")

    @property
    def held(self) -> str | None:
        """Why no candidate that learns per action id may replace the serving one now (the
        young-actions guard: see "Actions with features of their own" in the class doc), or
        None: then the bands alone decide."""
        if not self._held_by_young_actions(self._get(self._serving)):
            return None
        events, young = self._young_recent
        return (f"young actions: {young / events:.0%} of the recent events played an action "
                f"with fewer than {YOUNG} events of its own; no candidate that learns per "
                f"action id replaces {self._serving!r} meanwhile")

    def _held_by_young_actions(self, champion: _Candidate) -> bool:
        """Whether the features' candidate serves while most recent events played young
        actions: then no candidate that learns per action id may replace it (see "Actions
        with features of their own" in the class doc)."""
        events, young = self._young_recent
        return champion.kind == FEATURE_KIND and 2.0 * young >= events > 0.0

    def _row(self, name: str) -> int:
        for j, c in enumerate(self._candidates_):
            if c.name == name:
                return j
        raise KeyError(name)

    def _record_switch(self, old: _Candidate, new: _Candidate, reason: str) -> None:
        self._switches.append({
            "at": self._n_learned, "from": old.name, "to": new.name, "reason": reason,
            "estimates": {old.name: self._figures(old), new.name: self._figures(new)}})
        self._serving = new.name

    def _record_switch_names(self, old: str, new: str, reason: str) -> None:
        self._switches.append({"at": self._n_learned, "from": old, "to": new, "reason": reason,
                               "estimates": {new: self._figures(self._get(new))}})

    # -- reading ---------------------------------------------------------------------------------

    def _figures(self, c: _Candidate) -> dict:
        j = self._row(c.name)
        est = self._estimates
        ips, dr = est.ips()[j], est.dr()[j]
        band = ips if self.estimator == "ips" else dr
        snips = float(est.snips()[j])
        return {
            "estimate": _num(band.value), "lower": band.low, "upper": band.high,
            "events": band.n,
            "ips": {"estimate": _num(ips.value), "lower": ips.low, "upper": ips.high},
            "snips": _num(snips),
            "dr": {"estimate": _num(dr.value), "lower": dr.low, "upper": dr.high},
        }

    def evaluations(self) -> list[dict]:
        """Per candidate: name, kind, params, estimate, lower, upper, events, serving, changes
        (actions whose rewards it found changed; None for a kind that does not watch), and the
        IPS / SNIPS / DR figures (``estimate``/``lower``/``upper`` are those of ``estimator``)."""
        return [{"name": c.name, "kind": c.kind, "params": dict(c.params), **self._figures(c),
                 "serving": c.name == self._serving, "created_at": c.created_at,
                 "changes": c.n_changes(),
                 "level": float(1.0 - alpha)}
                for c, alpha in zip(self._candidates_, self._estimates.alpha)]

    # -- state -----------------------------------------------------------------------------------

    def _model_state(self, statistics: bool) -> dict:
        """With ``statistics=False`` (a serving copy), only the serving candidate's model: the
        others' serve no decision (the API reads their figures, which are this policy's, and
        their count of changes). An app's serving snapshot is published every second; with
        a trees candidate that did not serve, most of it was that candidate's."""
        if statistics:
            self._require_models()
        return {
            "candidates": [{**c.spec(), "serial": c.serial, "created_at": c.created_at,
                            "changes": c.n_changes(),
                            "state": c.policy.to_state(statistics)
                            if statistics or c.name == self._serving else None}
                           for c in self._candidates_],
            "estimates": self._estimates.to_state(),
            "serving": self._serving,
            "serial": self._serial,
            "switches": [dict(s) for s in self._switches],
            "clipped": self._clipped,
            "q_sum": self._q_sum.copy(),
            "q_count": self._q_count.copy(),
            "feature_joined_at": self._feature_joined_at,
            "feature_before": self._feature_before,
            "trial_sums": {k: list(v) for k, v in self._trial_sums.items()},
            "trial_young": list(self._trial_young),
            "young_recent": list(self._young_recent),
        }

    @classmethod
    def from_state(cls, state: dict) -> AutoPolicy:
        cls._check_state(state)
        model = state["model"]
        params = state["params"]
        # built field by field: the candidates come from their states, not rebuilt from specs
        policy = cls.__new__(cls)
        Policy.__init__(policy, seed=params.get("seed"))
        policy.floor = float(params["floor"])
        policy.alpha = float(params["alpha"])
        policy.min_events = int(params["min_events"])
        policy.estimator = params["estimator"]
        policy.feature_candidate = bool(params.get("feature_candidate", True))
        joined = model.get("feature_joined_at")
        policy._feature_joined_at = None if joined is None else int(joined)
        policy._feature_before = model.get("feature_before")
        policy._trial_sums = {str(k): (float(v[0]), float(v[1]))
                              for k, v in model.get("trial_sums", {}).items()}
        policy._trial_young = [int(v) for v in model.get("trial_young", (0, 0))]
        policy._young_recent = [float(v) for v in model.get("young_recent", (0.0, 0.0))]
        policy._restore_inventory(state)
        policy._candidates_ = [
            _Candidate(c["name"], c["kind"], dict(c["params"]), int(c["serial"]),
                       None if c["state"] is None else
                       policy_kind(c["kind"]).cls.from_state(c["state"]),
                       int(c["created_at"]),
                       None if c.get("changes") is None else int(c["changes"]))
            for c in model["candidates"]]
        policy._estimates = OffPolicyEstimates.from_state(model["estimates"])
        policy._serving = model["serving"]
        if policy._get(policy._serving).policy is None:
            raise ValueError(f"state: the serving candidate {policy._serving!r} has no model")
        policy._serial = int(model["serial"])
        policy._switches = [dict(s) for s in model["switches"]]
        policy._clipped = int(model["clipped"])
        policy._q_sum = np.asarray(model["q_sum"], float).copy()
        policy._q_count = np.asarray(model["q_count"], float).copy()
        return policy

    @classmethod
    def _unit_test_params(cls):
        yield {"candidates": [{"kind": "linucb"}, {"kind": "bandit-forest",
                                                   "params": {"n_trees": 5, "warmup": 20}}],
               "seed": 42}


def _offered(extra: list) -> tuple | None:
    """The fifth item of an event, the actions its decision was drawn among, as a tuple of
    distinct ids (None, or nothing: the inventory)."""
    if not extra or extra[0] is None:
        return None
    if isinstance(extra[0], (str, bytes)) or not hasattr(extra[0], "__iter__"):
        raise ValueError(f"the actions offered must be a list of action ids, got {extra[0]!r}")
    offered = tuple(dict.fromkeys(extra[0]))
    for action in offered:
        _check_action(action)
    return offered or None


def _checked_spec(spec) -> tuple[str, dict]:
    """The kind and (a copy of the) params of a candidate spec; ``ValueError`` naming what is
    wrong: not a dict, unknown keys, an unknown kind, 'auto', unknown parameter names."""
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
        raise ValueError(f"a candidate is {{'kind': ..., 'params': {{...}}}}, got {spec!r}")
    unknown = sorted(set(spec) - {"kind", "params", "name"})
    if unknown:
        raise ValueError(f"a candidate has kind, params and name; unknown keys: "
                         f"{', '.join(unknown)}")
    kind = spec["kind"]
    if kind == "auto":
        raise ValueError("an auto policy's candidate cannot itself be 'auto'")
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise ValueError(f"a candidate's params are a dict, got {params!r}")
    try:
        policy_kind(kind).check(params)  # ValueError naming the known kinds
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    return kind, dict(params)


def _same_params(a: dict, b: dict) -> bool:
    """Equal params, ignoring a derived seed the caller did not give."""
    b = {k: v for k, v in b.items() if k in a or k != "seed"}
    return a == b


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def check_floor(floor: float) -> None:
    """``ValueError`` unless ``floor`` is an exploration floor an auto policy takes."""
    if not MIN_FLOOR <= floor < 1.0:
        raise ValueError(f"floor must be in [{MIN_FLOOR:g}, 1), got {floor}")
