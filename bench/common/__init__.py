"""Shared by the benchmark topics: ``paths`` (data and output directories) and ``streams``
(the Bandit Forest paper's supervised-to-bandit streams, used by bench.bandit_forest and
bench.policies)."""
