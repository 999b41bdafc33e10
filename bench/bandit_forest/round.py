"""How long does one round of a stump (VE with eq. (3), then AE with eq. (4)) take?

Plays ``--events`` events of a stream (default: the synthetic 100-variable, 7-action stream,
sparse contexts, as ``bandit_forest/speed.py``) into ``BanditForest(n_trees=100)``, then times
``kernels.stump_round`` (VE, AE, union) on every exploring path (slot) of the forest for
``--contexts`` contexts of the stream, inside one compiled loop (no Python dispatch per
call), from the same state each repetition; prints the best of ``--repeats`` as microseconds
per round, and the shape of the state (slots, remaining variables, share of cells with two
actions or more left).

    python -m bench.bandit_forest.round --events 8000

Used to decide where the exploring phase's time goes (speed.md, sec. 5).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from bench.bandit_forest.players import SparseForestPlayer
from bench.common.streams import BanditStream, load
from online.bandit import kernels
from online.bandit.layout import Bound, as_forest


@njit
def _rounds(XS, slot_nodes, forest, D, eps, bound, work):
    forest = as_forest(forest)
    # read once, as learn_event does (each ``forest.slots`` is a reference count per array)
    ref, slots, active, L = forest.nodes.ref, forest.slots, forest.active, forest.roots.shape[0]
    for r in range(XS.shape[0]):
        for node in slot_nodes:
            kernels.stump_round(XS[r], ref[node], slots, active, D, L, eps, bound, work)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="synthetic")
    p.add_argument("--events", type=int, default=8000)
    p.add_argument("--contexts", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    data = load(a.data)
    stream = BanditStream(data, seed=0)
    player = SparseForestPlayer(data, seed=0)
    for X, y in stream.chunks(a.events):
        player.play(X, y)
    forest = player.policy
    arrays = as_forest(forest._kernel_forest())
    nodes, slots, active = arrays.nodes, arrays.slots, arrays.active
    M = forest._encoder.n_variables
    n_active = int(active.sum())
    bound = Bound(n_active, M, forest.delta, forest._radii(n_active))
    slot_nodes = np.flatnonzero(nodes.kind == kernels.SLOT)
    XS = np.concatenate([X for X, _ in stream.chunks(a.contexts)])[: a.contexts]
    XS = (XS != 0).astype(np.uint8)
    work = kernels.round_work(min(slots.in_S.shape[1], M), active.shape[0])
    mutable = (slots.S, slots.n_S, slots.in_S, slots.A, slots.union, slots.best_var)
    saved = [m.copy() for m in mutable]
    cells = []
    for node in slot_nodes:
        s = nodes.ref[node]
        played = np.flatnonzero(active & slots.union[s])
        x = XS[0]
        left = [slots.A[s, played, x[i], i].sum() for i in slots.S[s, : slots.n_S[s]]]
        cells.append(np.mean(np.array(left) >= 2) if left else 0.0)

    def run():
        for m, b in zip(mutable, saved):
            m[...] = b
        t0 = time.perf_counter()
        _rounds(XS, slot_nodes, arrays, 4, 0.6, bound, work)
        return (time.perf_counter() - t0) / (len(XS) * len(slot_nodes)) * 1e6

    run()  # compile
    best = min(run() for _ in range(a.repeats))
    print(
        f"{a.data} after {a.events} events: {len(slot_nodes)} exploring paths, "
        f"{np.mean(slots.n_S[nodes.ref[slot_nodes]]):.1f} variables left on average, "
        f"{np.mean(cells):.2f} of their cells hold two actions or more"
    )
    print(f"stump_round: {best:.2f} us per round (best of {a.repeats})")


if __name__ == "__main__":
    main()
