"""GS-NLN: the Gumbel-softmax neural logical network of sec. 3.3, in numpy with explicit gradients.

Input layer (sec. 3.3.1): continuous statistics are binarised by percentiles (eq. 10), the
literals z are extended with their negations and the constants 1 and 0: z^0 = (z, 1-z, 1, 0).
Logical layers (sec. 3.3.2): each conjunction neuron picks two inputs with Gumbel-softmax
(eqs. 11, 13) and multiplies them; each disjunction neuron computes 1-(1-a)(1-b) (eq. 12).
Layers 1..L-1 have H conjunctions and H disjunctions and a skip connection (z^l = (u, v,
z^{l-1})); layer L has R/2 of each and no skip. Prediction layer (sec. 3.3.3): y~ = w' z^L.
Training (sec. 3.3.4): the pairwise ranking loss within mini-batches, Adam, learning rate and
temperature decayed linearly (Table 2: 0.1 -> 0.001 and 1 -> 1e-4, 500 epochs, batch 128).

Choices where the paper is silent or ambiguous
----------------------------------------------
- The loss of sec. 3.3.4 is printed as a sum of log-likelihoods; we minimise its negative.
- One Gumbel vector g_k per neuron and input slot per mini-batch, shared by its instances
  (eq. 13 has no instance index). Plain (soft) Gumbel-softmax during training, no
  straight-through; after training each neuron takes the argmax of its weights (tau -> 0 in
  eq. 13 without noise), and predictions and rules use that hard network.
- Eq. 10 as printed also yields I(x > x^100), always false; literals that are constant on the
  training data, and duplicated literals (tied percentiles), are dropped (the constants 1 and
  0 are in the input anyway). A column is "already binary" if its values are within {0, 1}.
- Initialisation: selection logits ~ N(0, 0.1^2), rule weights ~ N(0, 0.1^2); no bias in the
  prediction layer (the ranking loss ignores it). Adam with beta = (0.9, 0.999), eps = 1e-8.
- Learning rate and temperature decay linearly per step over all epochs x batches.
- An epoch visits the N instances in a fresh random order, in batches of ``batch_size``.
- Training runs in float32 with BLAS limited to one thread (the matrices are small; thread
  start-up costs more than it saves); ``forward``/``backward`` work in any float dtype.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

PERCENTILE_GRID = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)  # eq. 10


class Binarizer:
    """Eq. 10: each statistic column becomes boolean literals.

    ``literals_`` holds (column, threshold) pairs; threshold None means the column is already
    binary and the literal is ``x == 1``; otherwise the literal is ``x > threshold``.

    Examples
    --------
    >>> X = np.column_stack([np.arange(10.0), np.arange(10) % 2])
    >>> b = Binarizer().fit(X)
    >>> b.literals_[:3], b.literals_[-1]  # x > 0.9 is x > 0 on these data: dropped
    ([(0, 0.0), (0, 1.8), (0, 2.7)], (1, None))
    >>> b.describe(["Sum(Select amount)", "Max(Select late=yes)"])[-1]
    ('Max(Select late=yes) = 1', 'Max(Select late=yes) = 0')
    """

    def fit(self, X: np.ndarray) -> Binarizer:
        X = np.asarray(X, dtype=np.float64)
        literals, seen = [], set()
        for j in range(X.shape[1]):
            x = X[:, j]
            if np.isin(x, (0.0, 1.0)).all():
                cand = [(j, None)]
            else:
                cand = [(j, float(t)) for t in np.unique(np.percentile(x, PERCENTILE_GRID))]
            for col, thr in cand:
                z = self._literal(x, thr)
                if z.all() or not z.any():
                    continue  # constant on the training data
                key = z.tobytes()
                if key in seen:
                    continue  # duplicate literal
                seen.add(key)
                literals.append((col, thr))
        self.literals_ = literals
        return self

    @staticmethod
    def _literal(x, thr):
        return x == 1.0 if thr is None else x > thr

    def transform(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if not self.literals_:
            return np.zeros((len(X), 0))
        return np.column_stack([self._literal(X[:, j], t) for j, t in self.literals_]).astype(
            np.float64
        )

    def describe(self, names: list[str]) -> list[tuple[str, str]]:
        """(literal, negation) in words for each literal."""
        out = []
        for j, t in self.literals_:
            if t is None:
                out.append((f"{names[j]} = 1", f"{names[j]} = 0"))
            else:
                out.append((f"{names[j]} > {t:.6g}", f"{names[j]} <= {t:.6g}"))
        return out


def augment(Z: np.ndarray) -> np.ndarray:
    """z^0 = (z, 1 - z, 1, 0) (sec. 3.3.1)."""
    n = len(Z)
    return np.hstack([Z, 1.0 - Z, np.ones((n, 1), Z.dtype), np.zeros((n, 1), Z.dtype)])


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _softmax(a: np.ndarray) -> np.ndarray:
    a = a - a.max(axis=1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=1, keepdims=True)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def ranking_loss(y_tilde: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative of the sec. 3.3.4 objective over all ordered pairs i != j, and d loss / d y~."""
    n, dt = len(y), y_tilde.dtype
    T = np.where(y[:, None] > y[None, :], 1.0, -1.0).astype(dt)  # I(yi>yj) - I(yi<=yj)
    D = y_tilde[:, None] - y_tilde[None, :]
    off = 1.0 - np.eye(n, dtype=dt)
    norm = n * (n - 1)
    loss = -float((_log_sigmoid(T * D) * off).sum()) / norm
    G = -T * (1.0 / (1.0 + np.exp(T * D))) * off / norm  # d loss / d D_ij
    return loss, G.sum(axis=1) - G.sum(axis=0)


class GSNLN:
    """Neural logical network over binary literals, trained to rank like the teacher.

    Parameters
    ----------
    R, H, L
        Rules (last-layer neurons, R/2 conjunctions + R/2 disjunctions), hidden size, logical
        layers (Table 2: 20, 20, 2).
    epochs, batch_size
        Table 2: 500, 128.
    lr, temperature
        (start, end) of the linear decays (Table 2: (0.1, 0.001) and (1.0, 1e-4)).
    random_state
        Seed, ``numpy.random.Generator`` or None.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.integers(0, 2, (300, 4)).astype(float)
    >>> y = Z[:, 0] * (1 - Z[:, 1]) + 0.01 * rng.standard_normal(300)
    >>> net = GSNLN(R=2, H=4, L=2, epochs=60, random_state=0).fit(Z, y)
    >>> agree = np.mean(net.predict(Z)[y > 0.5] > net.predict(Z)[y < 0.5].max())
    >>> bool(agree == 1.0)
    True
    """

    def __init__(self, R=20, H=20, L=2, epochs=500, batch_size=128, lr=(0.1, 0.001),
                 temperature=(1.0, 1e-4), random_state=None):
        self.R = R
        self.H = H
        self.L = L
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.temperature = temperature
        self.random_state = random_state

    # -- parameters ----------------------------------------------------------------------
    def _init(self, h0: int, rng, dtype=np.float64) -> None:
        if self.R % 2 or self.R < 2:
            raise ValueError("R must be a positive even number (R/2 conjunctions + R/2 "
                             "disjunctions)")
        self.layers_ = []
        h = h0
        for l in range(self.L):
            last = l == self.L - 1
            m = self.R if last else 2 * self.H
            self.layers_.append({
                "Wa": (0.1 * rng.standard_normal((m, h))).astype(dtype),
                "Wb": (0.1 * rng.standard_normal((m, h))).astype(dtype),
                "n_conj": m // 2,
            })
            h = m if last else m + h
        self.w_ = (0.1 * rng.standard_normal(self.R)).astype(dtype)

    def _params(self):
        out = []
        for layer in self.layers_:
            out += [layer["Wa"], layer["Wb"]]
        return out + [self.w_]

    # -- forward / backward ----------------------------------------------------------------
    def forward(self, Z0, tau=None, noise=None):
        """y~ and the cache for ``backward``. ``tau=None``: hard argmax selections (eq. 11)."""
        z, cache = Z0, []
        for l, layer in enumerate(self.layers_):
            if tau is None:
                Qa = np.eye(z.shape[1])[layer["Wa"].argmax(axis=1)]
                Qb = np.eye(z.shape[1])[layer["Wb"].argmax(axis=1)]
            else:  # eq. 13
                ga, gb = noise[l]
                Qa = _softmax((layer["Wa"] + ga) / tau)
                Qb = _softmax((layer["Wb"] + gb) / tau)
            A, B = z @ Qa.T, z @ Qb.T
            c = layer["n_conj"]
            out = np.empty_like(A)
            out[:, :c] = A[:, :c] * B[:, :c]  # conjunctions (eq. 11)
            out[:, c:] = 1.0 - (1.0 - A[:, c:]) * (1.0 - B[:, c:])  # disjunctions (eq. 12)
            cache.append((z, Qa, Qb, A, B))
            z = out if l == len(self.layers_) - 1 else np.hstack([out, z])  # skip connection
        cache.append(z)
        return z @ self.w_, cache

    def backward(self, d_y, cache, tau):
        """Gradients of the loss w.r.t. (Wa, Wb per layer..., w) given d loss / d y~."""
        zL = cache[-1]
        grads_w = zL.T @ d_y
        dz = np.outer(d_y, self.w_)
        grads = []
        for l in range(len(self.layers_) - 1, -1, -1):
            layer = self.layers_[l]
            z, Qa, Qb, A, B = cache[l]
            m, c = A.shape[1], layer["n_conj"]
            dout, dskip = dz[:, :m], dz[:, m:]
            dA, dB = np.empty_like(A), np.empty_like(B)
            dA[:, :c], dB[:, :c] = dout[:, :c] * B[:, :c], dout[:, :c] * A[:, :c]
            dA[:, c:], dB[:, c:] = dout[:, c:] * (1 - B[:, c:]), dout[:, c:] * (1 - A[:, c:])
            dQa, dQb = dA.T @ z, dB.T @ z
            # softmax Jacobian of eq. 13, times 1/tau
            dWa = Qa * (dQa - (Qa * dQa).sum(axis=1, keepdims=True)) / tau
            dWb = Qb * (dQb - (Qb * dQb).sum(axis=1, keepdims=True)) / tau
            grads = [dWa, dWb] + grads
            if l == 0:
                break  # no gradient needed for the input literals
            dz = dA @ Qa + dB @ Qb
            if dskip.shape[1]:
                dz = dz + dskip
        return grads + [grads_w]

    def sample_noise(self, rng):
        """Gumbel(0, 1) samples g = -ln(-ln U) for every selection logit (eq. 13)."""
        dt = self.w_.dtype

        def gumbel(shape):
            u = rng.random(shape, dtype=dt)
            return -np.log(-np.log(np.clip(u, 1e-7, 1 - 1e-7)))

        return [(gumbel(ly["Wa"].shape), gumbel(ly["Wb"].shape)) for ly in self.layers_]

    def loss_and_grads(self, Z0, y, tau, noise):
        y_tilde, cache = self.forward(Z0, tau, noise)
        loss, d_y = ranking_loss(y_tilde, y)
        return loss, self.backward(d_y, cache, tau)

    # -- training --------------------------------------------------------------------------
    def fit(self, Z, y, progress=None) -> GSNLN:
        """``Z``: binary literals (N, P'); ``y``: teacher scores (N,)."""
        rs = self.random_state
        rng = rs if isinstance(rs, np.random.Generator) else np.random.default_rng(rs)
        with _one_blas_thread():
            self._train(augment(np.asarray(Z, dtype=np.float32)), np.asarray(y, np.float32), rng,
                        progress)
        for ly in self.layers_:  # the learned network is kept in float64
            ly["Wa"], ly["Wb"] = ly["Wa"].astype(np.float64), ly["Wb"].astype(np.float64)
        self.w_ = self.w_.astype(np.float64)
        return self

    def _train(self, Z0, y, rng, progress):
        self._init(Z0.shape[1], rng, np.float32)
        params = self._params()
        m1 = [np.zeros_like(p) for p in params]
        m2 = [np.zeros_like(p) for p in params]
        b1, b2, eps = 0.9, 0.999, 1e-8
        n = len(y)
        per_epoch = max(1, int(np.ceil(n / self.batch_size)))
        total = self.epochs * per_epoch
        step = 0
        self.loss_curve_ = []
        for epoch in range(self.epochs):
            order = rng.permutation(n)
            epoch_loss = 0.0
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                if len(idx) < 2:
                    continue
                frac = step / max(total - 1, 1)
                lr = self.lr[0] + (self.lr[1] - self.lr[0]) * frac
                tau = self.temperature[0] + (self.temperature[1] - self.temperature[0]) * frac
                loss, grads = self.loss_and_grads(Z0[idx], y[idx], tau, self.sample_noise(rng))
                step += 1
                for p, g, a, b in zip(params, grads, m1, m2):  # Adam, in place
                    a *= b1
                    a += (1 - b1) * g
                    b *= b2
                    b += (1 - b2) * g * g
                    p -= lr * (a / (1 - b1**step)) / (np.sqrt(b / (1 - b2**step)) + eps)
                epoch_loss += loss * len(idx)
            self.loss_curve_.append(epoch_loss / n)
            if progress is not None:
                progress((epoch + 1) / self.epochs, f"GS-NLN epoch {epoch + 1}/{self.epochs}")

    def rule_activations(self, Z) -> np.ndarray:
        """z^L of the hard network: (N, R) booleans, one column per rule."""
        _, cache = self.forward(augment(np.asarray(Z, dtype=np.float64)))
        return cache[-1]

    def predict(self, Z) -> np.ndarray:
        return self.rule_activations(Z) @ self.w_

    # -- rules in words ----------------------------------------------------------------------
    def expressions(self, n_literals: int) -> list:
        """Each rule as a nested tuple ('and'|'or', a, b) / ('lit', j, negated) / ('const', v),
        simplified (x AND 1 = x, x OR 0 = x, x AND x = x, ...)."""

        def node(l, i):
            if l < 0:  # z^0 = (z, 1-z, 1, 0)
                if i < n_literals:
                    return ("lit", i, False)
                if i < 2 * n_literals:
                    return ("lit", i - n_literals, True)
                return ("const", 1 if i == 2 * n_literals else 0)
            layer = self.layers_[l]
            m = layer["Wa"].shape[0]
            if i >= m:
                return node(l - 1, i - m)  # skip connection
            a = node(l - 1, int(layer["Wa"][i].argmax()))
            b = node(l - 1, int(layer["Wb"][i].argmax()))
            return simplify("and" if i < layer["n_conj"] else "or", a, b)

        last = len(self.layers_) - 1
        return [node(last, i) for i in range(self.layers_[last]["Wa"].shape[0])]


def simplify(op, a, b):
    one, zero = ("const", 1), ("const", 0)
    if op == "and":
        if a == zero or b == zero:
            return zero
        if a == one:
            return b
        if b == one or a == b:
            return a
        if a[0] == "lit" and b[0] == "lit" and a[1] == b[1]:
            return zero  # x AND NOT x
    else:
        if a == one or b == one:
            return one
        if a == zero:
            return b
        if b == zero or a == b:
            return a
        if a[0] == "lit" and b[0] == "lit" and a[1] == b[1]:
            return one  # x OR NOT x
    dual = "or" if op == "and" else "and"
    if b[0] == dual and a in terms(b):
        return a  # absorption: a AND (a OR c) = a, a OR (a AND c) = a
    if a[0] == dual and b in terms(a):
        return b
    return (op, a, b)


def terms(expr) -> list:
    """The operands of a flattened AND/OR (nested same-operator terms merged, repeats dropped)."""
    out = []
    for sub in expr[1:]:
        for t in (terms(sub) if sub[0] == expr[0] else [sub]):
            if t not in out:
                out.append(t)
    return out


def merge_thresholds(expr, literals: list[tuple[int, float | None]]):
    """Drops literals implied by another on the same statistic inside one AND/OR
    (``x > 14 OR x > 10`` is ``x > 10``); ``literals`` are the Binarizer's (column, threshold)."""
    if expr[0] not in ("and", "or"):
        return expr
    kept, best = [], {}
    for t in terms(expr):
        t = merge_thresholds(t, literals)
        if t[0] == "lit" and literals[t[1]][1] is not None:
            col, thr = literals[t[1]]
            key = (col, t[2])
            # AND keeps the tightest bound, OR the loosest: x > a is implied by x > b for b > a
            if key in best:
                other = literals[best[key][1]][1]
                looser = (thr < other) != t[2]  # for "x > thr": smaller thr is looser
                if looser == (expr[0] == "or"):
                    kept[kept.index(best[key])] = t
                    best[key] = t
                continue
            best[key] = t
        kept.append(t)
    out = kept[0]
    for t in kept[1:]:
        out = (expr[0], out, t)
    return out


def count_literals(expr) -> int:
    """Distinct literal occurrences in a rule (at most 2^L)."""
    if expr[0] == "lit":
        return 1
    if expr[0] == "const":
        return 0
    return sum(count_literals(t) for t in terms(expr))


def render(expr, words: list[tuple[str, str]]) -> str:
    """An expression in words: literals from ``words`` (text, negated text)."""
    kind = expr[0]
    if kind == "lit":
        return words[expr[1]][1 if expr[2] else 0]
    if kind == "const":
        return "TRUE" if expr[1] else "FALSE"
    parts = []
    for sub in terms(expr):
        text = render(sub, words)
        if sub[0] in ("and", "or"):
            text = f"({text})"
        parts.append(text)
    return f" {kind.upper()} ".join(parts)
