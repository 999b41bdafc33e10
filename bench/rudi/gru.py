"""A small GRU teacher on the raw event sequences, in numpy (bench only, for RuDi's Tables 3-4).

The paper's sequence teacher is a bi-directional 2-layer GRU with 128 hidden units (sec. 4.1);
this is a one-layer, one-direction GRU with ``hidden`` units (32 by default), small enough to
train on two shared cores in a minute or two, with explicit back-propagation through time.

Per event the input is the one-hot codes of the categorical columns (the schema's most frequent
values, plus one "other" slot) and the standardised numerical columns (log1p first when a
column is non-negative). The GRU reads each entity's events in order (the first ``max_len``);
the score is a linear read-out of the last hidden state (the log-odds of the label), trained
with the logistic loss, Adam and early stopping on a validation split.

    h_t = (1 - z) * n + z * h_{t-1}
    z = sigmoid(x W_z + h U_z + b_z),  r = sigmoid(x W_r + h U_r + b_r)
    n = tanh(x W_n + b_n + r * (h U_n + c_n))

Entities are batched by length so that padding stays small; a padded step leaves h unchanged.
"""

from __future__ import annotations

import numpy as np


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class EventEncoder:
    """Events of an ``EventTable`` -> per-event input vectors (one-hot + standardised)."""

    def fit(self, table):
        self.schema_ = table.schema
        self.stats_ = {}
        for c in table.schema.numerical:
            v = table.columns[c]
            log = bool(v.min() >= 0)
            v = np.log1p(v) if log else v
            self.stats_[c] = (log, float(v.mean()), float(v.std()) or 1.0)
        return self

    def transform(self, table) -> np.ndarray:
        parts = []
        for c in self.schema_.numerical:
            log, mu, sd = self.stats_[c]
            v = table.columns[c]
            parts.append((((np.log1p(np.maximum(v, 0)) if log else v) - mu) / sd)[:, None])
        for c in self.schema_.categorical:
            p = len(self.schema_.top(c))
            code = table.columns[c]
            code = np.where((code < 0) | (code >= p), p, code)  # rare values share a slot
            parts.append(np.eye(p + 1)[code])
        return np.hstack(parts).astype(np.float64)


class GRUTeacher:
    """One-layer GRU + linear read-out of the last state, trained on binary labels.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.standard_normal((int(n), 2)) for n in rng.integers(1, 6, 200)]
    >>> y = np.array([float(x[-1, 0] > 0) for x in X])
    >>> gru = GRUTeacher(hidden=8, epochs=40, batch_size=32, lr=0.02, random_state=0).fit(X, y)
    >>> float(((gru.decision_function(X) > 0) == y).mean()) > 0.95
    True
    """

    def __init__(
        self,
        hidden=32,
        epochs=30,
        batch_size=128,
        lr=3e-3,
        patience=4,
        max_len=100,
        random_state=None,
    ):
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.patience = patience
        self.max_len = max_len
        self.random_state = random_state

    # -- parameters ------------------------------------------------------------------------
    def _init(self, n_in, rng):
        H = self.hidden
        s = 1.0 / np.sqrt(H)
        self.params_ = {
            "W": rng.uniform(-s, s, (n_in, 3 * H)),
            "U": rng.uniform(-s, s, (H, 3 * H)),
            "b": np.zeros(3 * H),
            "c": np.zeros(H),  # bias inside r * (h U_n + c_n)
            "v": rng.uniform(-s, s, H),
            "v0": np.zeros(1),
        }

    # -- batches of similar length ---------------------------------------------------------
    def _pad(self, seqs, idx):
        lens = np.array([min(len(seqs[i]), self.max_len) for i in idx])
        T = int(lens.max())
        X = np.zeros((T, len(idx), seqs[idx[0]].shape[1]))
        M = np.zeros((T, len(idx), 1))
        for b, i in enumerate(idx):
            n = lens[b]
            X[:n, b] = seqs[i][:n]
            M[:n, b] = 1.0
        return X, M

    def _batches(self, seqs, idx, rng=None):
        order = np.array(idx)[np.argsort([len(seqs[i]) for i in idx], kind="stable")]
        chunks = [order[k : k + self.batch_size] for k in range(0, len(order), self.batch_size)]
        if rng is not None:
            rng.shuffle(chunks)
        return chunks

    # -- forward / backward ----------------------------------------------------------------
    def _forward(self, X, M, keep=False):
        P, H = self.params_, self.hidden
        T, B, _ = X.shape
        GX = X @ P["W"] + P["b"]  # (T, B, 3H)
        h = np.zeros((B, H))
        cache = []
        for t in range(T):
            gh = h @ P["U"]
            z = sigmoid(GX[t, :, :H] + gh[:, :H])
            r = sigmoid(GX[t, :, H : 2 * H] + gh[:, H : 2 * H])
            hn = gh[:, 2 * H :] + P["c"]
            n = np.tanh(GX[t, :, 2 * H :] + r * hn)
            h_new = (1 - z) * n + z * h
            if keep:
                cache.append((h, z, r, n, hn))
            h = M[t] * h_new + (1 - M[t]) * h
        out = h @ P["v"] + P["v0"][0]
        return out, h, cache

    def _loss_grads(self, X, M, y):
        P, H = self.params_, self.hidden
        out, hT, cache = self._forward(X, M, keep=True)
        p = sigmoid(out)
        loss = float(np.mean(np.logaddexp(0, out) - y * out))
        dout = (p - y) / len(y)
        G = {k: np.zeros_like(v) for k, v in P.items()}
        G["v"] = hT.T @ dout
        G["v0"][0] = dout.sum()
        dh = np.outer(dout, P["v"])
        dGX = np.zeros((X.shape[0], X.shape[1], 3 * H))
        for t in range(X.shape[0] - 1, -1, -1):
            h, z, r, n, hn = cache[t]
            m = M[t]
            dhn_ = m * dh  # gradient reaching h_new
            dh_prev = (1 - m) * dh + dhn_ * z
            dn = dhn_ * (1 - z)
            dz = dhn_ * (h - n)
            da_n = dn * (1 - n * n)
            dr = da_n * hn
            da_z = dz * z * (1 - z)
            da_r = dr * r * (1 - r)
            dgh = np.concatenate([da_z, da_r, da_n * r], axis=1)
            dGX[t] = np.concatenate([da_z, da_r, da_n], axis=1)
            G["U"] += h.T @ dgh
            G["c"] += (da_n * r).sum(0)
            dh = dh_prev + dgh @ P["U"].T
        G["W"] = np.tensordot(X, dGX, axes=([0, 1], [0, 1]))
        G["b"] = dGX.sum((0, 1))
        return loss, G

    # -- fit / score -----------------------------------------------------------------------
    def fit(self, seqs, y, valid=None, progress=None):
        """``seqs``: list of (length_i, n_in) arrays; ``valid``: (seqs, y) for early stopping
        (default: 10% of the training entities)."""
        rng = np.random.default_rng(self.random_state)
        y = np.asarray(y, dtype=np.float64)
        idx = np.arange(len(seqs))
        if valid is None:
            perm = rng.permutation(len(seqs))
            n_val = max(1, len(seqs) // 10)
            valid = ([seqs[i] for i in perm[:n_val]], y[perm[:n_val]])
            idx = perm[n_val:]
        self._init(seqs[0].shape[1], rng)
        m = {k: np.zeros_like(v) for k, v in self.params_.items()}
        s = {k: np.zeros_like(v) for k, v in self.params_.items()}
        step, best, best_params, bad = 0, np.inf, None, 0
        self.history_ = []
        for epoch in range(self.epochs):
            for chunk in self._batches(seqs, idx, rng):
                X, M = self._pad(seqs, chunk)
                _, G = self._loss_grads(X, M, y[chunk])
                step += 1
                for k, g in G.items():  # Adam
                    m[k] = 0.9 * m[k] + 0.1 * g
                    s[k] = 0.999 * s[k] + 0.001 * g * g
                    mh, sh = m[k] / (1 - 0.9**step), s[k] / (1 - 0.999**step)
                    self.params_[k] -= self.lr * mh / (np.sqrt(sh) + 1e-8)
            out = self.decision_function(valid[0])
            vloss = float(np.mean(np.logaddexp(0, out) - valid[1] * out))
            self.history_.append(vloss)
            if progress is not None:
                progress(epoch + 1, vloss)
            if vloss < best - 1e-4:
                best, bad = vloss, 0
                best_params = {k: v.copy() for k, v in self.params_.items()}
            else:
                bad += 1
                if bad >= self.patience:
                    break
        if best_params is not None:
            self.params_ = best_params
        self.n_epochs_ = len(self.history_)
        return self

    def decision_function(self, seqs) -> np.ndarray:
        """Log-odds of every sequence."""
        out = np.zeros(len(seqs))
        for chunk in self._batches(seqs, np.arange(len(seqs))):
            X, M = self._pad(seqs, chunk)
            out[chunk] = self._forward(X, M)[0]
        return out


def table_sequences(table, encoder) -> list[np.ndarray]:
    """Per-entity event inputs of an ``EventTable`` (entities in the table's order)."""
    E = encoder.transform(table)
    o = table.offsets
    return [E[o[i] : o[i + 1]] for i in range(table.n_entities)]
