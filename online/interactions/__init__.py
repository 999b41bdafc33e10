"""Interaction selection among categorical predictors: MCTS-IS (``mcts_is.py``).

Modules: ``fdt`` (the FDT's data and feature nodes), ``screening`` (eqs. 5-6), ``search``
(one iteration of Algorithm 1: eqs. 8-9), ``extraction`` (eq. 7), ``vocabulary`` (category
codes, Appendix B.2 grouping).
"""

from __future__ import annotations

from online.interactions.mcts_is import MCTSInteractions

__all__ = ["MCTSInteractions"]
