"""mcts_is benchmarks: see README.md in this folder."""
