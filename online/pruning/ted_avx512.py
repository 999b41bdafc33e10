"""Zhang-Shasha tree edit distance on 16-bit tables with AVX-512 row kernels.

The same algorithm and the same distances as :func:`online.pruning.ted_compiled._zs_pairs`
(Zhang & Shasha 1989; Definition 3.2 of MEPSI: INSERT, REMOVE, UPDATE of the tested feature,
an UPDATE to the same feature free), for integer costs, about 5x faster on large trees (USPS
forests: 700 internal nodes per tree, 6 ms per pair instead of 30). It is what
:func:`online.pruning.ted_compiled.pairs` runs when :func:`usable` says so; the scalar kernel
stays the reference and the fallback.

How it computes the same numbers faster
---------------------------------------
- **One table per key-root pair, oriented**: its rows run over the smaller of the two key-root
  subtrees and its columns over the larger (``TED(F, G)`` with costs ``(insert, remove)``
  read transposed is ``TED(G, F)`` with ``(remove, insert)``): fewer, longer rows. Tree
  distances are kept in both layouts (row tree major and column tree major) so that a row reads
  them contiguously either way.
- **A row as vectors**: ``fd[x, y] = min(fd[x-1, y] + remove, fd[x, y-1] + insert, t[x, y])``
  with ``t = fd[l(x)-1, l(y)-1] + td[x, y]`` (or, on the row key root's leftmost path,
  ``fd[x-1, y-1] + update`` where ``y`` is on the column key root's leftmost path). The first
  and third terms do not depend on the row being computed, so a block of 8, 16 or 32 columns
  (int16 lanes, by the row length) is computed at once, and the insertion chain along the row
  is a min-plus prefix scan in registers (log2 lanes shift-add-min steps and one carry per
  block) instead of one dependent step per cell.
- **The gather ``fd[l(x)-1, l(y)-1]``**: for a column whose leftmost leaf lies in the current
  or the previous block (leaves, small subtrees: most columns) it is a two-register word
  permute (``vpermi2w``, AVX-512BW/VL); the few others are read by a scalar loop first.
- **Single-node key roots** (half of the tables) in closed form: turning one node ``x`` into a
  subtree ``G_y`` of ``s`` nodes costs ``(s - 1) insert + min(remove + insert, update or 0)``
  (map ``x`` onto a node of ``G_y``, for free if one tests ``x``'s feature, or not at all).

Conditions (:func:`usable`): numba, a CPU (and numba target) with AVX-512BW and AVX-512VL,
integer costs, and tables whose values stay below 2**14 (about 8,000 internal nodes per tree
with unit costs). Choices where the paper is silent: as in :mod:`online.pruning.ted`.

>>> import numpy as np
>>> from online.pruning.trees import Tree
>>> from online.pruning import ted_compiled
>>> trees = [Tree.from_children([0, 1, 2], [[1, 2], [], []]), Tree.from_children([0, 1], [[1], []])]
>>> ted_compiled.pairs(trees, np.array([0]), np.array([1])).tolist()   # this kernel where usable
[1.0]
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from online.pruning.trees import LastForest

try:  # optional compiled backend (see online.pruning.ted_compiled)
    import llvmlite.binding as _llvm
    import numba
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    NUMBA = False

__all__ = ["AVAILABLE", "flatten", "pairs", "usable"]

#: lanes of the widest row kernel; arrays carry this much slack for the last, partial block
V = 32
#: the prefix scan's "no candidate" filler; table values must stay below it (see usable)
INF = 2**14 - 1
#: distinct features the kernel can tell apart (16-bit codes)
FEATURE_CODES = 2**15 - 1


def _cpu_ok() -> bool:
    """AVX-512BW and AVX-512VL on the CPU numba compiles for (the host unless configured)."""
    if not NUMBA:
        return False
    name, feats = numba.config.CPU_NAME, numba.config.CPU_FEATURES
    if feats:  # an explicit target (e.g. for a portable cache): trust what it enables
        return "+avx512bw" in feats and "+avx512vl" in feats
    if name not in (None, "", "host"):
        return False
    host = _llvm.get_host_cpu_features()
    return bool(host.get("avx512bw")) and bool(host.get("avx512vl"))


#: whether this kernel can run here (else ted_compiled runs its scalar kernel)
AVAILABLE = _cpu_ok()


def usable(n_max: int, insert, remove, update) -> bool:
    """True if pairs of trees of up to ``n_max`` internal nodes can use this kernel."""
    costs = (float(insert), float(remove), float(update))
    if not AVAILABLE or not all(c.is_integer() for c in costs):
        return False
    top = max(costs)
    # every table value is at most n_max remove + n_max insert; the scan adds up to V insert
    return 2 * n_max * top + 2 * V * top + 2 < INF


def _lanes(m: np.ndarray) -> np.ndarray:
    """Lanes of the row kernel used for rows over a key root of ``m`` nodes (8, 16 or 32)."""
    return np.where(m <= 8, 8, np.where(m <= 16, 16, V))


def _tree_tables(tree, mirror: bool) -> dict:
    """Per key root of ``tree`` (or its mirror): local leftmost leaves, features, leftmost path
    and far columns, as the kernel reads them. Cached on the tree."""
    key = "avx512_mirror" if mirror else "avx512"
    if key in tree._post:
        return tree._post[key]
    from online.pruning.ted_compiled import _postorder

    feat, lml, kr = _postorder(tree, mirror)
    kl = lml[kr]
    m = kr - kl + 1
    K = len(kr)
    slots = m + 1 + V  # slot 0 unused, then the m nodes, then slack for a partial block
    loc_off = (np.cumsum(slots) - slots).astype(np.int64)
    rep = np.repeat(np.arange(K), m)
    y = np.arange(len(rep)) - np.repeat(np.cumsum(m) - m, m) + 1  # local column 1..m
    node = kl[rep] + y - 1
    ll = lml[node] - kl[rep]  # l(y) - l(key root): 0 on the key root's leftmost path
    loc_l = np.zeros(int(slots.sum()), np.int16)
    loc_f = np.full(int(slots.sum()), -1, np.int64)  # -1: slack
    loc_l[loc_off[rep] + y] = ll
    loc_f[loc_off[rep] + y] = feat[node]
    on_left = ll == 0
    vk = _lanes(m)[rep]
    block0 = 1 + (y - 1) // vk * vk  # first column of y's block
    far = (ll + 1) < (block0 - vk)  # l(y) before the previous block: scalar gather
    out = {
        "kl": kl.astype(np.int64),
        "m": m.astype(np.int64),
        "loc_off": loc_off,
        "loc_l": loc_l,
        "loc_f": loc_f,
        "lp_cnt": np.bincount(rep[on_left], minlength=K).astype(np.int64),
        "lp_pos": y[on_left].astype(np.uint32),
        "fc_cnt": np.bincount(rep[far], minlength=K).astype(np.int64),
        "fc_pos": y[far].astype(np.uint32),
    }
    tree._post[key] = out
    return out


class FlatTrees(NamedTuple):
    """The kernel's arrays for a list of trees (their postorders concatenated; per key root:
    its subtree's local tables, padded with slack for the last, partial vector block)."""

    node_off: np.ndarray  # [tree] first node; node_off[-1] = all nodes
    kr_off: np.ndarray  # [tree] first key root
    kl: np.ndarray  # [key root] its leftmost leaf (postorder number within its tree)
    km: np.ndarray  # [key root] nodes of its subtree
    loc_off: np.ndarray  # [key root] start of its local columns in loc_l, loc_f
    loc_l: np.ndarray  # [column] l(y) - l(key root), int16
    loc_f: np.ndarray  # [column] the feature node y tests (16-bit code, -1: slack)
    lp_off: np.ndarray  # [key root] start of its leftmost-path columns in lp_pos
    lp_cnt: np.ndarray
    lp_pos: np.ndarray
    fc_off: np.ndarray  # [key root] start of its far columns (l(y) beyond the vector window)
    fc_cnt: np.ndarray
    fc_pos: np.ndarray


class Costs(NamedTuple):
    """The edit costs (int16)."""

    insert: np.int16
    remove: np.int16
    update: np.int16


class Work(NamedTuple):
    """The int16 work arrays of :func:`work_sizes` (any content: every entry a pair reads was
    written for that pair before)."""

    tdd: np.ndarray  # tree distances, row tree major then column tree major
    fd: np.ndarray  # forest distances of the current key-root pair
    buf: np.ndarray  # gathered far columns


_FLAT = LastForest()  # the last result per orientation: MEPSI asks many times in a row


def flatten(trees, mirror: bool = False) -> FlatTrees | None:
    """The kernel's arrays for ``trees`` (or their mirrors), concatenated; the last result is
    kept for the next call on the same tree objects. None if the trees test more than
    :data:`FEATURE_CODES` distinct features (the kernel compares 16-bit feature codes)."""
    return _FLAT.get(trees, mirror, lambda ts: _flatten(ts, mirror))


def _flatten(trees, mirror: bool) -> FlatTrees | None:
    tabs = [_tree_tables(t, mirror) for t in trees]
    n = np.array([t.n_nodes for t in trees], dtype=np.int64)
    k = np.array([len(t["kl"]) for t in tabs], dtype=np.int64)
    node_off = np.concatenate(([0], np.cumsum(n))).astype(np.int64)
    kr_off = np.concatenate(([0], np.cumsum(k))).astype(np.int64)

    def cat(name, dtype, shift=None):
        parts = [t[name] for t in tabs]
        if shift is not None:
            sizes = np.array([len(t[shift]) for t in tabs], dtype=np.int64)
            base = np.cumsum(sizes) - sizes
            parts = [p + b for p, b in zip(parts, base)]
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    def offsets(cnt):
        c = cat(cnt, np.int64)
        return (np.cumsum(c) - c).astype(np.uint64), c.astype(np.uint64)

    lp_off, lp_cnt = offsets("lp_cnt")
    fc_off, fc_cnt = offsets("fc_cnt")
    feats = cat("loc_f", np.int64)
    top = max((int(t.feature.max()) for t in trees if t.n_nodes), default=0)
    if top >= FEATURE_CODES:  # features as dense codes (the kernel only compares them)
        used = np.unique(np.concatenate([t.feature for t in trees]))
        if len(used) >= FEATURE_CODES:
            return None
        real = feats >= 0
        feats[real] = np.searchsorted(used, feats[real])
    loc_f = feats.astype(np.int16)
    slack = np.zeros(2 * V, np.int16)
    return FlatTrees(
        node_off=node_off,
        kr_off=kr_off,
        kl=cat("kl", np.uint64),
        km=cat("m", np.uint64),
        loc_off=cat("loc_off", np.uint64, shift="loc_l"),
        loc_l=np.concatenate([cat("loc_l", np.int16), slack]),
        loc_f=np.concatenate([loc_f, np.full(2 * V, -1, np.int16)]),
        lp_off=lp_off,
        lp_cnt=lp_cnt,
        lp_pos=cat("lp_pos", np.uint32),
        fc_off=fc_off,
        fc_cnt=fc_cnt,
        fc_pos=cat("fc_pos", np.uint32),
    )


# ---------------------------------------------------------------------------------------------
# the row kernels: numba intrinsics emitting LLVM vector code


if NUMBA:
    _I16, _I32, _I64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)

    def _bcast(b, s, vt):
        v = b.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(_I32, 0))
        mask = ir.Constant(ir.VectorType(_I32, vt.count), [0] * vt.count)
        return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined), mask)

    def _smin(b, x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    def _vload(b, base, off, vt):
        p = b.bitcast(b.gep(base, [off]), vt.as_pointer())
        return b.load(p, align=vt.element.width // 8)

    def _narrow(b, v, t):
        return b.trunc(v, t) if v.type.width > t.width else v

    def _row_kernel(mode: str, lanes: int):
        """Intrinsic computing one table row ``fd[cb + 1 .. cb + m]`` (``cb + 0`` holds ``c0``,
        set by the caller) from the previous row ``pb``, the tree distances ``td[tb + y]`` and:

        - ``mode="inner"``: the row ``gb`` = row ``l(x) - 1`` and, for far columns, ``buf[y]``
          already holding ``fd[gb + l(y) - 1]``;
        - ``mode="leaf"``: the same when ``l(x) - 1`` is the previous row (``x`` a leaf): that
          row is taken from the registers, shifted by a lane, not reloaded from memory (a load
          straddling two just-written blocks would wait for them to reach the cache);
        - ``mode="left"`` (row node on its key root's leftmost path): the column features
          ``fy[fo + y]`` against ``fx``; ``fd[x-1, y-1]`` from the registers as for "leaf".

        Blocks of ``lanes`` columns; columns beyond ``m`` are computed from slack and ignored.
        """
        left = mode == "left"
        VT = ir.VectorType(_I16, lanes)
        VF = VT  # 16-bit feature codes
        MT = ir.VectorType(_I32, lanes)
        steps = lanes.bit_length() - 1
        permute = f"llvm.x86.avx512.vpermi2var.hi.{16 * lanes}"

        @intrinsic
        def row(typingctx, fd, pb, cb, gb, td, tb, ly, lo, buf, fy, fo, fx, m, c0, rem, ins, upd):
            sig = types.none(fd, pb, cb, gb, td, tb, ly, lo, buf, fy, fo, fx, m, c0, rem, ins, upd)

            def codegen(context, builder, sig, args):
                b = builder
                (_, pb_, cb_, gb_, _, tb_, _, lo_, _, _, fo_, fx_, m_, c0_, rem_, ins_, upd_) = args

                def data(k):
                    return context.make_array(sig.args[k])(context, b, args[k]).data

                fdp, tdp, lyp, bufp, fyp = data(0), data(4), data(6), data(8), data(9)
                remb = _bcast(b, _narrow(b, rem_, _I16), VT)
                insb = _bcast(b, _narrow(b, ins_, _I16), VT)
                updb = _bcast(b, _narrow(b, upd_, _I16), VT)
                zero = ir.Constant(VT, [0] * lanes)
                inf = ir.Constant(VT, [INF] * lanes)
                ramp = b.mul(insb, ir.Constant(VT, list(range(1, lanes + 1))))
                shift_cost = [b.mul(insb, ir.Constant(VT, [1 << k] * lanes)) for k in range(steps)]
                fxb = _bcast(b, _narrow(b, fx_, _I16), VF)
                c0v = _narrow(b, c0_, _I16)
                p_init = _bcast(b, b.sub(c0v, _narrow(b, rem_, _I16)), VT)  # fd[x-1, 0]
                back = ir.Constant(MT, list(range(lanes - 1, 2 * lanes - 1)))
                perm = cgutils.get_or_insert_function(
                    b.module, ir.FunctionType(VT, [VT, VT, VT]), permute
                )
                entry = b.block
                loop = b.function.append_basic_block("row_blocks")
                done = b.function.append_basic_block("row_done")
                n_blocks = b.udiv(b.add(m_, ir.Constant(_I64, lanes - 1)), ir.Constant(_I64, lanes))
                b.cbranch(b.icmp_unsigned(">", n_blocks, ir.Constant(_I64, 0)), loop, done)
                b.position_at_end(loop)
                blk = b.phi(_I64)
                carry = b.phi(_I16)  # fd of the column before the block
                s_prev = b.phi(VT)  # the previous block of row gb (shifted by one column)
                p_prev = b.phi(VT)  # the previous block of row x - 1 (lane -1: fd[x-1, 0])
                blk.add_incoming(ir.Constant(_I64, 0), entry)
                carry.add_incoming(c0v, entry)
                s_prev.add_incoming(zero, entry)
                p_prev.add_incoming(p_init, entry)
                y0 = b.add(b.mul(blk, ir.Constant(_I64, lanes)), ir.Constant(_I64, 1))
                one = ir.Constant(_I64, 1)
                prev = _vload(b, fdp, b.add(pb_, y0), VT)
                tdv = _vload(b, tdp, b.add(tb_, y0), VT)
                lyv = _vload(b, lyp, b.add(lo_, y0), VT)
                diag = b.shuffle_vector(p_prev, prev, back)  # fd[x-1, y0 - 1 + k]
                if left:
                    fyv = _vload(b, fyp, b.add(fo_, y0), VF)
                    upd_cost = b.select(b.icmp_signed("!=", fyv, fxb), updb, zero)
                    both_left = b.add(diag, upd_cost)  # fd[x-1, y-1] + UPDATE
                    other = b.add(b.mul(lyv, insb), tdv)  # fd[0, l(y)-1] + td[x, y]
                    third = b.select(b.icmp_signed("==", lyv, zero), both_left, other)
                    s_cur = s_prev
                else:
                    # s_cur[k] = fd[gb, y0 + k - 1]: column l(y) - 1 of row gb sits at window
                    # position l(y) + 1 - (y0 - lanes) of (s_prev, s_cur)
                    if mode == "leaf":
                        s_cur = diag
                    else:
                        s_cur = _vload(b, fdp, b.sub(b.add(gb_, y0), one), VT)
                    shift = b.trunc(b.sub(ir.Constant(_I64, lanes + 1), y0), _I16)
                    idx = b.add(lyv, _bcast(b, shift, VT))
                    near = b.call(perm, [s_prev, idx, s_cur])
                    far = _vload(b, bufp, y0, VT)
                    gathered = b.select(b.icmp_signed(">=", idx, zero), near, far)
                    third = b.add(gathered, tdv)
                s = _smin(b, b.add(prev, remb), third)
                for k in range(steps):  # insertion chain inside the block: prefix min-plus scan
                    d = 1 << k
                    mask = ir.Constant(MT, [(lanes + j) if j < d else j - d for j in range(lanes)])
                    s = _smin(b, s, b.add(b.shuffle_vector(s, inf, mask), shift_cost[k]))
                s = _smin(b, s, b.add(_bcast(b, carry, VT), ramp))  # ... and from before it
                out = b.bitcast(b.gep(fdp, [b.add(cb_, y0)]), VT.as_pointer())
                b.store(s, out, align=2)
                nxt = b.add(blk, one)
                blk.add_incoming(nxt, loop)
                carry.add_incoming(b.extract_element(s, ir.Constant(_I32, lanes - 1)), loop)
                s_prev.add_incoming(s_cur, loop)
                p_prev.add_incoming(prev, loop)
                b.cbranch(b.icmp_unsigned("<", nxt, n_blocks), loop, done)
                b.position_at_end(done)
                return context.get_dummy_value()

            return sig, codegen

        return row

    @intrinsic
    def _first_match(typingctx, f, bo, m, fx):
        """Smallest ``y`` in ``1..m`` with ``f[bo + y] == fx``, else ``m + 1``; 32 codes per
        compare (the slack after a key root's ``m`` codes holds -1, never a feature)."""
        sig = types.int64(f, bo, m, fx)

        def codegen(context, builder, sig, args):
            b = builder
            VT = ir.VectorType(_I16, V)
            fp = context.make_array(sig.args[0])(context, b, args[0]).data
            bo_, m_, fx_ = args[1], args[2], args[3]
            fxb = _bcast(b, _narrow(b, fx_, _I16), VT)
            entry = b.block
            loop = b.function.append_basic_block("match_blocks")
            found = b.function.append_basic_block("match_found")
            nxt_blk = b.function.append_basic_block("match_next")
            done = b.function.append_basic_block("match_done")
            n_blocks = b.udiv(b.add(m_, ir.Constant(_I64, V - 1)), ir.Constant(_I64, V))
            none = b.add(m_, ir.Constant(_I64, 1))
            b.cbranch(b.icmp_unsigned(">", n_blocks, ir.Constant(_I64, 0)), loop, done)
            b.position_at_end(loop)
            blk = b.phi(_I64)
            blk.add_incoming(ir.Constant(_I64, 0), entry)
            y0 = b.add(b.mul(blk, ir.Constant(_I64, V)), ir.Constant(_I64, 1))
            hits = b.bitcast(b.icmp_signed("==", _vload(b, fp, b.add(bo_, y0), VT), fxb), _I32)
            b.cbranch(b.icmp_unsigned("!=", hits, ir.Constant(_I32, 0)), found, nxt_blk)
            b.position_at_end(nxt_blk)
            nb = b.add(blk, ir.Constant(_I64, 1))
            blk.add_incoming(nb, nxt_blk)
            b.cbranch(b.icmp_unsigned("<", nb, n_blocks), loop, done)
            b.position_at_end(found)
            i1 = ir.IntType(1)
            cttz = cgutils.get_or_insert_function(
                b.module, ir.FunctionType(_I32, [_I32, i1]), "llvm.cttz.i32"
            )
            tz = b.zext(b.call(cttz, [hits, ir.Constant(ir.IntType(1), 1)]), _I64)
            at = b.add(y0, tz)
            pos = b.select(b.icmp_unsigned("<=", at, m_), at, none)
            b.branch(done)
            b.position_at_end(done)
            res = b.phi(_I64)
            res.add_incoming(none, entry)
            res.add_incoming(none, nxt_blk)
            res.add_incoming(pos, found)
            return res

        return sig, codegen

    _left8, _left16, _left32 = (_row_kernel("left", n) for n in (8, 16, 32))
    _inner8, _inner16, _inner32 = (_row_kernel("inner", n) for n in (8, 16, 32))
    _leaf8, _leaf16, _leaf32 = (_row_kernel("leaf", n) for n in (8, 16, 32))


def work_sizes(n_max: int) -> tuple[int, int, int]:
    """Sizes of the three int16 work arrays (tree distances, forest distances, far columns)."""
    return 2 * (n_max * n_max + 2 * V), (n_max + 2) * (n_max + 1 + 2 * V), n_max + 1 + 2 * V


def _zs16(flat, I, J, costs, out, work):  # pragma: no cover - compiled
    """TED(tree I[p], tree J[p]) into ``out[p]`` (int16), Zhang-Shasha over key-root pairs.

    ``flat``, ``costs``, ``work``: a :class:`FlatTrees`, :class:`Costs` and :class:`Work`
    (NamedTuples or plain tuples in their order)."""
    flat, costs, work = FlatTrees(*flat), Costs(*costs), Work(*work)
    # the arrays as locals, read once (each ``flat.X`` is a reference count in and out)
    node_off, kr_off, kl, km, loc_off = flat.node_off, flat.kr_off, flat.kl, flat.km, flat.loc_off
    loc_l, loc_f, lp_pos, fc_pos = flat.loc_l, flat.loc_f, flat.lp_pos, flat.fc_pos
    lp_off, lp_cnt = flat.lp_off, flat.lp_cnt
    fc_off, fc_cnt = flat.fc_off, flat.fc_cnt
    ins0, rem0, upd = costs.insert, costs.remove, costs.update
    tdd, fd, buf = work.tdd, work.fd, work.buf
    U = np.uint64
    one = U(1)
    n_max = 0
    for t in range(len(node_off) - 1):
        n_max = max(n_max, node_off[t + 1] - node_off[t])
    nT = U(n_max)
    W = U(n_max + 1 + 2 * V)  # row stride of fd, with slack for partial blocks
    TOFF = nT * nT + U(2 * V)  # td: [0, TOFF) row tree major, [TOFF, 2 TOFF) column tree major
    for p in range(len(I)):
        a, b = I[p], J[p]
        n1, n2 = node_off[a + 1] - node_off[a], node_off[b + 1] - node_off[b]
        if n1 == 0 or n2 == 0:
            out[p] = n1 * rem0 + n2 * ins0
            continue
        for ki in range(kr_off[a], kr_off[a + 1]):
            for kj in range(kr_off[b], kr_off[b + 1]):
                # rows over the smaller key-root subtree ("r"), columns over the other ("c")
                if km[ki] <= km[kj]:
                    kr_, kc_, rtd, ctd, rem, ins = ki, kj, U(0), TOFF, rem0, ins0
                else:
                    kr_, kc_, rtd, ctd, rem, ins = kj, ki, TOFF, U(0), ins0, rem0
                m1, m2 = km[kr_], km[kc_]
                li, lj = kl[kr_], kl[kc_]
                ao, bo = loc_off[kr_], loc_off[kc_]
                tcol = lj - one
                lpo, n_lp = lp_off[kc_], lp_cnt[kc_]
                if m1 == 1:
                    # one node x against G_y (y on the column key root's leftmost path, whose
                    # subtree is columns 1..y): map x onto a node of G_y or delete it
                    first = U(_first_match(loc_f, bo, m2, loc_f[ao + one]))
                    for k in range(n_lp):
                        y = U(lp_pos[lpo + k])
                        val = (y - one) * ins + min(rem + ins, upd if first > y else 0)
                        tdd[rtd + li * nT + tcol + y] = val
                        tdd[ctd + (tcol + y) * nT + li] = val
                    continue
                for y in range(m2 + one):
                    fd[y] = y * ins
                fco, n_fc = fc_off[kc_], fc_cnt[kc_]
                for x in range(one, m1 + one):
                    xi = li + x - one
                    lx = U(loc_l[ao + x])
                    pb = (x - one) * W
                    cb = x * W
                    tb = rtd + xi * nT + tcol
                    c0 = x * rem
                    fd[cb] = c0
                    if lx == 0:
                        fx = loc_f[ao + x]
                        if m2 <= 8:
                            _left8(fd, pb, cb, pb, tdd, tb, loc_l, bo,
                                   buf, loc_f, bo, fx, m2, c0, rem, ins, upd)
                        elif m2 <= 16:
                            _left16(fd, pb, cb, pb, tdd, tb, loc_l, bo,
                                    buf, loc_f, bo, fx, m2, c0, rem, ins, upd)
                        else:
                            _left32(fd, pb, cb, pb, tdd, tb, loc_l, bo,
                                    buf, loc_f, bo, fx, m2, c0, rem, ins, upd)
                        for k in range(n_lp):  # tree distances: both key roots' leftmost paths
                            y = U(lp_pos[lpo + k])
                            val = fd[cb + y]
                            tdd[tb + y] = val
                            tdd[ctd + (tcol + y) * nT + xi] = val
                    else:
                        gb = lx * W
                        for k in range(n_fc):  # columns whose l(y) is beyond the vector window
                            y = U(fc_pos[fco + k])
                            buf[y] = fd[gb + U(loc_l[bo + y])]
                        if gb == pb:  # x is a leaf: l(x) - 1 is the previous row
                            if m2 <= 8:
                                _leaf8(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                       buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
                            elif m2 <= 16:
                                _leaf16(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                        buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
                            else:
                                _leaf32(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                        buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
                        elif m2 <= 8:
                            _inner8(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                    buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
                        elif m2 <= 16:
                            _inner16(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                     buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
                        else:
                            _inner32(fd, pb, cb, gb, tdd, tb, loc_l, bo,
                                     buf, loc_f, bo, 0, m2, c0, rem, ins, upd)
        out[p] = tdd[(n1 - 1) * n_max + n2 - 1]


if NUMBA:
    _zs16 = numba.njit(cache=True, nogil=True)(_zs16)


_WORK = threading.local()  # per thread: reused work arrays (no page faults per call)


def pairs(flat, I, J, insert, remove, update) -> np.ndarray:
    """``TED(I[p], J[p])`` (int16) for the trees flattened by :func:`flatten`; one thread."""
    out = np.zeros(len(I), np.int16)
    costs = Costs(np.int16(insert), np.int16(remove), np.int16(update))
    sizes = work_sizes(int(np.diff(flat.node_off).max(initial=0)))
    work = getattr(_WORK, "arrays", None)
    if work is None or any(len(w) < n for w, n in zip(work, sizes)):
        work = _WORK.arrays = Work(*(np.empty(n, np.int16) for n in sizes))
    I, J = np.ascontiguousarray(I, np.int64), np.ascontiguousarray(J, np.int64)
    _zs16(flat, I, J, costs, out, work)
    return out
