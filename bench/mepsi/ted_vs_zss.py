"""Compare online.pruning.ted with the pure-Python zss package (pip install zss): CPU seconds.

online.pruning.ted runs its default backend: the numba kernel when numba is installed (the
README's earlier zss figures were taken with the numpy backend).

nice -n 10 python -m bench.mepsi.ted_vs_zss
"""

import time

import numpy as np
import zss
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier

from online.pruning.ted import ted_cross, ted_matrix
from online.pruning.trees import from_sklearn_forest

X, y = load_digits(return_X_y=True)


def to_zss(t):
    kids = t.children()

    def rec(v):
        n = zss.Node(int(t.feature[v]))
        for c in kids[v]:
            n.addkid(rec(c))
        return n

    return rec(0) if t.n_nodes else zss.Node(-1)


for a in [0.0, 0.2]:
    rf = RandomForestClassifier(
        200 if a else 4, criterion="entropy", ccp_alpha=a, random_state=0, n_jobs=1
    ).fit(X[:1257], y[:1257])
    T = from_sklearn_forest(rf)
    if a == 0:
        z = [to_zss(t) for t in T[:2]]
        c0 = time.process_time()
        d = zss.simple_distance(z[0], z[1])
        c1 = time.process_time()
        m = ted_cross(T[:1], T[1:2])
        c2 = time.process_time()
        print(
            "unpruned pair: zss",
            d,
            round(c1 - c0, 3),
            "s cpu; ours",
            m[0, 0],
            round(c2 - c1, 3),
            "s cpu",
        )
    else:
        z = [to_zss(t) for t in T[:40]]
        c0 = time.process_time()
        D = [[zss.simple_distance(z[i], z[j]) for j in range(40)] for i in range(40)]
        c1 = time.process_time()
        M = ted_matrix(T[:40])
        c2 = time.process_time()
        print(
            "ccp0.2 40x40: zss",
            round(c1 - c0, 3),
            "ours",
            round(c2 - c1, 3),
            "agree",
            np.array_equal(np.array(D, float) * 1, M),
        )
