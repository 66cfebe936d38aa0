"""IR extension operations for opset (v10/11) layers with no exact NNEF counterpart.

Domain ``ir``, names ``ir_<snake_case>``.  Each one exists because the NNEF standard set
cannot say the same thing *exactly*:

* ``ir_erf`` — NNEF has no error function (and its ``gelu`` is the sigmoid approximation,
  while OpenVINO's Gelu is the exact erf form), so Gelu/Erf layers need it.
* ``ir_shape_of``, ``ir_reshape``, ``ir_broadcast``, ``ir_range`` — shapes computed *at run
  time* (dynamic batch or length): NNEF's reshape/tile take their targets as attributes.
  Used only when the shape cannot be folded while loading.
* ``ir_arith``, ``ir_compare`` — numpy-semantics arithmetic on *integer* tensors (NNEF
  arithmetic is ``scalar`` only), e.g. run-time shape arithmetic.
* ``ir_convert`` — OpenVINO Convert to a given element type (f16 rounding, float→int
  truncation and wrap-around as the CPU plugin does), which NNEF ``cast`` does not model.
* ``ir_gather``, ``ir_gather_elements``, ``ir_gather_nd``, ``ir_scatter``, ``ir_one_hot`` —
  indexing with run-time (possibly negative) indices and batch dimensions.
* ``ir_lstm_sequence``, ``ir_gru_sequence``, ``ir_rnn_sequence`` — recurrent sequences with
  per-batch lengths (steps past a sequence's length output zeros and keep the state).
* ``ir_top_k``, ``ir_cumsum``, ``ir_reduce_prod``, ``ir_round`` (ties to even / away from
  zero), ``ir_einsum``, ``ir_interpolate`` (nearest/linear/cubic with OpenVINO's coordinate
  transforms), ``ir_nms`` (NonMaxSuppression with a data-dependent output size).

Kernels follow OpenVINO's specification; where its CPU plugin differs from the text the
docstring says which one is followed (Convert follows the plugin; integer Divide the text).
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..diagnostics import NNEFXError
from .registry import define

# --- ir_erf ---------------------------------------------------------------------------------

ir_erf = define("ir_erf", "ir_opset", """
fragment ir_erf( x: tensor<scalar> ) -> ( y: tensor<scalar> );
""", domain="ir", doc="Gauss error function, element-wise.")


@ir_erf.shape
def _erf_shape(x):
    return tuple(x)


@ir_erf.formal
def _erf_formal(x):
    x = np.asarray(x)
    flat = [math.erf(float(v)) for v in x.reshape(-1)]
    return np.asarray(flat, dtype=x.dtype if x.dtype.kind == "f" else np.float32).reshape(x.shape)


def _erf_vec(x: np.ndarray) -> np.ndarray:
    # Abramowitz-Stegun 7.1.26 is too coarse (1.5e-7 abs) for float64 users; use the
    # continued evaluation through math.erf vectorised via np.frompyfunc-free approach:
    # erf is odd; for float32 data a float64 rational approximation (W. J. Cody) is exact
    # to float32 rounding. We evaluate Cody's three ranges.
    a = np.abs(x.astype(np.float64))
    out = np.empty_like(a)
    small = a < 0.5
    mid = (a >= 0.5) & (a < 4.0)
    big = a >= 4.0
    if small.any():
        z = a[small]
        t = z * z
        p = [3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
             3.20937758913846947e03, 1.85777706184603153e-1]
        q = [2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
             2.84423683343917062e03]
        num = p[4] * t
        den = t
        for i in range(3):
            num = (num + p[i]) * t
            den = (den + q[i]) * t
        out[small] = z * (num + p[3]) / (den + q[3])
    if mid.any():
        z = a[mid]
        c = [5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
             2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
             2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8]
        d = [1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
             1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
             3.43936767414372164e03, 1.23033935480374942e03]
        num = c[8] * z
        den = z
        for i in range(7):
            num = (num + c[i]) * z
            den = (den + d[i]) * z
        erfc = (num + c[7]) / (den + d[7]) * np.exp(-z * z)
        out[mid] = 1.0 - erfc
    if big.any():
        z = a[big]
        p = [3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
             1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2]
        q = [2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
             6.05183413124413191e-2, 2.33520497626869185e-3]
        t = 1.0 / (z * z)
        num = p[5] * t
        den = t
        for i in range(4):
            num = (num + p[i]) * t
            den = (den + q[i]) * t
        r = t * (num + p[4]) / (den + q[4])
        r = (1.0 / math.sqrt(math.pi) - r) / z
        out[big] = 1.0 - r * np.exp(-z * z)
    return np.sign(x) * out


@ir_erf.fast
def _erf_fast(x):
    x = np.asarray(x)
    return _erf_vec(x).astype(x.dtype if x.dtype.kind == "f" else np.float32)


# --- run-time shapes ------------------------------------------------------------------------

ir_shape_of = define("ir_shape_of", "ir_opset", """
fragment ir_shape_of<?>( input: tensor<?> ) -> ( output: tensor<integer> );
""", domain="ir", generic=True, doc="The extents of a tensor as a 1-D integer tensor (IR ShapeOf).")


@ir_shape_of.shape
def _shape_of_shape(x, dtype=None):
    return (len(x),)


@ir_shape_of.formal
def _shape_of_formal(x, dtype=None):
    return np.asarray(np.shape(x), dtype=np.int64)


def reshape_target(in_shape: tuple, target: list[int], special_zero: bool) -> tuple:
    """OpenVINO Reshape: 0 copies the input extent (special_zero) and one -1 is inferred."""
    out = []
    infer = -1
    for i, t in enumerate(target):
        if t == 0 and special_zero:
            if i >= len(in_shape):
                raise NNEFXError(f"reshape: 0 at position {i} but the input has rank {len(in_shape)}")
            out.append(int(in_shape[i]))
        elif t == -1:
            if infer >= 0:
                raise NNEFXError("reshape: more than one -1 in the target shape")
            infer = i
            out.append(1)
        elif t < 0:
            raise NNEFXError(f"reshape: invalid target extent {t}")
        else:
            out.append(int(t))
    total = int(np.prod(in_shape, dtype=np.int64))
    known = int(np.prod(out, dtype=np.int64))
    if infer >= 0:
        if known == 0 or total % known:
            raise NNEFXError(f"reshape: cannot infer -1 reshaping {list(in_shape)} to {list(target)}")
        out[infer] = total // known
    elif known != total:
        raise NNEFXError(f"reshape: cannot reshape {list(in_shape)} ({total} items) to {out} ({known} items)")
    return tuple(out)


ir_reshape = define("ir_reshape", "ir_opset", """
fragment ir_reshape<?>( input: tensor<?>, shape: tensor<integer>, special_zero: logical = true ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR Reshape with the target shape given at run time.")


@ir_reshape.shape
def _reshape_shape(x, s, special_zero=True, dtype=None):
    if len(s) != 1 or s[0] is None:
        raise NNEFXError("ir_reshape: the shape input must be a 1-D tensor")
    return (None,) * int(s[0])


@ir_reshape.formal
def _reshape_formal(x, s, special_zero=True, dtype=None):
    x = np.asarray(x)
    return x.reshape(reshape_target(x.shape, [int(v) for v in np.asarray(s).reshape(-1)], special_zero))


def broadcast_shape(a: tuple, b: tuple) -> tuple:
    """numpy (right-aligned) broadcast of two shapes."""
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2, strict=False):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise NNEFXError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


ir_broadcast = define("ir_broadcast", "ir_opset", """
fragment ir_broadcast<?>( input: tensor<?>, shape: tensor<integer>, mode: string = 'numpy', axes_mapping: integer[] = [] ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR Broadcast (numpy / bidirectional / explicit) to a run-time shape.")


@ir_broadcast.shape
def _broadcast_shape_rule(x, s, mode="numpy", axes_mapping=(), dtype=None):
    if len(s) != 1 or s[0] is None:
        raise NNEFXError("ir_broadcast: the shape input must be a 1-D tensor")
    n = int(s[0])
    if mode == "bidirectional":
        n = max(n, len(x))
    return (None,) * n


def broadcast_to(x: np.ndarray, target: tuple, mode: str, axes_mapping) -> np.ndarray:
    x = np.asarray(x)
    if mode == "numpy":
        if broadcast_shape(x.shape, target) != tuple(target):
            raise NNEFXError(f"broadcast: {list(x.shape)} cannot be broadcast to {list(target)}")
        return np.broadcast_to(x, target).copy()
    if mode == "bidirectional":
        shape = broadcast_shape(x.shape, target)
        return np.broadcast_to(x, shape).copy()
    if mode == "explicit":
        axes = [int(a) for a in axes_mapping]
        if len(axes) != x.ndim:
            raise NNEFXError("broadcast: axes_mapping must have one entry per input dimension")
        shape = [1] * len(target)
        for d, a in zip(x.shape, axes, strict=False):
            if not 0 <= a < len(target):
                raise NNEFXError(f"broadcast: axis {a} out of range")
            shape[a] = d
        return np.broadcast_to(x.reshape(shape), target).copy()
    raise NNEFXError(f"broadcast: unsupported mode '{mode}'")


@ir_broadcast.formal
def _broadcast_formal(x, s, mode="numpy", axes_mapping=(), dtype=None):
    return broadcast_to(x, tuple(int(v) for v in np.asarray(s).reshape(-1)), mode, axes_mapping)


# --- integer arithmetic and comparisons -----------------------------------------------------

ARITH = ("add", "subtract", "multiply", "divide", "pythondiv", "floor_mod", "mod", "maximum", "minimum",
         "power", "squared_difference")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")

ir_arith = define("ir_arith", "ir_opset", """
fragment ir_arith<?>( x: tensor<?>, y: tensor<?>, op: string ) -> ( z: tensor<?> );
""", domain="ir", generic=True,
    doc="numpy-broadcast arithmetic with OpenVINO integer semantics (truncating or floor division).")


def _np_shape(a: tuple, b: tuple) -> tuple:
    return broadcast_shape(a, b)


@ir_arith.shape
def _arith_shape(x, y, op="add", dtype=None):
    if op not in ARITH:
        raise NNEFXError(f"ir_arith: unknown op '{op}'")
    return _np_shape(tuple(x), tuple(y))


def arith(x: np.ndarray, y: np.ndarray, op: str) -> np.ndarray:
    x = np.asarray(x)
    y = np.asarray(y)
    integer = x.dtype.kind in "iu" and y.dtype.kind in "iu"
    if op == "add":
        return x + y
    if op == "subtract":
        return x - y
    if op == "multiply":
        return x * y
    if op in ("divide", "pythondiv"):
        if integer:
            if np.any(y == 0):
                raise NNEFXError("integer division by zero")
            if op == "pythondiv":
                return np.floor_divide(x, y)
            q = np.abs(x) // np.abs(y)
            return np.where((x < 0) != (y < 0), -q, q).astype(np.result_type(x, y))
        return x / y
    if op == "floor_mod":
        return np.mod(x, y)
    if op == "mod":
        return np.fmod(x, y)
    if op == "maximum":
        return np.maximum(x, y)
    if op == "minimum":
        return np.minimum(x, y)
    if op == "power":
        if integer:
            return np.power(x, y.astype(np.int64)) if np.all(y >= 0) else (x.astype(np.float64) ** y).astype(x.dtype)
        return np.power(x, y)
    if op == "squared_difference":
        return (x - y) * (x - y)
    raise NNEFXError(f"ir_arith: unknown op '{op}'")


@ir_arith.formal
def _arith_formal(x, y, op="add", dtype=None):
    return arith(x, y, op)


ir_compare = define("ir_compare", "ir_opset", """
fragment ir_compare<?>( x: tensor<?>, y: tensor<?>, op: string ) -> ( z: tensor<logical> );
""", domain="ir", generic=True, doc="numpy-broadcast comparison of tensors of any data type.")


@ir_compare.shape
def _compare_shape(x, y, op="equal", dtype=None):
    if op not in COMPARE:
        raise NNEFXError(f"ir_compare: unknown op '{op}'")
    return _np_shape(tuple(x), tuple(y))


def compare(x, y, op: str) -> np.ndarray:
    fn = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
          "greater": np.greater, "greater_equal": np.greater_equal}[op]
    return fn(np.asarray(x), np.asarray(y))


@ir_compare.formal
def _compare_formal(x, y, op="equal", dtype=None):
    return compare(x, y, op)


# --- Convert ----------------------------------------------------------------------------------

_NUMPY_OF = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
             "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
             "u8": np.uint8, "boolean": np.bool_}


def convert(x: np.ndarray, destination: str) -> np.ndarray:
    """OpenVINO Convert as its CPU plugin computes it (checked value by value).

    float → integer truncates toward zero into a 32-bit integer (64-bit for 64-bit targets;
    out of range or NaN gives the minimum, as x86 conversions do) and then keeps the low bits
    of the target width, so -2.5 → u8 is 254 and 300.7 → u8 is 44; integer → integer wraps;
    anything → boolean is ``!= 0``.
    """
    x = np.asarray(x)
    if destination not in _NUMPY_OF:
        raise NNEFXError(f"Convert to '{destination}' is not supported")
    dt = np.dtype(_NUMPY_OF[destination])
    if dt == np.bool_:
        return x != 0
    if dt.kind in "iu" and x.dtype.kind == "f":
        wide = np.dtype(np.int64) if dt.itemsize == 8 else np.dtype(np.int32)
        info = np.iinfo(wide)
        t = np.trunc(x.astype(np.float64))
        bad = ~np.isfinite(t) | (t < info.min) | (t > info.max)
        t = np.where(bad, info.min, t).astype(wide)
        with np.errstate(over="ignore"):
            return t.astype(dt)
    with np.errstate(over="ignore"):
        return x.astype(dt)


ir_convert = define("ir_convert", "ir_opset", """
fragment ir_convert<?>( input: tensor<>, destination_type: string ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR Convert to an element type (f32, f16, i64, i32, u8, boolean, ...).")


@ir_convert.shape
def _convert_shape(x, destination_type="f32", dtype=None):
    if destination_type not in _NUMPY_OF:
        raise NNEFXError(f"ir_convert: unsupported destination type '{destination_type}'")
    return tuple(x)


@ir_convert.formal
def _convert_formal(x, destination_type="f32", dtype=None):
    y = convert(x, destination_type)
    # Hold results in the NNEF storage types (float32 / int64 / bool); values keep the
    # destination type's rounding and range.
    if y.dtype.kind == "f":
        return y.astype(np.float64 if y.dtype == np.float64 else np.float32)
    if y.dtype.kind in "iu":
        return y.astype(np.int64)
    return y


# --- Gather ------------------------------------------------------------------------------------

ir_gather = define("ir_gather", "ir_opset", """
fragment ir_gather<?>( input: tensor<?>, indices: tensor<integer>, axis: integer, batch_dims: integer = 0 ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR Gather (v8): negative indices count from the end; batch_dims.")


@ir_gather.shape
def _gather_shape(x, i, axis=0, batch_dims=0, dtype=None):
    r = len(x)
    if not 0 <= batch_dims <= axis < r or batch_dims > len(i):
        raise NNEFXError(f"ir_gather: need 0 <= batch_dims ({batch_dims}) <= axis ({axis}) < rank ({r})")
    return tuple(x[:axis]) + tuple(i[batch_dims:]) + tuple(x[axis + 1:])


def gather(x: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    x = np.asarray(x)
    idx = np.asarray(idx).astype(np.int64)
    n = x.shape[axis]
    if np.any((idx < -n) | (idx >= n)):
        raise NNEFXError(f"gather: index out of range for extent {n}")
    idx = np.where(idx < 0, idx + n, idx)
    if batch_dims == 0:
        return np.take(x, idx, axis=axis)
    # Loop over the shared batch dims (formal definition: out[b..., i..., q...] = x[b..., idx[b..., i...], q...]).
    bshape = x.shape[:batch_dims]
    out = None
    for b in np.ndindex(*bshape):
        piece = np.take(x[b], idx[b], axis=axis - batch_dims)
        if out is None:
            out = np.empty(bshape + piece.shape, dtype=x.dtype)
        out[b] = piece
    if out is None:
        return np.empty(tuple(x.shape[:axis]) + idx.shape[batch_dims:] + x.shape[axis + 1:], x.dtype)
    return out


@ir_gather.fast
def _gather_formal(x, i, axis=0, batch_dims=0, dtype=None):
    return gather(x, i, axis, batch_dims)


# --- LSTMSequence --------------------------------------------------------------------------------

ir_lstm_sequence = define("ir_lstm_sequence", "ir_opset", """
fragment ir_lstm_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, initial_cell: tensor<scalar>,
                           sequence_lengths: tensor<integer>, W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>,
                           direction: string = 'forward', clip: scalar = 0.0 )
    -> ( output: tensor<scalar>, hidden: tensor<scalar>, cell: tensor<scalar> );
""", domain="ir", doc="IR LSTMSequence (v5), batch-first [N,T,I]; gates f,i,c,o; sigmoid/tanh/tanh.")


@ir_lstm_sequence.shape
def _lstm_shape(x, h, c, lens, w, r, b, direction="forward", clip=0.0):
    if len(x) != 3 or len(h) != 3 or len(w) != 3:
        raise NNEFXError("ir_lstm_sequence: X, H, W must have rank 3")
    n, t, _ = x
    dirs = 2 if direction == "bidirectional" else 1
    hs = h[2]
    if w[0] != dirs or w[1] != 4 * hs or r[2] != hs or b[1] != 4 * hs:
        raise NNEFXError("ir_lstm_sequence: weight shapes do not match the hidden size")
    return (n, dirs, t, hs), (n, dirs, hs), (n, dirs, hs)


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm_sequence(x, h0, c0, lens, w, r, b, direction="forward", clip=0.0):
    x = np.asarray(x)
    n, t, _ = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    hs = h0.shape[2]
    y = np.zeros((n, dirs, t, hs), dtype=x.dtype)
    ho = np.zeros((n, dirs, hs), dtype=x.dtype)
    co = np.zeros((n, dirs, hs), dtype=x.dtype)
    lens = np.asarray(lens).reshape(-1).astype(np.int64)
    if lens.size == 1 and n != 1:
        lens = np.repeat(lens, n)
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        h = h0[:, d].astype(x.dtype).copy()
        c = c0[:, d].astype(x.dtype).copy()
        for step in range(t):
            active = step < lens
            pos = np.where(active, (lens - 1 - step) if reverse else step, 0)
            xt = x[np.arange(n), pos]
            gates = xt @ w[d].T + h @ r[d].T + b[d]
            if clip:
                gates = np.clip(gates, -clip, clip)
            f, i, g, o = np.split(gates, 4, axis=1)
            c_new = _sig(f) * c + _sig(i) * np.tanh(g)
            h_new = _sig(o) * np.tanh(c_new)
            c = np.where(active[:, None], c_new, c)
            h = np.where(active[:, None], h_new, h)
            for bi in range(n):
                if active[bi]:
                    y[bi, d, pos[bi]] = h[bi]
        ho[:, d] = h
        co[:, d] = c
    return y, ho, co


@ir_lstm_sequence.formal
def _lstm_formal(x, h, c, lens, w, r, b, direction="forward", clip=0.0):
    return lstm_sequence(x, h, c, lens, w, r, b, direction, clip)


# --- GRUSequence / RNNSequence ---------------------------------------------------------------------

ir_gru_sequence = define("ir_gru_sequence", "ir_opset", """
fragment ir_gru_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, sequence_lengths: tensor<integer>,
                          W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>, direction: string = 'forward',
                          clip: scalar = 0.0, linear_before_reset: logical = false )
    -> ( output: tensor<scalar>, hidden: tensor<scalar> );
""", domain="ir", doc="IR GRUSequence (v5), batch-first [N,T,I]; gates z,r,h; sigmoid/tanh.")

ir_rnn_sequence = define("ir_rnn_sequence", "ir_opset", """
fragment ir_rnn_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, sequence_lengths: tensor<integer>,
                          W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>, direction: string = 'forward',
                          clip: scalar = 0.0, activation: string = 'tanh' )
    -> ( output: tensor<scalar>, hidden: tensor<scalar> );
""", domain="ir", doc="IR RNNSequence (v5), batch-first [N,T,I]; H' = f(X W^T + H R^T + B).")


def _seq_shape(x, h, w, r, b, direction, gates):
    if len(x) != 3 or len(h) != 3 or len(w) != 3 or len(r) != 3:
        raise NNEFXError("recurrent sequence: X, H, W and R must have rank 3")
    n, t, _ = x
    dirs = 2 if direction == "bidirectional" else 1
    hs = h[2]
    if w[0] != dirs or w[1] != gates * hs or r[2] != hs:
        raise NNEFXError("recurrent sequence: weight shapes do not match the hidden size")
    return (n, dirs, t, hs), (n, dirs, hs)


@ir_gru_sequence.shape
def _gru_shape(x, h, lens, w, r, b, direction="forward", clip=0.0, linear_before_reset=False):
    return _seq_shape(x, h, w, r, b, direction, 3)


@ir_rnn_sequence.shape
def _rnn_shape(x, h, lens, w, r, b, direction="forward", clip=0.0, activation="tanh"):
    return _seq_shape(x, h, w, r, b, direction, 1)


_ACTIVATIONS = {"tanh": np.tanh, "sigmoid": _sig, "relu": lambda v: np.maximum(v, 0)}


def _run_sequence(x, h0, lens, direction, cell):
    """Shared time loop: steps at or past a sequence's length leave zeros and the state."""
    x = np.asarray(x)
    n, t, _ = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    hs = h0.shape[2]
    y = np.zeros((n, dirs, t, hs), dtype=x.dtype)
    ho = np.zeros((n, dirs, hs), dtype=x.dtype)
    lens = np.asarray(lens).reshape(-1).astype(np.int64)
    if lens.size == 1 and n != 1:
        lens = np.repeat(lens, n)
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        h = h0[:, d].astype(x.dtype).copy()
        for step in range(t):
            active = step < lens
            pos = np.where(active, (lens - 1 - step) if reverse else step, 0)
            h_new = cell(d, x[np.arange(n), pos], h)
            h = np.where(active[:, None], h_new, h)
            for bi in range(n):
                if active[bi]:
                    y[bi, d, pos[bi]] = h[bi]
        ho[:, d] = h
    return y, ho


@ir_gru_sequence.formal
def _gru_formal(x, h0, lens, w, r, b, direction="forward", clip=0.0, linear_before_reset=False):
    def cell(d, xt, h):
        wz, wr, wh = np.split(w[d], 3)
        rz, rr, rh = np.split(r[d], 3)
        parts = b[d].reshape(4 if linear_before_reset else 3, -1)
        bz, br, bh = parts[0], parts[1], parts[2]
        rbh = parts[3] if linear_before_reset else None

        def c(v):
            return np.clip(v, -clip, clip) if clip else v

        z = _sig(c(xt @ wz.T + h @ rz.T + bz))
        rg = _sig(c(xt @ wr.T + h @ rr.T + br))
        if linear_before_reset:
            hh = np.tanh(c(xt @ wh.T + rg * (h @ rh.T + rbh) + bh))
        else:
            hh = np.tanh(c(xt @ wh.T + (rg * h) @ rh.T + bh))
        return (1 - z) * hh + z * h

    return _run_sequence(x, h0, lens, direction, cell)


@ir_rnn_sequence.formal
def _rnn_formal(x, h0, lens, w, r, b, direction="forward", clip=0.0, activation="tanh"):
    if activation not in _ACTIVATIONS:
        raise NNEFXError(f"ir_rnn_sequence: unsupported activation '{activation}'")
    f = _ACTIVATIONS[activation]

    def cell(d, xt, h):
        v = xt @ w[d].T + h @ r[d].T + b[d]
        return f(np.clip(v, -clip, clip) if clip else v)

    return _run_sequence(x, h0, lens, direction, cell)


# --- Range, TopK, CumSum, ReduceProd, Round, Einsum --------------------------------------------------

ir_range = define("ir_range", "ir_opset", """
fragment ir_range<?>( start: tensor<?>, stop: tensor<?>, step: tensor<?> ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR Range: start, start+step, ... up to (excluding) stop; bounds at run time.")


@ir_range.shape
def _range_shape(a, b, c, dtype=None):
    for s in (a, b, c):
        if int(np.prod(s, dtype=np.int64)) != 1:
            raise NNEFXError("ir_range: start, stop and step must be single values")
    return (None,)


@ir_range.formal
def _range_formal(a, b, c, dtype=None):
    a, b, c = (np.asarray(v).reshape(-1)[0] for v in (a, b, c))
    if c == 0:
        raise NNEFXError("ir_range: step must not be 0")
    count = max(int(math.ceil((float(b) - float(a)) / float(c))), 0)
    if count > 1 << 28:
        raise NNEFXError(f"ir_range: {count} items is too many")
    out = a + np.arange(count) * c
    kind = "f" if dtype == "scalar" else "i"
    return out.astype(np.float32 if kind == "f" else np.int64)


ir_top_k = define("ir_top_k", "ir_opset", """
fragment ir_top_k( input: tensor<scalar>, k: integer, axis: integer, mode: string = 'max', sort: string = 'value' )
    -> ( values: tensor<scalar>, indices: tensor<integer> );
""", domain="ir", doc="IR TopK: the k largest (or smallest) along an axis; ties keep the lower index.")


@ir_top_k.shape
def _top_k_shape(x, k=1, axis=0, mode="max", sort="value"):
    if not 0 <= axis < len(x):
        raise NNEFXError(f"ir_top_k: axis {axis} out of range")
    if k < 1 or (x[axis] is not None and k > x[axis]):
        raise NNEFXError(f"ir_top_k: k = {k} is out of range for extent {x[axis]}")
    s = list(x)
    s[axis] = k
    return tuple(s), tuple(s)


@ir_top_k.fast
def _top_k_formal(x, k=1, axis=0, mode="max", sort="value"):
    x = np.asarray(x)
    key = -x if mode == "max" else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    if sort == "index":
        idx = np.sort(idx, axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


ir_cumsum = define("ir_cumsum", "ir_opset", """
fragment ir_cumsum( x: tensor<scalar>, axis: integer, exclusive: logical = false, reverse: logical = false )
    -> ( y: tensor<scalar> );
""", domain="ir", doc="IR CumSum along an axis (optionally exclusive and/or from the end).")


@ir_cumsum.shape
def _cumsum_shape(x, axis=0, exclusive=False, reverse=False):
    if not 0 <= axis < len(x):
        raise NNEFXError(f"ir_cumsum: axis {axis} out of range")
    return tuple(x)


@ir_cumsum.fast
def _cumsum_formal(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    v = np.flip(x, axis) if reverse else x
    c = np.cumsum(v, axis=axis, dtype=np.float64)
    if exclusive:
        c = c - v
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype)


ir_reduce_prod = define("ir_reduce_prod", "ir_opset", """
fragment ir_reduce_prod( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""", domain="ir", doc="Product over axes (kept with extent 1, like the NNEF reductions).")


@ir_reduce_prod.shape
def _prod_shape(x, axes=()):
    s = list(x)
    for a in axes:
        if not 0 <= a < len(s):
            raise NNEFXError(f"ir_reduce_prod: axis {a} out of range")
        s[a] = 1
    return tuple(s)


@ir_reduce_prod.fast
def _prod_formal(x, axes=()):
    x = np.asarray(x)
    return np.prod(x, axis=tuple(axes), keepdims=True, dtype=np.float64).astype(x.dtype)


ir_round = define("ir_round", "ir_opset", """
fragment ir_round( x: tensor<scalar>, mode: string = 'half_to_even' ) -> ( y: tensor<scalar> );
""", domain="ir", doc="IR Round: ties to even, or away from zero (NNEF round ties toward +infinity).")


@ir_round.shape
def _round_shape(x, mode="half_to_even"):
    if mode not in ("half_to_even", "half_away_from_zero"):
        raise NNEFXError(f"ir_round: unknown mode '{mode}'")
    return tuple(x)


@ir_round.fast
def _round_formal(x, mode="half_to_even"):
    x = np.asarray(x)
    if mode == "half_to_even":
        return np.round(x).astype(x.dtype)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype)


ir_einsum = define("ir_einsum", "ir_opset", """
fragment ir_einsum( inputs: tensor<scalar>[], equation: string ) -> ( output: tensor<scalar> );
""", domain="ir", doc="IR Einsum: sums of products over the labelled axes of an explicit equation.")

_EINSUM = re.compile(r"^[a-zA-Z.,]*->[a-zA-Z.]*$")


def _einsum_check(equation: str, n: int) -> str:
    eq = equation.replace(" ", "")
    if not _EINSUM.match(eq) or len(eq.split("->")[0].split(",")) != n:
        raise NNEFXError(f"ir_einsum: unsupported equation '{equation}' for {n} inputs")
    return eq


@ir_einsum.shape
def _einsum_shape(shapes, equation=""):
    eq = _einsum_check(equation, len(shapes))
    ins, out = eq.split("->")
    if "." in eq:
        raise NNEFXError("ir_einsum: ellipsis equations are not supported")
    sizes: dict[str, int] = {}
    for labels, s in zip(ins.split(","), shapes, strict=False):
        if len(labels) != len(s):
            raise NNEFXError(f"ir_einsum: '{labels}' does not match an input of rank {len(s)}")
        for lab, d in zip(labels, s, strict=True):
            if lab in sizes and d not in (sizes[lab],) and d != 1 and sizes[lab] != 1:
                raise NNEFXError(f"ir_einsum: label '{lab}' has extents {sizes[lab]} and {d}")
            sizes[lab] = max(sizes.get(lab, 1), d)
    return tuple(sizes[lab] for lab in out)


@ir_einsum.fast
def _einsum_formal(xs, equation=""):
    eq = _einsum_check(equation, len(xs))
    return np.einsum(eq, *[np.asarray(x, dtype=np.float64) for x in xs]).astype(np.asarray(xs[0]).dtype)


# --- Interpolate ----------------------------------------------------------------------------------

ir_interpolate = define("ir_interpolate", "ir_opset", """
fragment ir_interpolate( input: tensor<scalar>, axes: integer[], sizes: integer[], scales: scalar[],
                         mode: string = 'nearest', coordinate_transformation_mode: string = 'half_pixel',
                         nearest_mode: string = 'round_prefer_floor', cubic_coeff_a: scalar = -0.75 )
    -> ( output: tensor<scalar> );
""", domain="ir", doc="IR Interpolate (v4/v11): nearest, linear_onnx and cubic resizing of the given axes.")

INTERP_MODES = ("nearest", "linear_onnx", "cubic")
COORD_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


@ir_interpolate.shape
def _interp_shape(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                  nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    if mode not in INTERP_MODES or coordinate_transformation_mode not in COORD_MODES or \
            nearest_mode not in NEAREST_MODES:
        raise NNEFXError(f"ir_interpolate: unsupported mode {mode}/{coordinate_transformation_mode}/{nearest_mode}")
    if not (len(axes) == len(sizes) == len(scales)):
        raise NNEFXError("ir_interpolate: axes, sizes and scales must have the same length")
    s = list(x)
    for a, n in zip(axes, sizes, strict=True):
        if not 0 <= a < len(s) or n < 1:
            raise NNEFXError(f"ir_interpolate: bad axis {a} or size {n}")
        s[a] = n
    return tuple(s)


def _source_coordinate(i: np.ndarray, scale: float, n_in: int, n_out: int, mode: str) -> np.ndarray:
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    return i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(i)  # align_corners


def _nearest_index(c: np.ndarray, mode: str, downsample: bool) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(c - np.floor(c) == 0.5, np.floor(c), np.round(c))
    if mode == "round_prefer_ceil":
        return np.where(c - np.floor(c) == 0.5, np.ceil(c), np.round(c))
    if mode == "floor":
        return np.floor(c)
    if mode == "ceil":
        return np.ceil(c)
    return np.ceil(c) if downsample else np.trunc(c)  # simple


def interpolation_taps(n_in: int, n_out: int, scale: float, mode: str, coord: str, nearest: str,
                       a: float) -> tuple[np.ndarray, np.ndarray]:
    """Per output position: source indices [n_out, taps] and weights [n_out, taps]."""
    i = np.arange(n_out, dtype=np.float64)
    c = _source_coordinate(i, scale, n_in, n_out, coord)
    if mode == "nearest":
        idx = np.clip(_nearest_index(c, nearest, scale < 1), 0, n_in - 1).astype(np.int64)
        return idx[:, None], np.ones((n_out, 1))
    if mode == "linear_onnx":
        c = np.clip(c, 0, n_in - 1)
        i0 = np.floor(c).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = c - i0
        return np.stack([i0, i1], 1), np.stack([1 - w, w], 1)
    # cubic (Keys, coefficient a), indices clamped at the borders
    f = np.floor(c)
    t = c - f
    idx = np.stack([f - 1, f, f + 1, f + 2], 1).astype(np.int64)
    d = np.stack([1 + t, t, 1 - t, 2 - t], 1)
    w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                 np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    return np.clip(idx, 0, n_in - 1), w


@ir_interpolate.fast
def _interp_formal(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                   nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    x = np.asarray(x)
    y = x.astype(np.float64)
    for a, n, s in zip(axes, sizes, scales, strict=True):
        idx, w = interpolation_taps(y.shape[a], n, s, mode, coordinate_transformation_mode, nearest_mode,
                                    cubic_coeff_a)
        moved = np.moveaxis(y, a, -1)
        out = np.zeros(moved.shape[:-1] + (n,))
        for k in range(idx.shape[1]):
            out += moved[..., idx[:, k]] * w[:, k]
        y = np.moveaxis(out, -1, a)
    return y.astype(x.dtype)


# --- gathers and scatters ----------------------------------------------------------------------------


def _norm_index(idx: np.ndarray, n: int, what: str) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    if np.any((idx < -n) | (idx >= n)):
        raise NNEFXError(f"{what}: index out of range for extent {n}")
    return np.where(idx < 0, idx + n, idx)


ir_gather_elements = define("ir_gather_elements", "ir_opset", """
fragment ir_gather_elements<?>( input: tensor<?>, indices: tensor<integer>, axis: integer ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR GatherElements: out[i..] = input[i.. with i_axis = indices[i..]].")


@ir_gather_elements.shape
def _ge_shape(x, i, axis=0, dtype=None):
    if len(x) != len(i) or not 0 <= axis < len(x):
        raise NNEFXError("ir_gather_elements: input and indices must have equal ranks and a valid axis")
    return tuple(i)


@ir_gather_elements.fast
def _ge_formal(x, i, axis=0, dtype=None):
    x = np.asarray(x)
    return np.take_along_axis(x, _norm_index(i, x.shape[axis], "ir_gather_elements"), axis=axis)


ir_gather_nd = define("ir_gather_nd", "ir_opset", """
fragment ir_gather_nd<?>( input: tensor<?>, indices: tensor<integer>, batch_dims: integer = 0 ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR GatherND (v8): slices of input addressed by the last axis of indices.")


@ir_gather_nd.shape
def _gnd_shape(x, i, batch_dims=0, dtype=None):
    k = i[-1] if i else None
    if not i or k is None or batch_dims + k > len(x) or tuple(x[:batch_dims]) != tuple(i[:batch_dims]):
        raise NNEFXError("ir_gather_nd: indices do not fit the input")
    return tuple(i[:-1]) + tuple(x[batch_dims + k:])


@ir_gather_nd.formal
def _gnd_formal(x, i, batch_dims=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    k = i.shape[-1]
    out_shape = i.shape[:-1] + x.shape[batch_dims + k:]
    out = np.empty(out_shape, dtype=x.dtype)
    for pos in np.ndindex(*i.shape[:-1]):
        b = pos[:batch_dims]
        idx = tuple(int(_norm_index(v, x.shape[batch_dims + j], "ir_gather_nd")) for j, v in enumerate(i[pos]))
        out[pos] = x[b + idx]
    return out


ir_scatter = define("ir_scatter", "ir_opset", """
fragment ir_scatter<?>( data: tensor<?>, indices: tensor<integer>, updates: tensor<?>, kind: string,
                        axis: integer = 0, reduction: string = 'none', use_init_val: logical = true )
    -> ( output: tensor<?> );
""", domain="ir", generic=True,
    doc="IR ScatterUpdate / ScatterNDUpdate / ScatterElementsUpdate (kind 'update', 'nd', 'elements').")


@ir_scatter.shape
def _scatter_shape(d, i, u, kind="update", axis=0, reduction="none", use_init_val=True, dtype=None):
    if kind not in ("update", "nd", "elements"):
        raise NNEFXError(f"ir_scatter: unknown kind '{kind}'")
    if reduction not in ("none", "sum", "prod", "min", "max", "mean"):
        raise NNEFXError(f"ir_scatter: unknown reduction '{reduction}'")
    return tuple(d)


@ir_scatter.formal
def _scatter_formal(d, i, u, kind="update", axis=0, reduction="none", use_init_val=True, dtype=None):
    d = np.array(d, copy=True)
    i = np.asarray(i).astype(np.int64)
    u = np.asarray(u)
    if kind == "update":  # data[..., indices[j..], ...] along axis = updates[..., j.., ...]
        idx = _norm_index(i, d.shape[axis], "ScatterUpdate")
        moved = np.moveaxis(d, axis, 0)
        upd = u.reshape(d.shape[:axis] + idx.shape + d.shape[axis + 1:])
        upd = np.moveaxis(upd.reshape(d.shape[:axis] + (idx.size,) + d.shape[axis + 1:]), axis, 0)
        for j, t in enumerate(idx.reshape(-1)):
            moved[t] = upd[j]
        return np.moveaxis(moved, 0, axis)
    if kind == "nd":
        k = i.shape[-1]
        for pos in np.ndindex(*i.shape[:-1]):
            idx = tuple(int(_norm_index(v, d.shape[j], "ScatterNDUpdate")) for j, v in enumerate(i[pos]))
            d[idx] = u[pos]
        del k
        return d
    # elements, with an optional reduction (ScatterElementsUpdate-12)
    idx = _norm_index(i, d.shape[axis], "ScatterElementsUpdate")
    acc: dict[tuple, list] = {}
    for pos in np.ndindex(*idx.shape):
        target = pos[:axis] + (int(idx[pos]),) + pos[axis + 1:]
        acc.setdefault(target, []).append(u[pos])
    for target, vals in acc.items():
        if reduction == "none":
            d[target] = vals[-1]
            continue
        pool = ([d[target]] if use_init_val else []) + vals
        if reduction == "sum":
            v = sum(pool[1:], pool[0])
        elif reduction == "prod":
            v = pool[0]
            for p in pool[1:]:
                v = v * p
        elif reduction == "min":
            v = min(pool)
        elif reduction == "max":
            v = max(pool)
        else:
            v = sum(pool[1:], pool[0]) / len(pool)
            if d.dtype.kind in "iu":
                v = np.floor(v)
        d[target] = v
    return d


ir_one_hot = define("ir_one_hot", "ir_opset", """
fragment ir_one_hot<?>( indices: tensor<integer>, on_value: tensor<?>, off_value: tensor<?>, depth: integer,
                        axis: integer ) -> ( output: tensor<?> );
""", domain="ir", generic=True, doc="IR OneHot: on_value where the index equals the position along axis.")


@ir_one_hot.shape
def _one_hot_shape(i, on, off, depth=1, axis=-1, dtype=None):
    if depth < 1 or not 0 <= axis <= len(i):
        raise NNEFXError(f"ir_one_hot: bad depth {depth} or axis {axis}")
    s = list(i)
    s.insert(axis, depth)
    return tuple(s)


@ir_one_hot.fast
def _one_hot_formal(i, on, off, depth=1, axis=-1, dtype=None):
    i = np.asarray(i).astype(np.int64)
    pos = np.arange(depth).reshape((1,) * axis + (depth,) + (1,) * (i.ndim - axis))
    hit = np.expand_dims(i, axis) == pos
    return np.where(hit, np.asarray(on).reshape(()), np.asarray(off).reshape(()))


# --- NonMaxSuppression ---------------------------------------------------------------------------------

ir_nms = define("ir_nms", "ir_opset", """
fragment ir_nms( boxes: tensor<scalar>, scores: tensor<scalar>, max_output_boxes_per_class: integer,
                 iou_threshold: scalar, score_threshold: scalar, soft_nms_sigma: scalar = 0.0,
                 box_encoding: string = 'corner', sort_result_descending: logical = true )
    -> ( selected_indices: tensor<integer>, selected_scores: tensor<scalar>, valid_outputs: tensor<integer> );
""", domain="ir", doc="IR NonMaxSuppression (v5/v9): per batch and class, greedy (or soft) suppression; "
                      "outputs hold only the selected rows.")


@ir_nms.shape
def _nms_shape(boxes, scores, **attrs):
    if len(boxes) != 3 or boxes[2] != 4 or len(scores) != 3 or scores[0] != boxes[0] or scores[2] != boxes[1]:
        raise NNEFXError("ir_nms: boxes must be [B, N, 4] and scores [B, C, N]")
    return (None, 3), (None, 3), (1,)


def _corners(b: np.ndarray, encoding: str) -> np.ndarray:
    if encoding == "center":
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    y1 = np.minimum(b[..., 0], b[..., 2])
    y2 = np.maximum(b[..., 0], b[..., 2])
    x1 = np.minimum(b[..., 1], b[..., 3])
    x2 = np.maximum(b[..., 1], b[..., 3])
    return np.stack([y1, x1, y2, x2], -1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    if area_a <= 0 or area_b <= 0:
        return 0.0
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = ih * iw
    return float(inter / (area_a + area_b - inter))


@ir_nms.formal
def _nms_formal(boxes, scores, max_output_boxes_per_class=0, iou_threshold=0.0, score_threshold=0.0,
                soft_nms_sigma=0.0, box_encoding="corner", sort_result_descending=True):
    boxes = np.asarray(boxes, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    nb, nc, _ = scores.shape
    corners = _corners(boxes, box_encoding)
    picked: list[tuple[int, int, int, float]] = []
    scale = -0.5 / soft_nms_sigma if soft_nms_sigma > 0 else 0.0
    for b in range(nb):
        for c in range(nc):
            if max_output_boxes_per_class <= 0:
                continue
            # candidates: (score, box index), best first; equal scores keep the lower index first
            cand = [(scores[b, c, i], i) for i in range(scores.shape[2]) if scores[b, c, i] > score_threshold]
            cand.sort(key=lambda t: (-t[0], t[1]))
            chosen: list[tuple[int, float]] = []
            while cand and len(chosen) < max_output_boxes_per_class:
                s, i = cand.pop(0)
                if soft_nms_sigma > 0:
                    keep = True
                else:
                    keep = all(_iou(corners[b, i], corners[b, j]) <= iou_threshold for j, _ in chosen)
                if not keep:
                    continue
                chosen.append((i, s))
                if soft_nms_sigma > 0:  # decay the others' scores, drop those under the threshold
                    rest = []
                    for s2, i2 in cand:
                        iou = _iou(corners[b, i], corners[b, i2])
                        s2 = s2 * np.exp(scale * iou * iou)
                        if s2 > score_threshold:
                            rest.append((s2, i2))
                    rest.sort(key=lambda t: (-t[0], t[1]))
                    cand = rest
            picked.extend((b, c, i, s) for i, s in chosen)
    if sort_result_descending:
        picked.sort(key=lambda t: -t[3])  # stable: ties keep batch/class/selection order
    idx = np.array([[b, c, i] for b, c, i, _ in picked], dtype=np.int64).reshape(-1, 3)
    sel = np.array([[b, c, s] for b, c, _, s in picked], dtype=np.float32).reshape(-1, 3)
    return idx, sel, np.array([len(picked)], dtype=np.int64)


# --- formal kernels: the definitions, element by element (the fast kernels above must agree) -------------


@ir_gather.formal
def _gather_def(x, i, axis=0, batch_dims=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    n = x.shape[axis]
    out = np.empty(_gather_shape(x.shape, i.shape, axis, batch_dims), dtype=x.dtype)
    for pos in np.ndindex(*out.shape):
        # out[b.., p.., j.., q..] = x[b.., p.., indices[b.., j..], q..]
        b = pos[:batch_dims]
        p = pos[batch_dims:axis]
        j = pos[axis:axis + i.ndim - batch_dims]
        q = pos[axis + i.ndim - batch_dims:]
        k = int(i[b + j])
        if not -n <= k < n:
            raise NNEFXError(f"gather: index {k} out of range for extent {n}")
        out[pos] = x[b + p + (k % n,) + q]
    return out


@ir_gather_elements.formal
def _gather_elements_def(x, i, axis=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    n = x.shape[axis]
    out = np.empty(i.shape, dtype=x.dtype)
    for pos in np.ndindex(*i.shape):
        k = int(i[pos])
        if not -n <= k < n:
            raise NNEFXError(f"ir_gather_elements: index {k} out of range for extent {n}")
        out[pos] = x[pos[:axis] + (k % n,) + pos[axis + 1:]]
    return out


@ir_top_k.formal
def _top_k_def(x, k=1, axis=0, mode="max", sort="value"):
    x = np.asarray(x)
    shape = list(x.shape)
    shape[axis] = k
    values = np.empty(shape, dtype=x.dtype)
    indices = np.empty(shape, dtype=np.int64)
    rest = [d for a, d in enumerate(x.shape) if a != axis]
    for pos in np.ndindex(*rest):
        line = [x[pos[:axis] + (j,) + pos[axis:]] for j in range(x.shape[axis])]
        order = sorted(range(len(line)), key=lambda j: (-line[j] if mode == "max" else line[j], j))[:k]
        if sort == "index":
            order.sort()
        for t, j in enumerate(order):
            values[pos[:axis] + (t,) + pos[axis:]] = line[j]
            indices[pos[:axis] + (t,) + pos[axis:]] = j
    return values, indices


@ir_cumsum.formal
def _cumsum_def(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    out = np.empty_like(x)
    n = x.shape[axis]
    for pos in np.ndindex(*x.shape):
        j = pos[axis]
        if reverse:
            span = range(j + 1 if exclusive else j, n)
        else:
            span = range(0, j if exclusive else j + 1)
        total = 0.0
        for t in span:
            total += float(x[pos[:axis] + (t,) + pos[axis + 1:]])
        out[pos] = total
    return out


@ir_reduce_prod.formal
def _prod_def(x, axes=()):
    x = np.asarray(x)
    out = np.ones(_prod_shape(x.shape, axes), dtype=np.float64)
    for pos in np.ndindex(*x.shape):
        target = tuple(0 if a in axes else d for a, d in enumerate(pos))
        out[target] *= float(x[pos])
    return out.astype(x.dtype)


@ir_round.formal
def _round_def(x, mode="half_to_even"):
    x = np.asarray(x)
    out = np.empty_like(x)
    for pos in np.ndindex(*x.shape):
        v = float(x[pos])
        if mode == "half_to_even":
            out[pos] = round(v)  # Python rounds halves to even
        else:
            out[pos] = math.copysign(math.floor(abs(v) + 0.5), v)
    return out


@ir_one_hot.formal
def _one_hot_def(i, on, off, depth=1, axis=-1, dtype=None):
    i = np.asarray(i).astype(np.int64)
    on_v, off_v = np.asarray(on).reshape(()), np.asarray(off).reshape(())
    shape = list(i.shape)
    shape.insert(axis, depth)
    out = np.empty(shape, dtype=np.result_type(on_v, off_v))
    for pos in np.ndindex(*shape):
        d = pos[axis]
        out[pos] = on_v if int(i[pos[:axis] + pos[axis + 1:]]) == d else off_v
    return out


@ir_interpolate.formal
def _interp_def(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    x = np.asarray(x)
    shape = list(x.shape)
    taps = {}
    for a, n, s in zip(axes, sizes, scales, strict=True):
        taps[a] = interpolation_taps(x.shape[a], n, s, mode, coordinate_transformation_mode, nearest_mode,
                                     cubic_coeff_a)
        shape[a] = n
    out = np.empty(shape, dtype=x.dtype)
    for pos in np.ndindex(*shape):
        # out[pos] = sum over tap combinations of prod(weights) * x[source indices]
        terms = [(1.0, ())]
        for a, p in enumerate(pos):
            if a in taps:
                idx, w = taps[a]
                terms = [(c * float(w[p, t]), src + (int(idx[p, t]),)) for c, src in terms for t in range(idx.shape[1])]
            else:
                terms = [(c, src + (p,)) for c, src in terms]
        out[pos] = sum(c * float(x[src]) for c, src in terms)
    return out


@ir_einsum.formal
def _einsum_def(xs, equation=""):
    eq = _einsum_check(equation, len(xs))
    ins, out_labels = eq.split("->")
    specs = ins.split(",")
    arrays = [np.asarray(x, dtype=np.float64) for x in xs]
    sizes: dict[str, int] = {}
    for spec, a in zip(specs, arrays, strict=True):
        for lab, d in zip(spec, a.shape, strict=True):
            sizes[lab] = max(sizes.get(lab, 1), d)
    labels = sorted(sizes)
    out = np.zeros(tuple(sizes[lab] for lab in out_labels))
    for values in np.ndindex(*[sizes[lab] for lab in labels]):
        v = dict(zip(labels, values, strict=True))
        term = 1.0
        for spec, a in zip(specs, arrays, strict=True):
            term *= a[tuple(v[lab] if a.shape[k] != 1 else 0 for k, lab in enumerate(spec))]
        out[tuple(v[lab] for lab in out_labels)] += term
    return out.astype(np.asarray(xs[0]).dtype)


# --- AdaptiveAvgPool / AdaptiveMaxPool -------------------------------------------------------------------

ir_adaptive_pool = define("ir_adaptive_pool", "ir_opset", """
fragment ir_adaptive_pool( input: tensor<scalar>, output_size: integer[], mode: string = 'avg' )
    -> ( output: tensor<scalar> );
""", domain="ir", doc="IR AdaptiveAvgPool/AdaptiveMaxPool (v8): bin i of an axis of extent X spans "
                      "[floor(i*X/n), ceil((i+1)*X/n)).")


@ir_adaptive_pool.shape
def _adaptive_shape(x, output_size=(), mode="avg"):
    if mode not in ("avg", "max") or len(output_size) != len(x) - 2 or any(n < 1 for n in output_size):
        raise NNEFXError(f"ir_adaptive_pool: bad output_size {list(output_size)} or mode '{mode}'")
    return tuple(x[:2]) + tuple(output_size)


def _bins(extent: int, n: int) -> list[tuple[int, int]]:
    return [((i * extent) // n, -((-(i + 1) * extent) // n)) for i in range(n)]


@ir_adaptive_pool.formal
def _adaptive_formal(x, output_size=(), mode="avg"):
    x = np.asarray(x)
    spatial = x.shape[2:]
    bins = [_bins(e, n) for e, n in zip(spatial, output_size, strict=True)]
    out = np.empty(x.shape[:2] + tuple(output_size), dtype=x.dtype)
    for pos in np.ndindex(*out.shape):
        window = x[pos[:2] + tuple(slice(*bins[k][p]) for k, p in enumerate(pos[2:]))]
        out[pos] = window.max() if mode == "max" else window.astype(np.float64).mean()
    return out
