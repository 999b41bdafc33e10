"""`grove replay`: replay supervised streams or logged bandit feedback through Grove's policies.

- :mod:`service.replay.sources` reads the data (supervised-to-bandit streams, OBD / plain logs);
- :mod:`service.replay.policies` holds the policy specs and the in-process drivers;
- :mod:`service.replay.http` drives a running Grove over HTTP;
- :mod:`service.replay.runner` plays the events; :mod:`service.replay.report` writes the outputs;
- :mod:`service.replay.command` is the command line (registered in ``service/cli.py``).

The estimators themselves (replay method, IPS, SNIPS, DR) are pure functions in
``online.evaluation``.
"""
