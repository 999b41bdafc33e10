"""How long does one round of a stump (VE with eq. (3), then AE with eq. (4)) take?

Plays ``--events`` events of a stream (default: the synthetic 100-variable, 7-action stream,
sparse contexts, as ``bandit_forest/speed.py``) into ``BanditForest(n_trees=100)``, then times
``kernels.round_end`` on every exploring path (slot) of the forest for ``--contexts`` contexts
of the stream, inside one compiled loop (no Python dispatch per call), from the same state
each repetition; prints the best of ``--repeats`` as microseconds per round, and the shape of
the state (slots, remaining variables, share of cells with two actions or more left).

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


@njit
def _rounds(
    XS,
    slots,
    node_ref,
    vars_,
    n_vars,
    inS,
    T,
    W,
    Rt,
    T1,
    W1,
    R1,
    A,
    union,
    best_var,
    active,
    n_active,
    M,
    depth,
    L,
    eps,
    delta,
    radii,
    scratch,
):
    for r in range(XS.shape[0]):
        for node in slots:
            kernels.round_end(
                XS[r],
                node_ref[node],
                vars_,
                n_vars,
                inS,
                T,
                W,
                Rt,
                T1,
                W1,
                R1,
                A,
                union,
                best_var,
                active,
                n_active,
                M,
                depth,
                L,
                eps,
                delta,
                radii,
                *scratch,
            )


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
    (
        roots,
        node_kind,
        node_var,
        node_child,
        node_ref,
        tree_eps,
        tree_depth,
        vars_,
        n_vars,
        inS,
        T,
        W,
        Rt,
        T1,
        W1,
        R1,
        A,
        union,
        slot_n,
        best_var,
        *_,
        active,
    ) = forest._learn_arrays()
    M = forest._encoder.n_variables
    n_active = int(active.sum())
    radii = forest._radii(n_active)
    slots = np.flatnonzero(node_kind == kernels.SLOT)
    XS = np.concatenate([X for X, _ in stream.chunks(a.contexts)])[: a.contexts]
    XS = (XS != 0).astype(np.uint8)
    width = min(inS.shape[1], M)
    scratch = kernels.round_scratch(width, active.shape[0])
    mutable = (vars_, n_vars, inS, A, union, best_var)
    saved = [m.copy() for m in mutable]
    cells = []
    for node in slots:
        s = node_ref[node]
        played = np.flatnonzero(active & union[s])
        x = XS[0]
        left = [A[s, played, x[i], i].sum() for i in vars_[s, : n_vars[s]]]
        cells.append(np.mean(np.array(left) >= 2) if left else 0.0)

    def run():
        for m, b in zip(mutable, saved):
            m[...] = b
        t0 = time.perf_counter()
        _rounds(
            XS,
            slots,
            node_ref,
            vars_,
            n_vars,
            inS,
            T,
            W,
            Rt,
            T1,
            W1,
            R1,
            A,
            union,
            best_var,
            active,
            n_active,
            M,
            4,
            roots.shape[0],
            0.6,
            forest.delta,
            radii,
            scratch,
        )
        return (time.perf_counter() - t0) / (len(XS) * len(slots)) * 1e6

    run()  # compile
    best = min(run() for _ in range(a.repeats))
    print(
        f"{a.data} after {a.events} events: {len(slots)} exploring paths, "
        f"{np.mean(n_vars[node_ref[slots]]):.1f} variables left on average, "
        f"{np.mean(cells):.2f} of their cells hold two actions or more"
    )
    print(f"round_end: {best:.2f} us per round (best of {a.repeats})")


if __name__ == "__main__":
    main()
