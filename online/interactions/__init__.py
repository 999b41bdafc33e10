"""Interaction selection among categorical predictors: MCTS-IS (``mcts_is.py``).

Modules: ``fdt`` (the FDT's data and feature nodes), ``screening`` (eqs. 5-6), ``search``
(one iteration of Algorithm 1: eqs. 8-9; ``layout``: the named arrays it takes),
``extraction`` (eq. 7), ``vocabulary`` (category codes, Appendix B.2 grouping).

Where the paper is in the code (paper: ``/work/shared/papers/mcts-is.txt``):

================================================  ===============================================
paper                                             code
================================================  ===============================================
Definitions 1-2: the FDT, data and feature nodes  ``fdt.FDT``, ``fdt.DATA_COLUMNS``,
                                                  ``fdt.FEATURE_COLUMNS``
Algorithm 1, the iteration per sample             ``search.iterate`` -> ``search._learn_rows``
Algorithm 1, lines 14-18: selection with eq. (8)  ``search._phase_a``
sec. 3.2: backpropagation of V, B (p_hat, mu_hat) ``search._phase_b``
eq. (9): sigma_hat of the feature nodes, line 27  ``search._phase_b``
Algorithm 1, lines 22-26: excluded feature nodes  ``search._phase_a`` (found),
                                                  ``search._phase_b`` (updated)
eqs. (5)-(6), line 25: screening statistic s      ``screening.screening_statistic``,
                                                  ``search._phase_b``, ``search._recount_touched``
Theorem 4: excluded feature nodes (s <= lambda)   ``screening.is_excluded`` (nabove = 0)
sec. 3, Expansion (line 13)                       ``search._expand``, ``fdt.FDT.expand``
eq. (7), Theorem 5: extraction of the optimal DT  ``extraction.extract``
eqs. (2)-(3), eq. (13): the DT's leaf weights     ``mcts_is.MCTSInteractions.predict_proba_one``,
                                                  ``extraction.route``
Appendix B.2: grouping of categories              ``vocabulary.Vocabulary``
Appendix B.3: default parameters                  ``mcts_is.MCTSInteractions.__init__``
================================================  ===============================================
"""

from __future__ import annotations

from online.interactions.mcts_is import MCTSInteractions

__all__ = ["MCTSInteractions"]
