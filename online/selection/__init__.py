"""Feature selection: R-MOTiFS (recursive MCTS feature selection) and its fast k-NN reward.

Where the paper is in the code (paper: ``/work/shared/papers/r-motifs.txt``):

================================================  ===============================================
paper                                             code
================================================  ===============================================
Definition 1: the binary feature selection tree   ``r_motifs._Tree``
Algorithm 1, R-MOTiFS (recursion, tie rule)       ``r_motifs.RMOTiFS.fit``
Algorithm 1, UCTSEARCH                            ``r_motifs.RMOTiFS._uct_search``
TREEPOLICY, EXPAND                                ``r_motifs.RMOTiFS._tree_policy``
BESTCHILD with the UCT of eq. (2)                 ``r_motifs.RMOTiFS._best_child``,
                                                  ``r_motifs.uct``
DEFAULTPOLICY (each feature with probability 1/2) ``r_motifs.RMOTiFS._uct_search``
BACKUP (visits, max reward)                       ``r_motifs.RMOTiFS._backup``
eq. (3): the reward, validated k-NN accuracy      ``knn_reward.KNNReward`` (``knn_kernels``)
eq. (4): feature selection ratio                  ``r_motifs.RMOTiFS.fit`` (``fsr_``)
================================================  ===============================================
"""
