"""The widths' A^-1 laid out pair by pair (``online.policies.widths``) against plain matrices."""

import numpy as np
import pytest

from online.policies.widths import Widths, squared_widths, update_model


def spd(n_models: int, D: int, seed: int) -> np.ndarray:
    """``n_models`` random symmetric positive definite float32 matrices (float32-symmetric)."""
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n_models, D, D))
    c = np.linalg.inv(M @ M.transpose(0, 2, 1) + D * np.eye(D))
    return ((c + c.transpose(0, 2, 1)) / 2).astype(np.float32)


def sparse_row(D: int, nnz: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A row with ``nnz`` non-zeros at unordered indices: (index, value, the dense row)."""
    rng = np.random.default_rng(seed)
    index = rng.permutation(D)[:nnz].astype(np.int64)  # (coded rows are not sorted)
    value = rng.normal(size=nnz)
    z = np.zeros(D)
    z[index] = value
    return index, value, z


def read(widths: Widths, index, value, models) -> np.ndarray:
    out = np.full(len(models), np.nan)
    squared_widths(index, value, len(index), np.asarray(models, np.int64), widths.pairs,
                   widths.start, widths.diagonal, out)
    return out


@pytest.mark.parametrize("diagonal", [False, True])
def test_squared_widths_are_z_a_inverse_z_for_any_candidate_set(diagonal):
    """The candidates as a run of consecutive models (one vector read per pair), a run that
    does not start at 0, and a set in any order with -1 (each entry gathered)."""
    c = spd(6, 9, seed=1)
    if diagonal:
        c = np.ascontiguousarray(np.diagonal(c, axis1=1, axis2=2))
    w = Widths.from_matrices(c)
    assert w.diagonal is diagonal
    np.testing.assert_array_equal(w.matrices(), c)
    dense = np.stack([np.diag(m) for m in c]) if diagonal else c
    for seed in range(5):
        index, value, z = sparse_row(9, 1 + seed, seed)
        expected = np.einsum("i,mij,j->m", z, dense.astype(np.float64), z)
        for models in ([0, 1, 2, 3, 4, 5], [2, 3, 4], [4, 0, -1, 5, 2], [3]):
            got = read(w, index, value, models)
            want = np.array([expected[m] if m >= 0 else 0.0 for m in models])
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("diagonal", [False, True])
def test_an_update_is_sherman_morrison_on_that_model_only(diagonal):
    c = spd(4, 7, seed=2)
    if diagonal:
        c = np.ascontiguousarray(np.diagonal(c, axis1=1, axis2=2))
    w = Widths.from_matrices(c)
    index, value, z = sparse_row(7, 4, seed=3)
    update_model(index, value, len(index), 2, w.pairs, w.start, w.diagonal)
    after = w.matrices()
    if diagonal:
        expected = np.diag(np.linalg.inv(np.diag(1.0 / c[2].astype(np.float64))
                                         + np.outer(z, z)))
    else:
        expected = np.linalg.inv(np.linalg.inv(c[2].astype(np.float64)) + np.outer(z, z))
    np.testing.assert_allclose(after[2], expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.delete(after, 2, axis=0), np.delete(c, 2, axis=0))


def test_models_and_columns_added_and_selected_keep_the_matrices():
    c = spd(3, 5, seed=4)
    w = Widths.from_matrices(c)
    grown = w.grown(5).matrices()
    np.testing.assert_array_equal(grown[:3], c)
    assert (grown[3:] == 0).all()
    np.testing.assert_array_equal(w.select(np.array([2, 0])).matrices(), c[[2, 0]])
    wider = w.with_columns(2, 0.25).matrices()
    np.testing.assert_array_equal(wider[:, :5, :5], c)
    np.testing.assert_array_equal(wider[:, 5:, 5:], np.broadcast_to(0.25 * np.eye(2), (3, 2, 2)))
    assert (wider[:, :5, 5:] == 0).all()
    w.set(1, c[0])
    np.testing.assert_array_equal(w.matrices()[1], c[0])
    diagonal = Widths.from_matrices(np.diagonal(c, axis1=1, axis2=2))
    np.testing.assert_array_equal(diagonal.with_columns(1, 2.0).matrices()[:, 5], [2.0] * 3)
    assert not Widths.none(3).kept and Widths.none(3).matrices().shape == (3, 0)
