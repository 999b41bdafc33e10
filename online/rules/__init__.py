"""RuDi rule distillation: MCTS-SG statistics (sec. 3.2) and GS-NLN rules (sec. 3.3).

Where the paper is in the code (paper: ``/work/shared/papers/rudi.txt``):

================================================  ===============================================
paper                                             code
================================================  ===============================================
sec. 3.2.1, eq. (1): operators and aggregations   ``operators`` (``Select``, ``SortBy``,
                                                  ``Aggregation``, ``default_aggregations``,
                                                  ``Grammar``), ``events.EventTable``
Algorithm 1, MCTS-SG (K statistics, D operators)  ``mcts_sg.MCTSSG.fit``
Algorithm 2: one search tree (selection,          ``mcts_sg.MCTSSG.grow``
expansion, simulation, backpropagation)
eq. 2: UCT                                        ``mcts_sg.MCTSSG._uct_child``
eq. 3: random completion                          ``mcts_sg.MCTSSG.random_completion``
eqs. 4-5 and 8-9: reward (|corr|, multiple corr)  ``mcts_sg.abs_corr``, ``mcts_sg.multiple_corr``,
                                                  ``mcts_sg.MCTSSG.reward``
eq. 6: best child of the root by mean reward      ``mcts_sg.MCTSSG.fit``
eq. 7: residual of y on the statistics found      ``mcts_sg.residualise``
sec. 3.3.1, eq. 10: percentile literals           ``gs_nln.Binarizer``, ``gs_nln.augment``
sec. 3.3.2, eqs. 11-13: logical layers            ``gs_nln.GSNLN.forward``, ``backward``,
(conjunction, disjunction, Gumbel-softmax)        ``sample_noise``
sec. 3.3.4: pairwise ranking loss                 ``gs_nln.ranking_loss``
rules as text                                     ``gs_nln.GSNLN.expressions``, ``gs_nln.render``
sec. 4.3: fidelity                                ``metrics.fidelity``
the whole method                                  ``rudi.RuDi``
================================================  ===============================================
"""

from online.rules.rudi import RuDi

__all__ = ["RuDi"]
