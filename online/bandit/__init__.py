"""Bandit Forest (Féraud, Allesiardo, Urvoy, Clérot, AISTATS 2016) and its context encoder.

Where the paper is in the code (paper: ``/work/shared/papers/bandit-forest.txt``):

=================================================  ==============================================
paper                                              code
=================================================  ==============================================
eq. (1), eq. (3): variable elimination threshold   ``bounds.variable_radius``
eq. (2), eq. (4): action elimination threshold     ``bounds.action_radius`` (half of it)
Algorithm 2 (VARIABLE SELECTION), VE with eq. (3)  ``kernels.variable_elimination``
Algorithm 3 (ACTION SELECTION), AE with eq. (4)    ``kernels.eliminate_actions`` (stumps, leaves)
Algorithm 4 (DECISION STUMP), lines 9-12           ``kernels.action_elimination``, ``stump_round``
remaining actions of a path (sec. 3.4)             ``kernels.update_union``
Algorithm 6, line 4: the path c_theta(x)           ``kernels.find_path``
Algorithm 6, lines 4-6 and sec. 5 (draw or vote)   ``decide_kernels.paths_status``,
                                                   ``decide_kernels.decide_probabilities``,
                                                   ``decisions.ForestDecisions.decide``
Algorithm 6, lines 9-15 (counts, VE, AE)          ``kernels.learn_event`` (``learn_events``)
Algorithm 6, lines 16-20 (split or leaf)           ``paths.ForestPaths._resolve``, ``_make_leaf``
Algorithm 6, NewPath (random subset of V_c)        ``paths.ForestPaths._new_path``,
                                                   ``storage.ForestStorage.new_slot``
theta: epsilon_theta, D_theta per tree             ``paths.ForestPaths._grow_trees``
sec. 5: IPS weighting of the reward                ``forest.BanditForest._weighted``
=================================================  ==============================================

Modules: ``forest`` (:class:`BanditForest`: parameters, learning), ``decisions`` (acting),
``paths`` (growth and reading of the trees), ``state`` (``to_state``/``from_state``),
``layout`` (the named arrays the kernels take), ``kernels`` (compiled learning, VE, AE),
``decide_kernels`` (compiled acting), ``storage`` (growable arrays), ``bounds`` (eqs. 1-4),
``encoder`` (contexts to binary variables), ``subforest`` (a forest of some of the trees).
"""

from online.bandit.encoder import ContextEncoder
from online.bandit.forest import BanditForest, Decision

__all__ = ["BanditForest", "ContextEncoder", "Decision"]
