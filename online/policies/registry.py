"""The hosted policy kinds: one table from the kind name an app gives to the class it gets.

The service builds its bandit kinds from :data:`POLICY_KINDS` (service/models.py), so the names
``POST /apps`` accepts and the names :func:`make_policy` accepts are the same list.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_POLICY_KIND", "POLICY_KINDS", "PolicyKind", "make_policy", "policy_kind"]


@dataclass(frozen=True)
class PolicyKind:
    """A hosted policy: its kind name, its class (imported on first use), what it is."""

    name: str
    learner: str  # "module:Class"
    summary: str

    @property
    def cls(self) -> type:
        module, _, attr = self.learner.partition(":")
        return getattr(importlib.import_module(module), attr)

    @property
    def parameters(self) -> list[str]:
        """The hyperparameters the class accepts (``seed`` included)."""
        return [p for p in inspect.signature(self.cls.__init__).parameters if p != "self"]

    def check(self, params: dict[str, Any]) -> None:
        """``TypeError`` naming the parameters this kind does not have (values are checked by
        the class itself, with a ``ValueError``)."""
        allowed = self.parameters
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise TypeError(f"policy kind {self.name!r} has no parameter "
                            f"{', '.join(map(repr, unknown))}; its parameters: "
                            f"{', '.join(allowed)}")


POLICY_KINDS: dict[str, PolicyKind] = {
    kind.name: kind for kind in (
        PolicyKind("bandit-forest", "online.policies.bandit_forest:BanditForestPolicy",
                   "Bandit Forest (Feraud et al. 2016): online random forest of decision stumps"),
        PolicyKind("linucb", "online.policies.linucb:LinUCB",
                   "disjoint LinUCB (Li et al. 2010), Sherman-Morrison updates"),
        PolicyKind("trees", "online.policies.trees:TreeEnsemblePolicy",
                   "SquareCB inverse-gap weighting over gradient-boosted regressors "
                   "(one per action), refitted on a sliding window"),
        PolicyKind("adf", "online.policies.adf:ActionFeaturePolicy",
                   "SquareCB over one linear model of the context and the actions' own "
                   "features, hashed (VW's cb_explore_adf with -q: Personalizer's model)"),
        PolicyKind("auto", "online.policies.auto:AutoPolicy",
                   "several candidates learn from one stream; anytime-valid off-policy "
                   "estimates pick the one that serves"),
    )
}

#: the kind an app gets when ``POST /apps`` names none
DEFAULT_POLICY_KIND = "auto"


def policy_kind(kind: str) -> PolicyKind:
    try:
        return POLICY_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown policy kind {kind!r}; known kinds: "
                         f"{', '.join(sorted(POLICY_KINDS))}") from None


def make_policy(kind: str = DEFAULT_POLICY_KIND, actions: Iterable[Hashable] = (),
                seed: int | None = None, **params: Any):
    """A new policy of ``kind`` with ``actions`` in its inventory.

    Unknown kinds and parameter names raise ``ValueError`` / ``TypeError`` naming the known
    ones; bad values raise the class's ``ValueError``.

    >>> policy = make_policy("linucb", actions=["a", "b"], seed=0, alpha=2.0)
    >>> type(policy).__name__, policy.actions, policy.alpha
    ('LinUCB', ['a', 'b'], 2.0)
    >>> make_policy("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown policy kind 'nope'; known kinds: adf, auto, bandit-forest, linucb, trees
    """
    spec = policy_kind(kind)
    spec.check({**params, "seed": seed})
    policy = spec.cls(seed=seed, **params)
    for action in actions:
        policy.add_action(action)
    return policy
