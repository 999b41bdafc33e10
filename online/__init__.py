"""Grove's learners: pure algorithms on numpy (and river's base classes).

Nothing here touches HTTP, Redis or the file system. Every learner exports its state as plain
numpy arrays plus JSON-able metadata (``to_state()``) and restores it with ``from_state()``.

Names are resolved lazily so that importing one learner does not import the others (the
batch algorithms pull in scikit-learn; the decide path should not pay for that).
"""

from __future__ import annotations

import importlib

# public name -> module that defines it
_EXPORTS = {
    "BanditForest": "online.bandit.forest",
    "Decision": "online.decision",
    "ContextEncoder": "online.bandit.encoder",
    "MCTSInteractions": "online.interactions.mcts_is",
    "RMOTiFS": "online.selection.r_motifs",
    "MEPSI": "online.pruning.mepsi",
    "RuDi": "online.rules.rudi",
    "Policy": "online.policies.base",
    "FeatureEncoder": "online.policies.features",
    "LinUCB": "online.policies.linucb",
    "BanditForestPolicy": "online.policies.bandit_forest",
    "TreeEnsemblePolicy": "online.policies.trees",
    "AutoPolicy": "online.policies.auto",
    "make_policy": "online.policies.registry",
    "POLICY_KINDS": "online.policies.registry",
    "DEFAULT_POLICY_KIND": "online.policies.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'online' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
