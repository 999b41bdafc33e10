"""Feature selection: R-MOTiFS (recursive MCTS feature selection) and its fast k-NN reward."""
