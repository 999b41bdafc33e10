"""Tree edit distance (Definition 3.2 of MEPSI): hand-computed cases and a brute-force check."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from online.pruning import sed_bits, ted_avx512, ted_compiled
from online.pruning.ted import (
    postorder_sed_matrix,
    ted,
    ted_cross,
    ted_matrix,
    ted_pairs,
)
from online.pruning.trees import Tree, from_sklearn_forest, from_sklearn_tree

# the compiled kernel where numba is installed; the numpy fill always
BACKENDS = ["numpy"] + (["numba"] if ted_compiled.AVAILABLE else [])


def T(feature, children):
    return Tree.from_children(feature, children)


EMPTY = Tree(np.zeros(0), np.zeros(0))
# a(b, c): root testing 0 with children testing 1 and 2
A_BC = T([0, 1, 2], [[1, 2], [], []])


@pytest.mark.parametrize(
    "h, g, expected",
    [
        (A_BC, A_BC, 0),
        (A_BC, T([7, 1, 2], [[1, 2], [], []]), 1),  # UPDATE the root's feature
        (A_BC, T([0, 1, 9], [[1, 2], [], []]), 1),  # UPDATE a child
        (
            T([0, 5, 1, 2], [[1], [2, 3], [], []]),
            A_BC,
            1,
        ),  # REMOVE b: its children move up to a
        (
            A_BC,
            T([0, 5, 1, 2], [[1], [2, 3], [], []]),
            1,
        ),  # INSERT b above both children
        (A_BC, T([0, 1], [[1], []]), 1),  # REMOVE a leaf-level internal node
        (A_BC, T([0, 1, 2, 3], [[1, 2, 3], [], [], []]), 1),  # INSERT a third child
        (
            A_BC,
            T([0, 2, 1], [[1, 2], [], []]),
            2,
        ),  # ordered trees: swapping children costs 2
        (A_BC, T([0, 1, 2], [[1], [2], []]), 2),  # 2 moves under 1: REMOVE + INSERT
        (A_BC, T([4, 5, 6], [[1, 2], [], []]), 3),  # three UPDATEs
        (A_BC, T([9], [[]]), 3),  # two REMOVEs and one UPDATE
        (A_BC, EMPTY, 3),
        (EMPTY, A_BC, 3),
        (EMPTY, EMPTY, 0),
    ],
)
def test_hand_computed_distances(h, g, expected):
    assert ted(h, g) == expected


def test_operation_costs_are_used():
    h, g = T([0, 1], [[1], []]), T([0, 2], [[1], []])
    assert ted(h, g, update=5.0) == 2.0  # REMOVE 1 + INSERT 2 beats an UPDATE of 5
    assert ted(h, g, update=1.5) == 1.5
    assert ted(A_BC, EMPTY, remove=2.0) == 6.0
    assert ted(EMPTY, A_BC, insert=0.5) == 1.5
    # asymmetric costs: turning h into g is not turning g into h
    big, small = T([0, 1, 2], [[1, 2], [], []]), T([0], [[]])
    assert ted(big, small, insert=1.0, remove=3.0) == 6.0
    assert ted(small, big, insert=1.0, remove=3.0) == 2.0


def _brute(h: Tree, g: Tree, ins=1.0, rem=1.0, upd=1.0) -> float:
    """The forest recursion of TED straight from the definition (exponential states, memoized)."""

    def conv(t):
        kids = t.children()

        def rec(v):
            return (int(t.feature[v]), tuple(rec(c) for c in kids[v]))

        return (rec(0),) if t.n_nodes else ()

    def size(F):
        return sum(1 + size(c) for _, c in F)

    @functools.cache
    def d(F, G):
        if not F and not G:
            return 0.0
        if not F:
            return size(G) * ins
        if not G:
            return size(F) * rem
        (fl, fc), (gl, gc) = F[-1], G[-1]
        return min(
            d(F[:-1] + fc, G) + rem,  # REMOVE the rightmost root of F
            d(F, G[:-1] + gc) + ins,  # INSERT the rightmost root of G
            d(F[:-1], G[:-1])
            + d(fc, gc)
            + (upd if fl != gl else 0.0),  # map the two roots
        )

    return d(conv(h), conv(g))


def _random_tree(rng, n, n_features=3):
    if n == 0:
        return EMPTY
    parent = [-1] + [int(rng.integers(0, v)) for v in range(1, n)]
    kids = [[] for _ in range(n)]
    for v in range(1, n):
        kids[parent[v]].append(v)
    return T(rng.integers(0, n_features, n), kids)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("costs", [(1.0, 1.0, 1.0), (1.0, 2.0, 1.5), (0.5, 1.0, 3.0)])
def test_agrees_with_brute_force_on_random_trees(costs, backend):
    rng = np.random.default_rng(42)
    ins, rem, upd = costs
    for _ in range(60):
        h = _random_tree(rng, int(rng.integers(0, 8)))
        g = _random_tree(rng, int(rng.integers(0, 8)))
        assert ted(h, g, insert=ins, remove=rem, update=upd, backend=backend) == pytest.approx(
            _brute(h, g, ins, rem, upd)
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_matrix_matches_pairs_whatever_the_chunking(backend):
    rng = np.random.default_rng(7)
    trees = [_random_tree(rng, int(rng.integers(0, 9))) for _ in range(14)]
    expected = np.array([[_brute(a, b) for b in trees] for a in trees])
    for max_cells in (50, 400, 10_000_000):  # one pair per batch ... everything at once
        D = ted_matrix(trees, max_cells=max_cells, backend=backend)
        assert np.array_equal(D, expected)
    asym = np.array([[_brute(a, b, 1.0, 2.0, 1.0) for b in trees[:5]] for a in trees])
    assert np.allclose(
        ted_cross(trees, trees[:5], remove=2.0, max_cells=300, backend=backend), asym
    )
    assert np.allclose(
        ted_matrix(trees, remove=2.0, backend=backend),
        [[_brute(a, b, 1.0, 2.0, 1.0) for b in trees] for a in trees],
    )
    I, J = np.array([3, 0, 13, 5]), np.array([3, 13, 0, 6])
    assert np.array_equal(ted_pairs(trees, I, J, backend=backend), expected[I, J])


def test_compiled_kernel_matches_its_pure_python_reference_on_forest_trees():
    """The compiled Zhang-Shasha against the same function run by the interpreter, the numpy
    backend and (on small trees) the brute-force recursion, on unpruned scikit-learn trees."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(int)
    forest = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, y)
    trees = from_sklearn_forest(forest) + [EMPTY, A_BC]
    assert max(t.n_nodes for t in trees) > 10
    I, J = np.triu_indices(len(trees), 1)
    reference = getattr(ted_compiled._zs_pairs, "py_func", ted_compiled._zs_pairs)
    for ins, rem, upd in [(1.0, 1.0, 1.0), (1.0, 2.0, 0.5)]:
        expected = np.zeros(len(I))
        reference(
            *ted_compiled.flatten(trees), I, J, ins, rem, upd, expected
        )  # the interpreted kernel
        compiled = ted_compiled.pairs(trees, I, J, insert=ins, remove=rem, update=upd)
        assert np.array_equal(compiled, expected)
        # the mirrored trees (right-path key roots) have the same distances
        mirrored = np.zeros(len(I))
        reference(*ted_compiled.flatten(trees, mirror=True), I, J, ins, rem, upd, mirrored)
        assert np.array_equal(mirrored, expected)
        numpy_fill = ted_matrix(trees, insert=ins, remove=rem, update=upd, backend="numpy")
        assert np.allclose(numpy_fill[I, J], expected)
    small = [t for t in trees if t.n_nodes <= 7]
    assert np.array_equal(
        ted_matrix(small), [[_brute(a, b) for b in small] for a in small]
    )
    with pytest.raises(ValueError):
        ted(A_BC, A_BC, backend="fortran")


def test_metric_properties_on_sklearn_trees():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    forest = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0).fit(
        X, y
    )
    trees = from_sklearn_forest(forest)
    D = ted_matrix(trees)
    assert np.all(np.diag(D) == 0)
    assert np.array_equal(D, D.T)
    n = np.array([t.n_nodes for t in trees])
    assert np.all(D >= np.abs(n[:, None] - n[None, :]))  # at least the size difference
    assert np.all(D <= n[:, None] + n[None, :])  # at most remove all + insert all
    assert np.all(
        D[:, :, None] <= D[:, None, :] + D[None, :, :] + 1e-9
    )  # triangle inequality


def test_sklearn_adapter_keeps_internal_nodes_in_order():
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 1], [2, 0]], dtype=float)
    y = np.array([0, 1, 1, 0, 1, 0])
    clf = DecisionTreeClassifier(random_state=0).fit(X, y)
    t = from_sklearn_tree(clf)
    sk = clf.tree_
    internal = sk.children_left != -1
    assert t.n_nodes == int(internal.sum())
    # preorder walk of scikit-learn's internal nodes, left before right
    order, stack = [], [0]
    while stack:
        v = stack.pop()
        if sk.children_left[v] == -1:
            continue
        order.append(v)
        stack.extend([sk.children_right[v], sk.children_left[v]])
    assert t.feature.tolist() == sk.feature[order].tolist()
    stump = DecisionTreeClassifier().fit(X, np.zeros(6))
    assert from_sklearn_tree(stump).n_nodes == 0
    et = ExtraTreesClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert len(from_sklearn_forest(et)) == 3


def test_tree_validation_and_state_round_trip():
    with pytest.raises(ValueError):
        Tree(np.array([1, 2]), np.array([0, -1]))  # root must be node 0
    with pytest.raises(ValueError):
        Tree(np.array([1, 2, 3]), np.array([-1, 2, 1]))  # 1 and 2 form a cycle
    with pytest.raises(ValueError):
        Tree(np.array([1, 2]), np.array([-1]))
    t = Tree.from_state(A_BC.to_state())
    assert (
        t.feature.tolist() == A_BC.feature.tolist()
        and t.parent.tolist() == A_BC.parent.tolist()
    )
    assert ted(t, A_BC) == 0
    with pytest.raises(ValueError):
        Tree.from_state({"format": "other", "version": 1})


@pytest.mark.parametrize("costs", [(1.0, 1.0, 1.0), (1.0, 2.0, 1.5)])
def test_postorder_sed_is_a_lower_bound(costs):
    ins, rem, upd = costs
    rng = np.random.default_rng(11)
    trees = [_random_tree(rng, int(rng.integers(0, 9))) for _ in range(25)]
    D = ted_matrix(trees, insert=ins, remove=rem, update=upd)
    lb = postorder_sed_matrix(trees, insert=ins, remove=rem, update=upd)
    assert np.all(lb <= D + 1e-9)
    assert np.all(np.diag(lb) == 0)
    # on paths (every node has one child) postorder is the whole structure: SED equals TED
    paths = [
        T(list(rng.integers(0, 3, k)), [[v + 1] for v in range(k - 1)] + [[]])
        for k in (1, 3, 5, 6)
    ]
    assert np.array_equal(postorder_sed_matrix(paths), ted_matrix(paths))


@pytest.mark.skipif(not ted_compiled.AVAILABLE, reason="the compiled backend needs numba")
def test_threads_and_integer_tables_give_the_same_distances(monkeypatch):
    """Threads share the pairs in chunks (forced here on small trees): same distances whatever
    n_jobs; integer costs run on int32 tables, other costs on float64, same distances too."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 6))
    y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(int)
    trees = from_sklearn_forest(RandomForestClassifier(10, random_state=0).fit(X, y))
    trees += [EMPTY, A_BC]
    monkeypatch.setattr(ted_compiled, "PARALLEL_MIN_CELLS", 0)
    I, J = np.triu_indices(len(trees), 1)
    before = ted_compiled.KERNEL_CPU["total"]
    one = ted_compiled.pairs(trees, I, J, n_jobs=1)  # int32 tables
    two = ted_compiled.pairs(trees, I, J, n_jobs=2)
    assert np.array_equal(one, two)
    assert ted_compiled.KERNEL_CPU["total"] > before
    halves = ted_compiled.pairs(trees, I, J, insert=0.5, remove=0.5, update=0.5, n_jobs=2)
    assert np.array_equal(2 * halves, one)  # float64 tables
    assert np.array_equal(ted_matrix(trees, n_jobs=2)[I, J], one)
    costs = {"insert": 1.0, "remove": 2.0, "update": 1.5}
    for n_jobs in (1, 2):
        assert np.array_equal(
            postorder_sed_matrix(trees, n_jobs=n_jobs, **costs),
            postorder_sed_matrix(trees, backend="numpy", **costs),
        )
    assert ted_compiled.n_threads(None) == 1 and ted_compiled.n_threads(-1) >= 1
    with pytest.raises(ValueError):
        ted_compiled.n_threads(0)


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_sed_bound_takes_integer_and_fractional_costs_together(backend):
    # insert and remove integers, update fractional: the numpy rows used to fail to cast
    rng = np.random.default_rng(5)
    trees = [_random_tree(rng, int(rng.integers(1, 8))) for _ in range(8)]
    lb = postorder_sed_matrix(trees, insert=2, remove=3, update=0.5, backend=backend)
    assert np.all(lb <= ted_matrix(trees, insert=2, remove=3, update=0.5) + 1e-9)


# ---------------------------------------------------------------------------------------------
# the AVX-512 kernel (online.pruning.ted_avx512) against the scalar kernel and the recursion


def _shaped_trees(rng):
    """Trees that reach every path of the vector kernel: general random trees of 0-90 nodes
    (rows of 8, 16 and 32 lanes, partial blocks, far columns), long left and right combs
    (leftmost paths of 40 nodes: far columns in every block), a star, balanced binary trees."""
    trees = [_random_tree(rng, int(rng.integers(0, 90)), n_features=4) for _ in range(14)]
    def comb(k, left):  # a path of k nodes, each but the last with a one-node sibling
        kids = [([v + 1, k + v] if left else [k + v, v + 1]) for v in range(k - 1)]
        return T(list(rng.integers(0, 3, 2 * k - 1)), kids + [[] for _ in range(k)])

    trees += [comb(40, True), comb(40, False), T([1] * 30, [list(range(1, 30))] + [[]] * 29)]
    for depth in (4, 6):
        n = 2**depth - 1
        trees.append(
            T(
                list(rng.integers(0, 5, n)),
                [[2 * v + 1, 2 * v + 2] if 2 * v + 2 < n else [] for v in range(n)],
            )
        )
    return trees + [EMPTY, A_BC]


@pytest.mark.skipif(not ted_avx512.AVAILABLE, reason="needs numba and AVX-512BW/VL")
@pytest.mark.parametrize("costs", [(1, 1, 1), (1, 2, 1), (2, 1, 3), (3, 2, 2), (1, 1, 0)])
def test_avx512_kernel_equals_the_scalar_kernel(costs, monkeypatch):
    ins, rem, upd = costs
    rng = np.random.default_rng(sum(costs))
    trees = _shaped_trees(rng)
    I, J = np.nonzero(~np.eye(len(trees), dtype=bool))
    kw = dict(insert=ins, remove=rem, update=upd)
    assert ted_avx512.usable(max(t.n_nodes for t in trees), ins, rem, upd)
    flat = ted_avx512.flatten(trees)
    assert flat.fc_cnt.max() > 0 and flat.km.max() > 32  # far columns, rows of several blocks
    vector = ted_compiled.pairs(trees, I, J, n_jobs=2, **kw)
    monkeypatch.setattr(ted_compiled, "USE_AVX512", False)
    scalar = ted_compiled.pairs(trees, I, J, **kw)
    assert np.array_equal(vector, scalar)
    assert vector.max() > 40  # large distances: the big tables were exercised
    small = [k for k, t in enumerate(trees) if t.n_nodes <= 7]
    for a in small:
        for b in small:
            at = np.flatnonzero((I == a) & (J == b))
            if len(at):
                assert vector[at[0]] == _brute(trees[a], trees[b], ins, rem, upd)


@pytest.mark.skipif(not ted_avx512.AVAILABLE, reason="needs numba and AVX-512BW/VL")
def test_avx512_kernel_on_forest_trees_and_its_conditions(monkeypatch):
    """Unpruned forest trees (the case it is for), feature ids far apart, the fallback when its
    16-bit feature codes or tables would not do, and fractional costs (scalar kernel)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(400, 8))
    y = (X[:, 0] * X[:, 1] + X[:, 2] - X[:, 3] ** 2 > 0).astype(int)
    trees = from_sklearn_forest(RandomForestClassifier(12, random_state=0).fit(X, y))
    trees = [Tree(t.feature * 1_000_003, t.parent) for t in trees] + [EMPTY]  # ids > 2**16
    assert max(t.n_nodes for t in trees) > 40
    I, J = np.triu_indices(len(trees), 1)
    vector = ted_compiled.pairs(trees, I, J)
    assert ted_avx512.flatten(trees) is not None
    monkeypatch.setattr(ted_compiled, "USE_AVX512", False)
    scalar = ted_compiled.pairs(trees, I, J)
    assert np.array_equal(vector, scalar)
    monkeypatch.setattr(ted_compiled, "USE_AVX512", True)
    monkeypatch.setattr(ted_avx512, "FEATURE_CODES", 3)  # too many features for the codes
    ted_avx512._FLAT.clear()  # forget the 16-bit tables computed above
    assert ted_avx512.flatten(trees) is None
    assert np.array_equal(ted_compiled.pairs(trees, I, J), scalar)  # scalar kernel instead
    assert not ted_avx512.usable(50, 0.5, 1, 1)  # fractional costs
    assert not ted_avx512.usable(10_000, 1, 1, 1)  # tables beyond 16 bits
    assert ted_avx512.usable(700, 1, 1, 1)


def test_bit_parallel_sed_equals_the_dynamic_programme():
    """Myers' bit vectors against the cell-by-cell SED: sequences of 0-200 nodes (1-4 words,
    partial last words), one to many symbols, empty trees; costs c x Levenshtein."""
    rng = np.random.default_rng(12)
    trees = [_random_tree(rng, int(rng.integers(0, 200)), n_features=int(rng.integers(1, 40)))
             for _ in range(24)] + [EMPTY]
    I, J = np.nonzero(np.ones((len(trees), len(trees)), dtype=bool))
    seqs = [t.postorder_features() for t in trees]
    off = np.concatenate(([0], np.cumsum([len(q) for q in seqs]))).astype(np.int64)
    seq = np.concatenate(seqs).astype(np.int64)
    expected = np.zeros(len(I))
    ted_compiled._sed_pairs(seq, off, I, J, 1.0, 1.0, 1.0, expected)
    got = sed_bits.levenshtein_pairs(trees, I, J)
    assert np.array_equal(got, expected)
    assert sed_bits.usable(trees, 2, 2, 2) and not sed_bits.usable(trees, 1, 2, 1)
    assert not sed_bits.usable(trees, 0.5, 0.5, 0.5)
    assert np.array_equal(
        postorder_sed_matrix(trees, insert=2, remove=2, update=2)[I, J], 2 * expected
    )


def test_preorder_postorder_equals_the_traversal():
    """The loop-free postorder of preorder-numbered trees (and of their mirrors) equals the
    stack traversal; other numberings are refused (None) and traversed instead."""
    from online.pruning.trees import postorder, preorder_postorder

    rng = np.random.default_rng(13)
    fast = refused = 0
    for k in range(300):
        t = _random_tree(rng, int(rng.integers(0, 60)))
        if k % 3 == 0 and t.n_nodes > 3:  # parents before children, not a preorder
            t = Tree(
                t.feature, np.array([-1] + [int(rng.integers(0, v)) for v in range(1, t.n_nodes)])
            )
        for mirror in (False, True):
            kids = t.children()
            expected = postorder(t.feature, [c[::-1] for c in kids] if mirror else kids)
            got = preorder_postorder(t.feature, t.parent, mirror)
            if got is None:
                refused += 1
            else:
                fast += 1
                assert all(np.array_equal(a, b) for a, b in zip(got, expected))
            assert all(
                np.array_equal(a, b)
                for a, b in zip(Tree(t.feature, t.parent)._postorder(mirror), expected)
            )
    assert fast > 300 and refused > 20
