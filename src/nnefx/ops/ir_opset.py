"""IR extension operations for opset (v10/11) layers with no exact NNEF counterpart.

Domain ``ir``, names ``ir_<snake_case>``.  Each one exists because the NNEF standard set
cannot say the same thing *exactly*:

* ``ir_erf`` — NNEF has no error function (and its ``gelu`` is the sigmoid approximation,
  while OpenVINO's Gelu is the exact erf form), so Gelu/Erf layers need it.
* ``ir_shape_of``, ``ir_reshape``, ``ir_broadcast`` — shapes computed *at run time* (dynamic
  batch): NNEF's reshape/tile take their target as attributes.  Used only when the shape
  cannot be folded while loading.
* ``ir_arith``, ``ir_compare`` — numpy-semantics arithmetic on *integer* tensors (NNEF
  arithmetic is ``scalar`` only), e.g. run-time shape arithmetic.
* ``ir_convert`` — OpenVINO Convert to a given element type (f16 rounding, float→int
  truncation, wrap-around), which NNEF ``cast`` does not model.
* ``ir_gather`` — Gather with run-time indices: negative indices count from the end and
  ``batch_dims`` > 0, neither of which NNEF ``gather`` allows.
* ``ir_lstm_sequence`` — LSTMSequence with per-batch sequence lengths (steps past a
  sequence's length output zeros and leave the state alone).
"""

from __future__ import annotations

import math

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
    """OpenVINO Convert: float→int rounds toward zero... (checked against OpenVINO: it
    truncates, wraps out-of-range integers), anything→boolean is ``!= 0``."""
    x = np.asarray(x)
    if destination not in _NUMPY_OF:
        raise NNEFXError(f"Convert to '{destination}' is not supported")
    dt = np.dtype(_NUMPY_OF[destination])
    if dt == np.bool_:
        return x != 0
    if dt.kind in "iu" and x.dtype.kind == "f":
        t = np.trunc(x)
        info = np.iinfo(dt)
        return np.clip(t, info.min, info.max).astype(dt)
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


@ir_gather.formal
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
