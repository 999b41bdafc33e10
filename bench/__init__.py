"""Grove's benchmarks, one package per topic (see README.md for the index and headline figures).

Run a script from the repository root as a module, e.g.
``python -m bench.bandit_forest.speed --data shuttle``, or through ``grove bench``.
"""
