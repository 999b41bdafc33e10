"""Golden traces: a hash of a learner's ``to_state()``."""

from __future__ import annotations

import hashlib
import json

import numpy as np


def state_hash(state) -> str:
    """sha256 of a ``to_state()`` dict: arrays by dtype, shape and bytes; the rest as JSON."""
    h = hashlib.sha256()

    def visit(node, path):
        if isinstance(node, np.ndarray):
            a = np.ascontiguousarray(node)
            h.update(f"{path}:{a.dtype.str}:{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(node, dict):
            for key in sorted(node, key=str):
                visit(node[key], f"{path}/{key}")
        elif isinstance(node, (list, tuple)):
            for j, value in enumerate(node):
                visit(value, f"{path}[{j}]")
        else:
            h.update(f"{path}={json.dumps(node, default=str)}".encode())

    visit(state, "")
    return h.hexdigest()
