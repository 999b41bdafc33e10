"""One linear model of the context and the actions' own features: what a Personalizer app's
requests bring (articles with their topic, products with their price), learned across actions.

The other hosted kinds learn one model per action id: an action's features tell them nothing,
and an article published this morning is as unknown as any new id until it has been played.
Azure Personalizer (VW's ``--cb_explore_adf`` with quadratic interactions) scored every action
with one model over the context, the action's features and their products, so that a new
article about football is scored from what football articles earned with similar users.
:class:`ActionFeaturePolicy` is that model, learned online, with SquareCB's exploration.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Iterable, Mapping
from typing import NamedTuple

import numba
import numpy as np

from online.policies.base import Policy, _check_action, _check_feedback
from online.policies.features import checked_number, flatten
from online.policies.squarecb import gamma as igw_gamma
from online.policies.squarecb import inverse_gap_weights

__all__ = ["ActionFeaturePolicy"]

# seeds of the three namespaces' hashes: a context feature, an action's feature and an
# action's id never share a weight because they are spelled alike
CONTEXT_SEED, ACTION_SEED, ID_SEED = 0x1F3D5B79, 0x2545F491, 0x68E31DA4
#: how an event is learned (VW's --cb_type): the played action with weight 1 or 1 / its
#: probability; or every offered action, toward its IPS or doubly robust estimate
CB_TYPES = ("dm", "mtr", "ips", "dr")
BIAS = np.uint64(0xFFFFFFFF)  # the constant feature's key
FIB = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: Fibonacci hashing of a key


class Weights(NamedTuple):
    """NAG's arrays, one entry per hashed weight: the weight, the sum of its squared
    gradients, the largest |value| its feature has had."""

    w: np.ndarray
    G: np.ndarray
    s: np.ndarray


class Tokens(NamedTuple):
    """Hashed features: 32-bit keys (uint64), values and namespaces (uint8, see
    :func:`hashed`); ``start[a]:start[a + 1]`` are candidate a's when several candidates' are
    concatenated."""

    keys: np.ndarray
    values: np.ndarray
    start: np.ndarray
    spaces: np.ndarray


class Rule(NamedTuple):
    """One update's constants: NAG's eta and power_t (VW's ``-l``, ``--power_t``), the
    event's importance weight and VW's ``--l1`` (0: none)."""

    eta: float
    power_t: float
    importance: float
    l1: float = 0.0


ID_SPACE = 0  # the namespace of an action's id: crossed with every context namespace
DEFAULT_SPACE = 32  # VW's default namespace (" "): a feature not under a namespace


def namespace(name: str) -> int:
    """The namespace byte of a flattened feature name, as VW's ``-q`` reads it: the first byte
    of the part before the first dot (``user.age`` -> ``u``, Personalizer's namespaces), or
    the default namespace's space for a name without one.

    >>> chr(namespace("user.age")), chr(namespace("hour")), chr(namespace("Topic.tags.0"))
    ('u', ' ', 'T')
    """
    head, dot, _ = name.partition(".")
    return head.encode("utf-8", "surrogatepass")[0] if dot and head else DEFAULT_SPACE


def crossings(interactions: list[str] | None) -> np.ndarray:
    """The (256, 256) table of which namespaces' features are multiplied: ``interactions``
    as VW's ``-q`` pairs (``"ut"``: namespaces u and t; ``:`` any namespace), None: all. An
    action's id is crossed with every namespace whatever the pairs.

    >>> table = crossings(["ut", ":T"])
    >>> bool(table[ord("u"), ord("t")]), bool(table[ord("t"), ord("u")])
    (True, True)
    >>> bool(table[ord("x"), ord("T")]), bool(table[ord("T"), ord("x")])
    (True, True)
    >>> bool(table[ord("u"), ord(" ")]), bool(table[ord("u"), 0])
    (False, True)
    """
    table = np.zeros((256, 256), np.bool_)
    if interactions is None:
        table[:] = True
    for pair in interactions or ():
        a, b = (slice(None) if c == ":" else c.encode("utf-8", "surrogatepass")[0]
                for c in pair)
        table[a, b] = True
        table[b, a] = True
    table[ID_SPACE, :] = True
    table[:, ID_SPACE] = True
    return table


def _hash(token: str, seed: int) -> int:
    return zlib.crc32(token.encode("utf-8", "surrogatepass"), seed)


def hashed(features: Mapping | None, seed: int) -> tuple[list[int], list[float], list[int]]:
    """The keys, values and namespaces (:func:`namespace`) of ``features`` (nested dicts and
    lists flattened): a number is its name's key with its value, a string ``name=value``'s
    key with 1, a bool 1 or 0; null and 0 add nothing. A bad number is refused as the other
    kinds refuse it (:func:`~online.policies.features.checked_number`).

    >>> keys, values, spaces = hashed({"user": {"age": 30}, "topic": "sport", "new": True}, 0)
    >>> len(keys), values, [chr(c) for c in spaces]
    (3, [30.0, 1.0, 1.0], ['u', ' ', ' '])
    """
    if features is None:
        return [], [], []
    if not isinstance(features, Mapping):
        raise TypeError(f"features must be a dict, got {type(features).__name__}")
    keys: list[int] = []
    values: list[float] = []
    spaces: list[int] = []
    for name, value in features.items():
        items = (flatten(value, str(name)).items() if isinstance(value, (dict, list, tuple))
                 else ((name if type(name) is str else str(name), value),))
        for key, inner in items:
            if inner is None:
                continue
            if isinstance(inner, str):
                keys.append(_hash(f"{key}\x1f{inner}", seed))
                values.append(1.0)
                spaces.append(namespace(key))
                continue
            number = checked_number(key, inner)
            if number != 0.0:
                keys.append(_hash(key, seed))
                values.append(number)
                spaces.append(namespace(key))
    return keys, values, spaces


def _stored(features: Mapping | None) -> dict | None:
    """``features`` as kept in the state: flat, names as text, numpy numbers as Python's."""
    if features is None:
        return None
    return {name: value.item() if isinstance(value, np.generic) else value
            for name, value in flatten(dict(features)).items()}


def _id_key(action: Hashable) -> int:
    return _hash(f"{type(action).__name__}\x1f{action}", ID_SEED)


def _joined(parts: list[Tokens]) -> Tokens:
    """One :class:`Tokens` of ``parts``' keys, values and spaces, part i at
    ``start[i]:start[i + 1]``."""
    start = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(t.keys) for t in parts], out=start[1:])
    return Tokens(np.concatenate([t.keys for t in parts]).astype(np.uint64, copy=False),
                  np.concatenate([t.values for t in parts]).astype(np.float64, copy=False),
                  start, np.concatenate([t.spaces for t in parts]).astype(np.uint8, copy=False))


def _context_tokens(x: Mapping) -> Tokens:
    keys, values, spaces = hashed(x, CONTEXT_SEED)
    return Tokens(np.array(keys, np.uint64), np.array(values), np.zeros(0, np.int64),
                  np.array(spaces, np.uint8))


def _without(tokens: Tokens, ignored: np.ndarray) -> Tokens:
    """``tokens`` without those whose namespace ``ignored`` (a (256,) bool table) marks."""
    keep = ~ignored[tokens.spaces]
    if keep.all():
        return tokens
    return Tokens(tokens.keys[keep], tokens.values[keep], tokens.start, tokens.spaces[keep])


def ignored_namespaces(ignore: list[str] | None) -> np.ndarray:
    """The (256,) table of the namespaces VW's ``--ignore`` values name: each character of
    each value is a namespace's first letter (VW's reading).

    >>> table = ignored_namespaces(["A", "bc"])
    >>> [chr(c) for c in np.flatnonzero(table)]
    ['A', 'b', 'c']
    """
    table = np.zeros(256, np.bool_)
    for value in ignore or ():
        for c in value:
            table[c.encode("utf-8", "surrogatepass")[0]] = True
    table[ID_SPACE] = False  # (an action's id is not in a namespace a name can spell)
    return table


class ActionFeaturePolicy(Policy):
    """SquareCB over one linear model of the context, each action's features and their
    products, hashed, learned by normalized adaptive gradient descent.

    The predicted reward of action a in context x is ``w . phi(x, a)`` with ``phi(x, a) =
    (1, x, z_a, x (x) z_a)``: a constant, the context's features, the action's features
    ``z_a`` and every product of a context feature with an action feature (VW's ``-q`` between
    the shared and the action namespaces). ``z_a`` always holds the action's id as a feature
    of value 1, so ``x (x) z_a`` holds a linear model of the context per action id (what
    disjoint LinUCB fits) and, beside it, one per action feature value that every action with
    that value shares: an article first seen this morning is scored from what its topic, its
    source, its length earned with contexts like this one. Without action features the
    policy is a per-action linear model with a shared intercept and context part.

    Choices (where VW, Personalizer and the papers leave room)
    ----------------------------------------------------------
    * **Features are hashed** into ``2^bits`` weights (VW's default 18 bits, 262,144 weights):
      memory and state are bounded whatever the stream sends (ids as keys or values, a new
      article every minute), nothing is ever left out, and a feature that comes back months
      later finds its weight. A number is its name with its value, a string ``name=value``
      with 1 (one-hot). Collisions share a weight, as in VW; 32-bit CRC keys of each
      namespace, a pair's key ``(context key << 32) | action key``, all spread over the
      table by Fibonacci hashing. Only the weights in use are stored.
    * **Learning: NAG**, the normalized adaptive gradient of Ross, Mineiro & Langford
      ("Normalized online learning", UAI 2013), on the squared loss, VW's
      default update (its ``--adaptive --normalized``): each weight's step is AdaGrad's,
      divided by the largest |value| its feature has had (a price in cents and one in euros
      learn alike: no feature scaling to choose, which a hosted service cannot do for its
      apps), with the global normalizer ``sqrt(t / N)``. The step is taken as VW's
      ``--invariant`` one (Karampatziakis & Langford, "Online importance weight aware
      updates", UAI 2011): the prediction moves ``1 - e^-h`` of the way to the reward, ``h``
      being how far the plain step would move it per unit of error, never past it (twenty
      fresh weights, a new article's, moved it ~2x the error with the plain step: the
      policy chased each click). No importance weights: the regression is direct (as the
      tree-ensemble policy's: E[r | x, a] does not depend on who logged the event); 1 / p
      weights (VW's ``mtr``) changed nothing on ``bench/policies/articles.py``. Predictions
      are not clipped to [0, 1]: clipping the error (VW clamps its predictions to the
      labels' range) stops a prediction below 0 from being corrected by the 0 rewards, and
      on the click stream most predictions drifted below 0.
    * **learning_rate 0.25**, where VW's default is 0.5: the step trades following the
      stream against averaging its noise. Measured at 0.1 / 0.25 / 0.5 (seed 0): clicks
      on ``bench/policies/articles.py`` (rates 0.05-0.27, 20k events) 0.157 / 0.156 /
      0.136 (VW squarecb 0.151); Letter, 10k events, labels with 5 % noise, 0.333 / 0.368 /
      0.383;
      campaigns that come and go (``late_keys.py --as-value``, 40k) 0.78 / 0.82 / 0.80. The
      middle one trails the best by at most 0.015 and was kept; no finer grid was
      tried (the streams are few, and a value fitted to them would say little about an
      app's).
    * **Traffic changes.** AdaGrad's step for a weight updated n times falls as ``1 /
      sqrt(n)``: it averages its last ~sqrt(n) updates, so it keeps following a change (a
      weight updated a million times still moves within ~1,000 of its events; LinUCB's sums,
      in contrast, never forget without a change test). What is slow is finding an action
      that became better while it is predicted poor: it is played with IGW's small
      probability only. With each user's favourite topic moved after 2,000 events
      (``test_it_keeps_following_a_change``), two seeds of three earned 0.9-0.99 within
      1,000-3,000 events and one 0.8 for 6,000 events, then 0.96. The test of held-out errors
      the other kinds run (:mod:`~online.policies.drift`) was tried here and found nothing:
      the played actions' predictions fall at once (their errors averaged -0.10 over the
      100 events after the change, -0.06 over 300), and it is the actions not played whose
      value changed. gamma's n stops growing at ``horizon`` (100,000 events, the trees'
      window), so exploration never falls below what it was there.
    * **Exploration: SquareCB's inverse-gap weighting** (:mod:`~online.policies.squarecb`,
      gamma = ``gamma_scale sqrt(K n)`` as the tree-ensemble policy's). An action never played
      and without features of its own has nothing to be scored from: it gets ``1/K`` (tried
      at once); one with features is scored, which is the point.
    * **Action features** come with each call (``decide(..., action_features={id: dict})``,
      ``learn_one(..., action_features=dict)``, a sixth item of a ``learn_many`` event: the
      offered actions' features by id); the policy keeps the last ones each action came with
      (:meth:`set_action_features` too) and uses them when a call brings none.
    * Rewards are assumed in [0, 1] (gamma is in the units of 1 / reward), as the service
      rescales them.
    * **VW's own settings**, for an app that brings Personalizer's learning settings
      (``service/personalizer/learning_settings.py`` maps ``-l``, ``--power_t``, ``-q``,
      ``--cb_type``, ``--ignore`` and ``--epsilon`` onto ``learning_rate``, ``power_t``,
      ``interactions``, ``cb_type``, ``ignore`` and ``epsilon``). ``power_t`` is VW's: each weight's
      rate is ``G^-p s^(2p - 2)`` and the global normalizer ``(t / N)^(1 - p)`` (its ``gd.cc``; p =
      1/2 is AdaGrad's, the default, and p = 0, Personalizer's, the normalized gradient alone, with
      ``eta`` then a fixed fraction of the error: ``-l 0.001`` moves a prediction ~0.2 % of the way
      each event). ``interactions`` are VW's ``-q`` pairs of namespaces (a feature's namespace: the
      first letter of its name before the first dot, Personalizer's ``{"user": {...}}`` ->
      ``user.age``; a name without a dot is in the default namespace " "), ``:`` any; None, the
      default, multiplies every context feature with every action feature. Two choices: an action's
      id is multiplied with the whole context whatever the pairs (the per-action model is Grove's,
      Personalizer had none), and a pair of two context namespaces or of two action namespaces adds
      no product (context products add the same to every action's score; products of two action
      features are not learned: ``-q ::`` is read as every context feature times every action
      feature). ``cb_type`` ``"mtr"`` weighs an event by 1 / its probability over the mean
      number of actions the events learned so far were drawn among, this one's included (VW's
      importance weight, as its ``learn_MTR`` sets it from ``event_sum / action_sum``: ``G``,
      ``t``, ``N`` and the step grow by it, the step still never passes the reward), ``"dm"``
      (the default) by 1. ``"ips"`` is VW's ``cb_adf`` reduction: every action the
      decision was drawn among (a ``learn_many`` event's offer; ``learn_one``'s: the inventory) is
      learned, in the offer's order, toward reward / probability for the played action and 0 for
      the others, the labels set before any line is learned (VW's ``csoaa_ldf``). Each line is
      learned in VW's ``gd`` order: the error is the prediction's with the weights as they are,
      a line predicted exactly changes nothing (not ``t``, ``N`` nor the scales: at first, a
      reward of 0 and weights of 0), then a feature whose |value| grows rescales its weight,
      then the step; the error's prediction is clamped to the range of the labels learned so
      far, this one's included (VW's ``set_minmax`` and ``finalize_prediction``: from [0, 0];
      a state written before this learns unclamped), the decisions' scores are not. Given
      VW's lines, ``adf``'s scores are VW 9.11's (run with its defaults) to its float32
      weights' precision with ``mtr``, ``ips`` and ``dr``
      (``test_scores_are_vws_after_the_same_events``).
      Where it differs from VW: ``"dm"`` learns the played line only (a direct regression);
      VW's ``cb_adf`` with ``--cb_type dm`` also learns every other offered line toward 0 (its
      ips labels with probability 1); VW's squarecb takes ``mtr`` only, ``adf``'s IGW any
      type.
      ``"dr"`` is VW's doubly robust ``cb_adf``: a reward regressor of its own (its own
      weights over the same features, VW's second weight of ``feature_width`` 2, and its own
      NAG ``t`` and ``N``, as VW's ``gd`` keeps them per weight offset since 9.8; the l1
      gravity shared, VW's ``sd->gravity``) learns the played line toward the reward with
      importance 1 / probability (VW's ``get_cost_pred``), and every offered action's line is
      learned toward its estimate: the regressor's prediction q, and for the played action q +
      (reward - q) / probability, q read before the regressor learned the event. The lines are
      labelled in the offer's order, the regressor learning when the played line comes (the
      lines before it read the regressor before, those after it after), as VW's
      ``gen_cs_example_dr`` does. ``ignore`` drops the features of
      the namespaces whose first letter it names (VW's ``--ignore``; an action's id is never
      dropped). ``l1`` is VW's ``--l1``, the truncated gradient (Langford, Li & Zhang 2009) as VW's
      ``gd`` keeps it: each update adds ``l1`` times its step size (the update over the loss's
      derivative) to a gravity, and every prediction reads each weight shrunk toward 0 by the
      gravity; the stored weights are not truncated (VW truncates them between passes, which an
      online learner never ends, and once the gravity passes 1e3, resetting it to 0: Grove never
      does, a difference that needs ~1e3 / (l1 eta) updates to show). A serving copy holds the
      truncated weights. ``epsilon`` mixes that share of uniform draws into IGW's distribution
      (VW's ``--epsilon``, Personalizer's exploration percentage; 0 by default).

    Parameters
    ----------
    gamma_scale
        The constant of SquareCB's gamma.
    learning_rate
        NAG's eta.
    bits
        log2 of the number of hashed weights (10 to 26).
    horizon
        The events after which gamma stops growing (see above).
    forget_after
        An action removed from the inventory, or come with events and never added, is
        forgotten (its features and play count) this many events after its last one.
    power_t
        VW's ``--power_t`` (0 to 1; 1/2: AdaGrad).
    interactions
        VW's ``-q`` pairs of namespaces (``["ut"]``, ``["::"]``); None: all (see above).
    cb_type
        ``"dm"`` (direct regression), ``"mtr"`` (events weighed by 1 / probability, over the
        mean offer's size), ``"ips"`` or ``"dr"`` (every offered action learned toward its IPS
        or doubly robust estimate).
    epsilon
        The share of uniform draws mixed into the distribution (0 to 1).
    ignore
        VW's ``--ignore``: namespaces' first letters (``["A"]``) whose features are dropped.
    l1
        VW's ``--l1``: truncated-gradient L1 regularization (0: none; see above).
    clip_p
        VW's ``--clip_p``: a probability below it counts as it in ``mtr``'s importance weight
        and ``ips``' and ``dr``'s labels (not in ``dr``'s regressor's weight, as VW's); 0: none.
    seed
        Seeds the decisions' draws.

    Examples
    --------
    New articles every 100 events; a user likes the articles of her topic:

    >>> import random
    >>> rng = random.Random(0)
    >>> policy = ActionFeaturePolicy(seed=1)
    >>> topics = ["sport", "politics", "science", "music"]
    >>> earned = []
    >>> for t in range(3000):
    ...     articles = {f"a{t // 100}-{i}": {"topic": topics[i]} for i in range(4)}
    ...     x = {"likes": rng.choice(topics)}
    ...     d = policy.decide(x, actions=list(articles), action_features=articles)
    ...     reward = float(articles[d.action]["topic"] == x["likes"])
    ...     policy.learn_one(x, d.action, reward, d.probability, articles[d.action])
    ...     earned.append(reward)
    >>> sum(earned[-1000:]) / 1000 > 0.9  # every article new within 100 events
    True
    >>> d = policy.decide({"likes": "music"}, actions=["new-1", "new-2"],
    ...                   action_features={"new-1": {"topic": "music"},
    ...                                    "new-2": {"topic": "sport"}})
    >>> d.action, round(sum(d.probabilities.values()), 12)
    ('new-1', 1.0)
    """

    FORMAT = "grove.adf"
    VERSION = 1

    def __init__(self, gamma_scale: float = 4.0, learning_rate: float = 0.25, bits: int = 18,
                 horizon: int = 100_000, forget_after: int | None = 100_000,
                 power_t: float = 0.5, interactions: list[str] | None = None,
                 cb_type: str = "dm", epsilon: float = 0.0, ignore: list[str] | None = None,
                 l1: float = 0.0, clip_p: float = 0.0, seed: int | None = None):
        for name, value in (("gamma_scale", gamma_scale), ("learning_rate", learning_rate)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        for name, value in (("power_t", power_t), ("epsilon", epsilon), ("clip_p", clip_p)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if cb_type not in CB_TYPES:
            raise ValueError(f"cb_type must be one of {', '.join(CB_TYPES)} (VW's --cb_type: "
                             f"direct regression, weighed by 1 / probability, inverse "
                             f"propensity or doubly robust), got {cb_type!r}")
        if isinstance(l1, bool) or not isinstance(l1, (int, float)) or not 0.0 <= l1 < math.inf:
            raise ValueError(f"l1 must be a finite number >= 0 (VW's --l1), got {l1!r}")
        if ignore is not None:
            if isinstance(ignore, str) or not all(
                    isinstance(v, str) and v for v in ignore):
                raise ValueError("ignore must be a list of namespaces' first letters (VW's "
                                 f"--ignore: 'A', 'ab'), got {ignore!r}")
            ignore = list(ignore)
        if interactions is not None:
            if isinstance(interactions, str) or not all(
                    isinstance(q, str) and len(q) == 2 for q in interactions):
                raise ValueError("interactions must be a list of namespace pairs, two "
                                 f"characters each (VW's -q: 'ut', '::'), got {interactions!r}")
            interactions = list(interactions)
        if isinstance(bits, bool) or not isinstance(bits, int) or not 10 <= bits <= 26:
            raise ValueError(f"bits must be an int in [10, 26], got {bits!r}")
        for name, value in (("horizon", horizon), ("forget_after", forget_after)):
            if value is None and name == "forget_after":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.gamma_scale = float(gamma_scale)
        self.learning_rate = float(learning_rate)
        self.bits = bits
        self.horizon = horizon
        self.forget_after = forget_after
        self.power_t = float(power_t)
        self.interactions = interactions
        self.cb_type = cb_type
        self.epsilon = float(epsilon)
        self.ignore = ignore
        self.l1 = float(l1)
        self.clip_p = float(clip_p)
        self._truncated: tuple | None = None  # (key, the weights truncated by the gravity)
        self._cross = crossings(interactions)
        self._ignored = ignored_namespaces(ignore) if ignore else None
        self._weights = self._zero_weights()
        # dr's reward regressor (VW's second weight of each feature), None for the other types
        self._regressor = self._zero_weights() if cb_type == "dr" else None
        # its t and N (VW >= 9.8: per weight offset); the policy's gravity and labels' range
        # copied in and out around each of its steps (VW's shared_data: one for both)
        self._regressor_totals = np.zeros(7)
        # NAG's t (examples), N (normalizer), --l1's gravity; mtr's events and the actions
        # they were drawn among (VW's event_sum and action_sum)
        self._totals = np.zeros(7)
        self._plays = np.zeros(0, np.int64)  # events learned per action index
        self._features: list = []  # per action index: the last features it came with, or None
        self._tokens: dict = {}  # action -> (its features, Tokens of its id and features)
        super().__init__(seed=seed)

    @property
    def _shift(self) -> int:
        return 64 - self.bits

    # -- the action features ---------------------------------------------------------------------

    def set_action_features(self, action: Hashable, features: Mapping | None) -> None:
        """Give ``action`` (added to the inventory if new) the features it is scored by;
        None: its id only."""
        _check_action(action)
        hashed(features, ACTION_SEED)  # (checked before anything changes)
        if action not in self._index:
            self.add_action(action)
        self._features[self._index[action]] = _stored(features)

    def action_features(self, action: Hashable) -> dict | None:
        """The features ``action`` is scored by when a call brings none (None: its id only)."""
        k = self._index.get(action)
        return None if k is None else self._features[k]

    def _action_tokens(self, action: Hashable, features) -> Tokens:
        """The keys, values and namespaces of ``action``'s id and ``features`` (cached per
        action)."""
        cached = self._tokens.get(action)
        if cached is not None and cached[0] == features:
            return cached[1]
        keys, values, spaces = hashed(features, ACTION_SEED)
        tokens = Tokens(np.array([_id_key(action), *keys], np.uint64), np.array([1.0, *values]),
                        np.zeros(0, np.int64), np.array([ID_SPACE, *spaces], np.uint8))
        if self._ignored is not None:
            tokens = _without(tokens, self._ignored)
        if len(self._tokens) >= 4 * max(len(self._actions), 256):
            self._tokens.clear()  # (actions offered once and never learned: bounded)
        self._tokens[action] = (None if features is None else dict(features), tokens)
        return tokens

    def _context(self, x: Mapping) -> Tokens:
        tokens = _context_tokens(x)
        return tokens if self._ignored is None else _without(tokens, self._ignored)

    def _features_of(self, action: Hashable, given: Mapping | None):
        if given is not None and action in given:
            return given[action]
        k = self._index.get(action)
        return None if k is None else self._features[k]

    # -- deciding --------------------------------------------------------------------------------

    def _decide_distribution(self, x, actions, excluded, checked: bool = True,
                             action_features: Mapping | None = None):
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        candidates, known = self._candidates(actions, excluded)
        scores, featured = self._scores(x, candidates, action_features)
        return candidates, self._weigh(scores, featured, known)

    def _weigh(self, scores: np.ndarray, featured: np.ndarray, known: np.ndarray) -> np.ndarray:
        """The distribution over candidates of ``scores`` (``featured``: with features besides
        their id; ``known``: their action indices, -1 for none)."""
        played = np.zeros(len(known), np.bool_)
        mine = known >= 0
        played[mine] = self._plays[known[mine]] > 0
        unseen = ~featured & ~played  # (nothing of its own to be scored from)
        probs = np.empty(len(known))
        inverse_gap_weights(scores, unseen, self.gamma(len(known)), probs)
        if self.epsilon > 0.0:  # (VW's --epsilon: a share of uniform draws)
            probs = (1.0 - self.epsilon) * probs + self.epsilon / len(known)
        return probs

    def offered_rows(self, xs: list[dict], offers: list[tuple],
                     features: list[Mapping | None] | None = None) -> list[np.ndarray]:
        """For each context of ``xs``, the distribution :meth:`decide` would draw from over the
        actions its request offered (``offers[i]``, distinct ids), with the actions' features
        it brought (``features[i]``; None: those each action last came with): what
        ``probabilities(xs[i], offers[i], action_features=features[i])`` gives, in that order,
        number for number. For an evaluator of requests that bring their own actions
        (``AutoPolicy``): every row scored in one compiled call."""
        if not xs:
            return []
        features = [None] * len(xs) if features is None else features
        contexts, parts, knowns, rows = [], [], [], [0]
        for x, offer, given in zip(xs, offers, features):
            if not isinstance(x, dict):
                raise ValueError(f"a context must be a dict, got {type(x).__name__}")
            contexts.append(self._context(x))
            candidates, known = self._candidates(offer, ())
            parts.extend(self._action_tokens(a, self._features_of(a, given)) for a in candidates)
            knowns.append(known)
            rows.append(rows[-1] + len(candidates))
        actions, context = _joined(parts), _joined(contexts)
        scores = np.empty(rows[-1])
        linear_scores_rows(context, actions, np.array(rows, np.int64), self._cross,
                           self._scoring_weights(), self._shift, scores)
        featured = np.diff(actions.start) > 1
        return [self._weigh(scores[a:b], featured[a:b], known)
                for a, b, known in zip(rows[:-1], rows[1:], knowns)]

    def scores(self, x: dict, actions: list, action_features: Mapping | None = None):
        """The predicted reward of each of ``actions`` in context ``x``."""
        return self._scores(x, actions, action_features)[0]

    def _scores(self, x: dict, actions: list, action_features: Mapping | None):
        """:meth:`scores`, and for each action whether it has features besides its id."""
        context = self._context(x)
        joined = _joined([self._action_tokens(a, self._features_of(a, action_features))
                          for a in actions])
        out = np.empty(len(actions))
        linear_scores(context, joined, self._cross, self._scoring_weights(), self._shift, out)
        return out, np.diff(joined.start) > 1

    def gamma(self, n_candidates: int) -> float:
        """SquareCB's gamma for a decision among ``n_candidates`` actions now."""
        return igw_gamma(self.gamma_scale, n_candidates, min(self._n_learned, self.horizon))

    # -- learning --------------------------------------------------------------------------------

    def learn_one(self, x: dict, action: Hashable, reward: float, probability: float = 1.0,
                  action_features: Mapping | None = None) -> None:
        """Learn that ``action`` (with ``action_features``, or the last it came with) gave
        ``reward`` in context ``x``; the probability weighs the event with ``cb_type``
        ``"mtr"``, and makes the estimates of ``"ips"`` (which learns every action
        of the inventory: the offer of a ``learn_many`` event says which were offered)."""
        given = None if action_features is None else {action: action_features}
        self._learn(x, action, reward, probability, None, given)

    def learn_many(self, events: Iterable[tuple]) -> int:
        """:meth:`learn_one` for each ``(x, action, reward, probability[, offered[,
        features]])``, ``offered`` the actions the decision was drawn among (None: the
        inventory) and ``features`` theirs by id (None: the last each came with); returns the
        number learned."""
        learned = 0
        for x, action, reward, probability, *rest in events:
            offered = rest[0] if rest else None
            given = rest[1] if len(rest) > 1 else None
            if given is not None and not isinstance(given, Mapping):
                raise ValueError("the actions' features must be a dict of action id -> "
                                 f"features, got {type(given).__name__}")
            self._learn(x, action, reward, probability, offered, given)
            learned += 1
        return learned

    def _learn(self, x, action, reward, probability, offered, given) -> None:
        """One event; ``given``: features by action id, or None (see :meth:`learn_many`)."""
        reward, probability = _check_feedback(reward, probability)
        _check_action(action)
        context = self._context(x)
        features = self._learned_features(action, given)
        tokens = self._action_tokens(action, features)  # (checked before anything changes)
        offer = None
        if self.cb_type in ("ips", "dr"):  # (every offered line, checked before any change)
            offer = self._offer_tokens(action, tokens, offered, given)
        self._forget_stale()
        k = self._action_index(action)
        if given is not None and given.get(action) is not None:
            self._features[k] = _stored(given[action])
        importance = 1.0
        if self.cb_type == "mtr":  # VW's learn_MTR: 1 / p over the mean offer's size so far
            self._totals[3] += 1.0
            self._totals[4] += len(self._offer(action, offered))
            importance = self._totals[3] / (max(probability, self.clip_p) * self._totals[4])
        rule = Rule(self.learning_rate, self.power_t, importance, self.l1)
        if self.cb_type == "ips":
            clipped = max(probability, self.clip_p)
            lines = [(t, reward / clipped if a == action else 0.0) for a, t in offer]
        elif self.cb_type == "dr":
            lines = self._dr_lines(context, action, offer, reward, probability)
        else:
            lines = [(tokens, reward)]
        for line, label in lines:
            nag_step(context, line, label, self._weights, self._totals, rule, self._cross,
                     self._shift)
        self._plays[k] += 1
        self._n_learned += 1
        self._last_event[k] = self._n_learned

    def _learned_features(self, action: Hashable, given: Mapping | None):
        """The features ``action`` is learned with: ``given``'s, else the last it came with."""
        features = given.get(action) if given is not None else None
        return self._features_of(action, None) if features is None else features

    def _offer_tokens(self, action, tokens: Tokens, offered, given) -> list[tuple]:
        """VW's ``cb_adf`` lines (``ips``, ``dr``): every offered action (``offered``: None for
        the inventory; ``given``: the features given) with its tokens, in the offer's order
        (``tokens``: the played action's). (An action offered twice is learned once.)"""
        return [(a, tokens if a == action else
                 self._action_tokens(a, self._learned_features(a, given)))
                for a in self._offer(action, offered)]

    def _dr_lines(self, context: Tokens, action, offer: list[tuple], reward: float,
                  probability: float) -> list[tuple[Tokens, float]]:
        """VW's ``gen_cs_example_dr``: each offered line with its doubly robust label, the
        regressor learning the played line (importance 1 / probability) when it comes."""
        regressor, totals, lines = self._regressor, self._totals, []
        own = self._regressor_totals  # (its own t and N; the l1 gravity is the policy's)
        learn = Rule(self.learning_rate, self.power_t, 1.0 / probability, self.l1)
        clipped = max(probability, self.clip_p)  # (the label's, not the regressor's: VW's)
        for a, tokens in offer:
            if a == action:  # (the prediction before the update, clamped: get_cost_pred's)
                own[2], own[5:7] = totals[2], totals[5:7]
                q = nag_step(context, tokens, reward, regressor, own, learn, self._cross,
                             self._shift)
                totals[2], totals[5:7] = own[2], own[5:7]
                lines.append((tokens, q + (reward - q) / clipped))
            else:  # (VW's prediction: clamped to the labels' range)
                q = linear_predict(context, tokens, regressor.w, totals[2], self._cross,
                                   self._shift)
                lines.append((tokens, min(max(q, totals[5]), totals[6])))
        return lines

    def _offer(self, action, offered) -> list:
        """The actions an event was drawn among, once each: ``offered`` (None: the inventory),
        with the played action first if it is not in it."""
        ids = list(dict.fromkeys(self._actions if offered is None else offered))
        if action not in ids:
            ids.insert(0, action)
        return ids

    def check_context(self, x: dict) -> None:
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        hashed(x, CONTEXT_SEED)

    # -- the inventory's arrays --------------------------------------------------------------------

    def _resize(self, n_actions: int, n_columns: int) -> None:
        if n_actions > len(self._plays):
            plays = np.zeros(max(2 * len(self._plays), n_actions, 4), np.int64)
            plays[: len(self._plays)] = self._plays
            self._plays = plays
        self._features.extend([None] * (n_actions - len(self._features)))

    def _forget_horizon(self) -> int | None:
        return self.forget_after

    def _keep_actions(self, keep: np.ndarray) -> None:
        self._plays = self._plays[keep]
        self._features = [self._features[k] for k in keep.tolist()]

    @property
    def feature_columns(self) -> int:
        """The hashed weights in use (learned at least once)."""
        return int(np.count_nonzero(self._weights.s))

    @property
    def features_left_out(self) -> int:
        return 0  # (hashing leaves nothing out)

    # -- state -----------------------------------------------------------------------------------

    def _model_state(self, statistics: bool) -> dict:
        w, G, s = self._weights
        used = np.flatnonzero(s)
        K = len(self._actions)
        # a serving copy holds the weights it decides with (truncated by --l1's gravity)
        state = {"index": used, "w": (w if statistics else self._scoring_weights())[used],
                 "plays": self._plays[:K].copy(), "features": list(self._features[:K])}
        if statistics:
            state.update(G=G[used], s=s[used], totals=self._totals.copy())
            if self._regressor is not None:  # (decisions never read it: not in a serving copy)
                r = np.flatnonzero(self._regressor.s)
                state["regressor"] = {"index": r, **{name: array[r] for name, array in zip(
                    Weights._fields, self._regressor)},
                    "totals": self._regressor_totals[:2].copy()}
        return state

    def _scoring_weights(self) -> np.ndarray:
        """The weights predictions read: VW's ``--l1`` (truncated gradient, Langford, Li &
        Zhang 2009, as VW's ``gd`` keeps it) shrinks each toward 0 by the gravity summed over
        the updates, lazily (the stored weights are not truncated, as VW's are not between
        passes). Without --l1, the weights themselves; with it, a copy made once per change."""
        gravity = self._totals[2]
        if gravity == 0.0:
            return self._weights.w
        key = (self._n_learned, gravity, id(self._weights.w))
        if self._truncated is None or self._truncated[0] != key:
            w = self._weights.w
            self._truncated = (key, np.sign(w) * np.maximum(np.abs(w) - gravity, 0.0))
        return self._truncated[1]

    def _zero_weights(self) -> Weights:
        size = 1 << self.bits
        return Weights(np.zeros(size), np.zeros(size), np.zeros(size))

    def _weights_from(self, state: dict) -> Weights:
        used = np.asarray(state["index"], np.int64).reshape(-1)
        if used.size and (used.min() < 0 or used.max() >= 1 << self.bits):
            raise ValueError(f"weight indices must be in [0, {1 << self.bits})")
        weights = self._zero_weights()
        for name, array in zip(Weights._fields, weights):
            if name in state:
                array[used] = np.asarray(state[name], float).reshape(-1)
        if "s" not in state:  # (a serving copy: decides, never learns)
            weights.s[used] = 1.0
        return weights

    def _load_model_state(self, state: dict) -> None:
        self._weights = self._weights_from(state)
        if self.cb_type == "dr":  # (a serving copy has none: it never learns)
            given = state.get("regressor")
            self._regressor = (self._weights_from(given) if isinstance(given, dict) else
                               self._zero_weights())
            self._regressor_totals = np.zeros(7)
            if isinstance(given, dict) and "totals" in given:
                self._regressor_totals[:2] = np.asarray(given["totals"], float).reshape(-1)[:2]
        totals = np.zeros(7)  # (states written before --l1 hold t and N only, before mtr's
        given = np.asarray(state.get("totals", (0.0, 0.0)), float).reshape(-1)[:7]  # 3)
        totals[: given.size] = given
        if given.size < 7:  # (learned unclamped: it carries on so, its range never binding)
            totals[5:7] = -np.finfo(float).max, np.finfo(float).max
        self._totals = totals
        self._truncated = None
        K = len(self._actions)
        self._plays = np.zeros(max(K, 4), np.int64)
        self._plays[:K] = np.asarray(state["plays"], np.int64).reshape(-1)
        features = list(state["features"])
        if len(features) != K:
            raise ValueError(f"features must hold one entry per action ({K}), got "
                             f"{len(features)}")
        self._features = [None if f is None else dict(f) for f in features]

    @classmethod
    def _unit_test_params(cls):
        yield {"seed": 42}


# -- compiled kernels ----------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(key, shift):
    return np.int64((key * FIB) >> np.uint64(shift))


@numba.njit(cache=True, nogil=True)
def linear_scores(context, actions, cross, w, shift, out):
    """``out[a] = w . phi(x, a)`` for each candidate a of ``actions`` (:class:`Tokens`);
    ``cross`` says which namespaces' features are multiplied (:func:`crossings`)."""
    _scores_of(context.keys, context.values, context.spaces, actions, 0, out.shape[0], cross,
               w, shift, out)


@numba.njit(cache=True, nogil=True)
def linear_scores_rows(contexts, actions, rows, cross, w, shift, out):
    """:func:`linear_scores` of many contexts at once: context r's tokens are ``contexts``'
    ``start[r]:start[r + 1]``, its candidates are ``actions`` ``rows[r]:rows[r + 1]``, and
    their scores go to the same positions of ``out`` (the same numbers, in the same order)."""
    for r in range(rows.shape[0] - 1):
        c0, c1 = contexts.start[r], contexts.start[r + 1]
        _scores_of(contexts.keys[c0:c1], contexts.values[c0:c1], contexts.spaces[c0:c1],
                   actions, rows[r], rows[r + 1], cross, w, shift, out)


@numba.njit(cache=True, nogil=True, inline="always")
def _scores_of(xk, xv, xs, actions, a0, a1, cross, w, shift, out):
    shared = w[_slot(BIAS, shift)]
    for i in range(xk.shape[0]):
        shared += w[_slot(xk[i], shift)] * xv[i]
    for a in range(a0, a1):
        total = shared
        for j in range(actions.start[a], actions.start[a + 1]):
            zk, zs = actions.keys[j], actions.spaces[j]
            term = w[_slot(zk, shift)]
            for i in range(xk.shape[0]):
                if cross[xs[i], zs]:
                    term += w[_slot((xk[i] << np.uint64(32)) | zk, shift)] * xv[i]
            total += term * actions.values[j]
        out[a] = total


@numba.njit(cache=True, nogil=True, inline="always")
def _rate_decay(G, s, power_t):
    """VW's per-weight rate with ``--adaptive --normalized``: ``G^-p s^(2p - 2)``, G in VW's
    units (the squared loss's gradient is twice the error: 4x the kept sum)."""
    if power_t == 0.5:
        return 1.0 / (2.0 * s * math.sqrt(G))
    return (4.0 * G) ** -power_t * s ** (2.0 * power_t - 2.0)


@numba.njit(cache=True, nogil=True, inline="always")
def _phi(context, action, cross, shift):
    """phi(x, a): the weight slots and values of the constant, ``context``'s and ``action``'s
    :class:`Tokens` and their products where ``cross`` says (``n`` of them)."""
    xk, xv, xs = context.keys, context.values, context.spaces
    nx, nz = xk.shape[0], action.keys.shape[0]
    n = 1 + nx + nz + nx * nz
    slots = np.empty(n, np.int64)
    values = np.empty(n)
    slots[0], values[0] = _slot(BIAS, shift), 1.0
    m = 1
    for i in range(nx):
        slots[m], values[m] = _slot(xk[i], shift), xv[i]
        m += 1
    for j in range(nz):
        zk, zv, zs = action.keys[j], action.values[j], action.spaces[j]
        slots[m], values[m] = _slot(zk, shift), zv
        m += 1
        for i in range(nx):
            if cross[xs[i], zs]:
                slots[m] = _slot((xk[i] << np.uint64(32)) | zk, shift)
                values[m] = xv[i] * zv
                m += 1
    return slots, values, m


@numba.njit(cache=True, nogil=True, inline="always")
def _predicted(w, slots, values, n, gravity):
    """w . phi, each weight read shrunk toward 0 by ``gravity`` (--l1's, VW's ``sd->gravity``)."""
    predicted = 0.0
    for m in range(n):
        wk = w[slots[m]]
        if gravity > 0.0:
            wk = math.copysign(max(abs(wk) - gravity, 0.0), wk)
        predicted += wk * values[m]
    return predicted


@numba.njit(cache=True, nogil=True)
def linear_predict(context, action, w, gravity, cross, shift):
    """The prediction of one line (``context``, ``action``: :class:`Tokens`) by weights ``w``
    read through ``gravity``: what :func:`nag_step` predicts before it updates (unclamped)."""
    slots, values, n = _phi(context, action, cross, shift)
    return _predicted(w, slots, values, n, gravity)


@numba.njit(cache=True, nogil=True)
def nag_step(context, action, reward, weights, totals, rule, cross, shift):
    """One NAG update (Ross, Mineiro & Langford 2013) of ``weights`` on the squared loss of
    ``phi(x, a)`` (``context``'s and ``action``'s :class:`Tokens`, multiplied where
    ``cross`` says) against ``reward``, as VW's ``gd`` takes it with ``--adaptive
    --normalized --invariant`` and ``rule``'s (:class:`Rule`) eta, power_t, importance
    weight and l1; ``totals`` holds t, N, the l1 gravity (VW's ``sd->gravity``), mtr's two
    counts (unused here) and the labels' range (VW's ``sd->min_label``, ``max_label``). Returns
    the prediction before the update, clamped to that range (VW's ``ec.pred.scalar``)."""
    slots, values, n = _phi(context, action, cross, shift)
    w, G, s = weights
    p, importance = rule.power_t, rule.importance
    # VW's order: the prediction (the error's) with the weights as they are; a line it
    # predicts exactly changes nothing, not t, N nor the scales (gd's compute_update skips a
    # zero loss: the first events of a fresh model, predicting 0 for a reward of 0)
    predicted = _predicted(w, slots, values, n, totals[2])
    # VW's scorer widens the labels' range by this label (``set_minmax``, from [0, 0]) and gd
    # takes the error from the prediction clamped to it (``finalize_prediction``); the scores
    # decisions read are not clamped (``csoaa_ldf`` ranks by the raw partial predictions)
    totals[5] = min(totals[5], reward)
    totals[6] = max(totals[6], reward)
    predicted = min(max(predicted, totals[5]), totals[6])
    error = predicted - reward
    if error == 0.0:
        return predicted
    # then a weight is put in the units of its feature's largest |value| to the power 2p - 2
    # (its steps are ~ s^(2p - 2)): a larger value rescales it by (s / |x|)^(2 - 2p), s / |x|
    # for AdaGrad's p = 1/2 (the normalized gradient alone, p = 0, by (s / |x|)^2)
    for m in range(n):
        v = abs(values[m])
        k = slots[m]
        if v > s[k]:
            if s[k] > 0.0:
                w[k] *= s[k] / v if p == 0.5 else (s[k] / v) ** (2.0 - 2.0 * p)
            s[k] = v
    totals[0] += importance
    for m in range(n):
        if s[slots[m]] > 0.0:
            totals[1] += importance * (values[m] / s[slots[m]]) ** 2
    if totals[1] <= 0.0:
        return predicted
    # the global normalizer, (t / N)^(1 - p): sqrt(t / N) for p = 1/2
    ratio = totals[0] / totals[1]
    multiplier = math.sqrt(ratio) if p == 0.5 else ratio ** (1.0 - p)
    for m in range(n):
        k = slots[m]
        g = error * values[m]
        G[k] += importance * g * g
    per_update = 0.0  # the prediction's change per unit of update (VW's pred_per_update)
    for m in range(n):
        k = slots[m]
        if G[k] > 0.0 or p == 0.0:
            per_update += values[m] * values[m] * _rate_decay(G[k], s[k], p)
    per_update *= multiplier
    if per_update <= 0.0:
        return predicted
    # the importance-aware step (squared loss): the prediction moves (1 - e^-h) of the way
    # to the reward, never past it, h = 2 eta importance per_update (a raw step moved it by h
    # times the error: 2 with 20 new weights)
    h = 2.0 * rule.eta * importance * per_update
    update = error * -math.expm1(-h) / per_update
    for m in range(n):
        k = slots[m]
        if G[k] > 0.0 or p == 0.0:
            w[k] -= update * values[m] * _rate_decay(G[k], s[k], p) * multiplier
    if rule.l1 > 0.0 and abs(update) > 1e-8 and abs(2.0 * error) > 1e-8:
        # VW's truncated gradient: the gravity grows by l1 times the step's size, its update
        # over the loss's derivative (2 x the error): (1 - e^-h) / (2 pred_per_update)
        totals[2] += rule.l1 * update / (2.0 * error)
    return predicted
