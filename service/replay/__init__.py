"""`grove replay`: replay supervised streams or logged bandit feedback through Grove's policies.

- :mod:`service.replay.sources` reads the data (supervised-to-bandit streams, OBD / plain logs);
- :mod:`service.replay.policies` holds the policy specs and the in-process drivers;
- :mod:`service.replay.http` drives a running Grove over HTTP;
- :mod:`service.replay.runner` plays the events; :mod:`service.replay.report` writes the outputs;
- :mod:`service.replay.command` is the command line (registered in ``service/cli.py``).

``run(data, label=..., steps=..., in_process=True)`` is the Python API (returns the summary and
the per-step traces). The estimators themselves (replay method, IPS, SNIPS, DR) are pure
functions in ``online.evaluation``.
"""


def run(data, **kwargs):
    """See :func:`service.replay.command.run`."""
    from service.replay.command import run as _run

    return _run(data, **kwargs)
