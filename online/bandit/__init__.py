"""Bandit Forest (Féraud, Allesiardo, Urvoy, Clérot, AISTATS 2016) and its context encoder."""

from online.bandit.encoder import ContextEncoder
from online.bandit.forest import BanditForest, Decision

__all__ = ["BanditForest", "ContextEncoder", "Decision"]
