"""ONNX-ML TreeEnsemble (``ai.onnx.ml`` opset 5) as one operation: every row of ``input``
``[N, F]`` walks each tree from its root to a leaf; each leaf adds its weight to its target,
aggregated over the trees, then the post transform: result ``[N, n_targets]``.

The trees (ONNX operator docs, TreeEnsemble): interior node ``i`` compares feature
``featureids[i]`` of the row with ``splits[i]`` by ``modes[i]`` — 0 ``<=``, 1 ``<``, 2 ``>=``,
3 ``>``, 4 ``==``, 5 ``!=``, 6 membership in the node's set (the sets are
``membership_values`` cut at NaNs, in the order the membership nodes appear) — and goes to
``truenodeids[i]`` when it holds, else ``falsenodeids[i]``; those are leaf indices where
``trueleafs[i]`` / ``falseleafs[i]`` is 1.  A NaN feature goes the true way at nodes whose
``missing_tracks_true`` is 1 (else the comparison decides: NaN fails all but ``!=``).

Aggregation: 0 average, 1 sum, 2 minimum, 3 maximum of the weights reaching a target (a target
no leaf reaches is 0, as in onnxruntime).  Post transform: 0 none, 1 softmax over the
targets, 2 logistic, 3 softmax over the non-zero targets (zeros stay zero), 4 probit
(``sqrt(2) * erfinv(2 y - 1)``, the inverse error function solved in float64).  Comparisons are exact (float64 holds every value of the input types); the
aggregation runs in float64 and is rounded once to the input's element type.

The structure is checked before anything runs: equal attribute lengths, every id in range,
and no cycle (a walk never revisits a node), so a walk takes at most one step per node.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_tree_ensemble"
_NAME = "onnx_tree_ensemble"
MEMBER = 6

onnx_tree_ensemble = define(_NAME, FAMILY, """
fragment onnx_tree_ensemble<?>(
    input: tensor<?>,
    splits: tensor<?>,
    leaf_weights: tensor<?>,
    membership_values: tensor<scalar> = 0.0,
    featureids: integer[],
    modes: integer[],
    truenodeids: integer[],
    trueleafs: integer[],
    falsenodeids: integer[],
    falseleafs: integer[],
    missing_tracks_true: integer[] = [],
    leaf_targetids: integer[],
    tree_roots: integer[],
    n_targets: integer,
    aggregate_function: integer = 1,
    post_transform: integer = 0 )
-> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX-ML TreeEnsemble-5: each row walks every tree to a leaf; leaf weights "
                                      "aggregated per target (average, sum, min, max), then the post transform.")


def _check(featureids, modes, truenodeids, trueleafs, falsenodeids, falseleafs, missing_tracks_true,
           leaf_targetids, tree_roots, n_targets, aggregate_function, post_transform) -> None:
    n = len(modes)
    for what, seq in (("featureids", featureids), ("truenodeids", truenodeids), ("trueleafs", trueleafs),
                      ("falsenodeids", falsenodeids), ("falseleafs", falseleafs)):
        if len(seq) != n:
            raise op_error(_NAME, f"nodes_{what} has {len(seq)} items; nodes_modes has {n}")
    if missing_tracks_true and len(missing_tracks_true) != n:
        raise op_error(_NAME, f"nodes_missing_value_tracks_true has {len(missing_tracks_true)} items; nodes_modes "
                              f"has {n}")
    if n_targets <= 0:
        raise attr_error(_NAME, "n_targets", n_targets, "must be positive")
    if aggregate_function not in (0, 1, 2, 3):
        raise attr_error(_NAME, "aggregate_function", aggregate_function, "must be 0 (average), 1 (sum), 2 (min) "
                                                                          "or 3 (max)")
    if post_transform not in (0, 1, 2, 3, 4):
        raise attr_error(_NAME, "post_transform", post_transform, "must be 0 to 4")
    bad = next((m for m in modes if not 0 <= m <= MEMBER), None)
    if bad is not None:
        raise op_error(_NAME, f"node mode {bad} is not one of 0 to 6")
    bad = next((f for f in featureids if f < 0), None)
    if bad is not None:
        raise op_error(_NAME, f"feature id {bad} is negative")
    leaves = len(leaf_targetids)
    bad = next((t for t in leaf_targetids if not 0 <= t < n_targets), None)
    if bad is not None:
        raise op_error(_NAME, f"leaf target id {bad} is outside [0, {n_targets})")
    for i in range(n):
        for ids, flags, side in ((truenodeids, trueleafs, "true"), (falsenodeids, falseleafs, "false")):
            bound = leaves if flags[i] else n
            if not 0 <= ids[i] < bound:
                raise op_error(_NAME, f"node {i}: its {side} branch {ids[i]} is outside [0, {bound}) of the "
                                      f"{'leaves' if flags[i] else 'nodes'}")
    if not tree_roots:
        raise op_error(_NAME, "the ensemble has no tree")
    bad = next((r for r in tree_roots if not 0 <= r < n), None)
    if bad is not None:
        raise op_error(_NAME, f"tree root {bad} is outside [0, {n}) of the nodes")
    # no cycle: a depth-first walk over the node graph (iterative: no recursion on stranger input)
    state = [0] * n  # 0 unseen, 1 on the current path, 2 done
    for root in tree_roots:
        if state[root]:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:
            node, k = stack.pop()
            if k == 2:
                state[node] = 2
                continue
            stack.append((node, k + 1))
            ids, flags = (truenodeids, trueleafs) if k == 0 else (falsenodeids, falseleafs)
            if flags[node]:
                continue
            nxt = ids[node]
            if state[nxt] == 1:
                raise op_error(_NAME, f"the trees have a cycle through node {nxt}")
            if state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, 0))


@onnx_tree_ensemble.shape
def _shape(x, splits, leaf_weights, membership_values=(), featureids=(), modes=(), truenodeids=(), trueleafs=(),
           falsenodeids=(), falseleafs=(), missing_tracks_true=(), leaf_targetids=(), tree_roots=(), n_targets=1,
           aggregate_function=1, post_transform=0, dtype=None):
    _check(featureids, modes, truenodeids, trueleafs, falsenodeids, falseleafs, missing_tracks_true,
           leaf_targetids, tree_roots, n_targets, aggregate_function, post_transform)
    if len(x) != 2:
        raise op_error(_NAME, f"the input must be [N, F], got shape {list(x)}")
    if list(splits) not in ([len(modes)], [None]) or list(leaf_weights) not in ([len(leaf_targetids)], [None]):
        raise op_error(_NAME, f"nodes_splits must have one item per node ({len(modes)}) and leaf_weights one per "
                              f"leaf ({len(leaf_targetids)}), got shapes {list(splits)} and {list(leaf_weights)}")
    if len(membership_values) > 1:
        raise op_error(_NAME, f"membership_values must be 1-D, got shape {list(membership_values)}")
    if x[1] is not None and featureids and max(featureids) >= x[1]:
        raise op_error(_NAME, f"feature id {max(featureids)} is outside the {x[1]} features of the input")
    return (x[0], n_targets)


def _sets(modes, membership_values) -> dict[int, set[float]]:
    """The member set of each membership node, from the NaN-delimited list."""
    given = np.asarray(membership_values, np.float64)
    values = given.reshape(-1).tolist() if given.ndim else []  # rank 0: not given
    members = [i for i, m in enumerate(modes) if m == MEMBER]
    groups: list[set[float]] = []
    current: set[float] = set()
    for v in values:
        if v != v:
            groups.append(current)
            current = set()
        else:
            current.add(v)
    if current:
        groups.append(current)
    if len(groups) < len(members):
        raise op_error(_NAME, f"{len(members)} membership nodes but membership_values holds {len(groups)} sets")
    return dict(zip(members, groups, strict=False))


def _holds(mode: int, v: float, split: float, members: set[float] | None) -> bool:
    return (v <= split, v < split, v >= split, v > split, v == split, v != split,
            members is not None and v in members)[mode]


def _aggregate(scores: np.ndarray, counts: np.ndarray, trees: int, aggregate_function: int) -> np.ndarray:
    if aggregate_function == 0:
        return scores / trees
    return np.where(counts > 0, scores, 0.0) if aggregate_function in (2, 3) else scores


def erfinv(z: float) -> float:
    """The inverse of ``math.erf`` in float64: Newton's method on ``erf(y) = z`` from a start
    of Winitzki's approximation (a few steps reach the last bit); +-inf at +-1, NaN outside."""
    if not -1.0 <= z <= 1.0:
        return math.nan
    if abs(z) == 1.0:
        return math.copysign(math.inf, z)
    a = 0.147
    ln = math.log1p(-z * z)
    first = 2 / (math.pi * a) + ln / 2
    y = math.copysign(math.sqrt(math.sqrt(first * first - ln / a) - first), z)
    for _ in range(50):
        step = (math.erf(y) - z) / (2 / math.sqrt(math.pi) * math.exp(-y * y))
        y -= step
        if abs(step) <= 1e-17 * max(1.0, abs(y)):
            break
    return y


def _probit(y: np.ndarray) -> np.ndarray:
    """sqrt(2) * erfinv(2 y - 1): the standard normal quantile of each score."""
    out = np.empty(y.shape)
    for index in np.ndindex(y.shape):
        out[index] = math.sqrt(2.0) * erfinv(2.0 * float(y[index]) - 1.0)
    return out


def _post(y: np.ndarray, post_transform: int) -> np.ndarray:
    if post_transform == 1:
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if post_transform == 2:
        return 1.0 / (1.0 + np.exp(-y))
    if post_transform == 3:
        e = np.where(y != 0, np.exp(y - y.max(axis=1, keepdims=True)), 0.0)
        total = e.sum(axis=1, keepdims=True)
        return e / np.where(total == 0, 1.0, total)
    if post_transform == 4:
        return _probit(y)
    return y


def _start(aggregate_function: int, shape: tuple) -> np.ndarray:
    return np.full(shape, {2: np.inf, 3: -np.inf}.get(aggregate_function, 0.0))


@onnx_tree_ensemble.formal
def _formal(x, splits, leaf_weights, membership_values=0.0, featureids=(), modes=(), truenodeids=(), trueleafs=(),
            falsenodeids=(), falseleafs=(), missing_tracks_true=(), leaf_targetids=(), tree_roots=(), n_targets=1,
            aggregate_function=1, post_transform=0, dtype=None):
    x = np.asarray(x)
    sets = _sets(modes, membership_values)
    split = np.asarray(splits, np.float64).tolist()
    weight = np.asarray(leaf_weights, np.float64).tolist()
    rows = x.shape[0]
    scores = _start(aggregate_function, (rows, n_targets))
    counts = np.zeros((rows, n_targets), np.int64)
    for r in range(rows):
        for root in tree_roots:
            node, leaf = root, None
            while leaf is None:  # the structure check bounds the walk: no node is visited twice
                v = float(x[r, featureids[node]])
                go = (v != v and bool(missing_tracks_true) and bool(missing_tracks_true[node])) or \
                    _holds(modes[node], v, split[node], sets.get(node))
                ids, flags = (truenodeids, trueleafs) if go else (falsenodeids, falseleafs)
                if flags[node]:
                    leaf = ids[node]
                else:
                    node = ids[node]
            t, w = leaf_targetids[leaf], weight[leaf]
            old = scores[r, t]
            scores[r, t] = min(old, w) if aggregate_function == 2 else max(old, w) if aggregate_function == 3 \
                else old + w
            counts[r, t] += 1
    y = _post(_aggregate(scores, counts, len(tree_roots), aggregate_function), post_transform)
    return y.astype(x.dtype)


@onnx_tree_ensemble.fast
def _fast(x, splits, leaf_weights, membership_values=0.0, featureids=(), modes=(), truenodeids=(), trueleafs=(),
          falsenodeids=(), falseleafs=(), missing_tracks_true=(), leaf_targetids=(), tree_roots=(), n_targets=1,
          aggregate_function=1, post_transform=0, dtype=None):
    x = np.asarray(x)
    data = x.astype(np.float64)
    n = len(modes)
    sets = _sets(modes, membership_values)
    feat, mode = np.asarray(featureids, np.int64), np.asarray(modes, np.int64)
    split = np.asarray(splits, np.float64).reshape(-1)
    t_id, t_leaf = np.asarray(truenodeids, np.int64), np.asarray(trueleafs, bool)
    f_id, f_leaf = np.asarray(falsenodeids, np.int64), np.asarray(falseleafs, bool)
    tracks = np.asarray(missing_tracks_true, bool) if missing_tracks_true else np.zeros(n, bool)
    targets, weights = np.asarray(leaf_targetids, np.int64), np.asarray(leaf_weights, np.float64).reshape(-1)
    rows = np.arange(x.shape[0])
    scores = _start(aggregate_function, (x.shape[0], n_targets))
    counts = np.zeros((x.shape[0], n_targets), np.int64)
    for root in tree_roots:
        node = np.full(x.shape[0], root, np.int64)
        leaf = np.full(x.shape[0], -1, np.int64)
        active = rows
        for _ in range(n + 1):  # at most one step per node (no cycles)
            if not active.size:
                break
            at = node[active]
            v, s, m = data[active, feat[at]], split[at], mode[at]
            with np.errstate(invalid="ignore"):
                go = np.select([m == 0, m == 1, m == 2, m == 3, m == 4, m == 5],
                               [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
            for j in np.unique(at[m == MEMBER]):
                here = at == j
                go[here] = np.isin(v[here], list(sets[int(j)]))
            go |= np.isnan(v) & tracks[at]
            nxt = np.where(go, t_id[at], f_id[at])
            done = np.where(go, t_leaf[at], f_leaf[at])
            leaf[active[done]] = nxt[done]
            node[active] = nxt
            active = active[~done]
        t, w = targets[leaf], weights[leaf]
        if aggregate_function == 2:
            np.minimum.at(scores, (rows, t), w)
        elif aggregate_function == 3:
            np.maximum.at(scores, (rows, t), w)
        else:
            np.add.at(scores, (rows, t), w)
        np.add.at(counts, (rows, t), 1)
    y = _post(_aggregate(scores, counts, len(tree_roots), aggregate_function), post_transform)
    return y.astype(x.dtype)
