"""bandit_forest benchmarks: see README.md in this folder."""
