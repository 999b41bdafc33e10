"""Hosted contextual-bandit policies: a shared base, the context encoder, the kind registry."""

from online.policies.registry import (
    DEFAULT_POLICY_KIND,
    POLICY_KINDS,
    PolicyKind,
    make_policy,
    policy_kind,
)

__all__ = ["DEFAULT_POLICY_KIND", "POLICY_KINDS", "PolicyKind", "make_policy", "policy_kind"]
