"""tract's spectral operations: fft and stft (``nnef/src/ops/core/fft.rs``, ``core/src/ops/fft.rs``) and
the complex helpers (``complex.rs``).

tract carries a complex tensor as a float tensor whose last axis (extent 2) holds the real and
imaginary parts; ``tract_core_inner_dim_to_complex`` and ``tract_core_complex_to_inner_dim``
convert between that layout and a complex tensor (c64 / c128 here).  The transforms are not
normalised: forward X_k = sum_j x_j exp(-2 pi i jk/n), inverse with exp(+2 pi i jk/n) and no 1/n.
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define
from ._util import DOMAIN, check_axis, int_value

FAMILY = "tract_signal"


def _pairs(op: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise op_error(op, f"needs a float tensor (real and imaginary parts on the last axis), got {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != 2:
        raise op_error(op, f"needs a last axis of extent 2 (real, imaginary), got shape {list(x.shape)}")
    return x


def _check_pairs_shape(op: str, x) -> None:
    if len(x) < 2 or x[-1] not in (2, None):
        raise op_error(op, f"needs a last axis of extent 2 (real, imaginary), got shape {list(x)}")


def _dft(values: list, inverse: bool) -> list:
    n = len(values)
    sign = 1.0 if inverse else -1.0
    return [sum((values[j] * cmath.exp(complex(0.0, sign * 2.0 * math.pi * ((j * k) % n) / n)) for j in range(n)),
                0j) for k in range(n)]


def _lines(x: np.ndarray, a: int):
    """Each line of the complex tensor ``x`` (real, imaginary last) along axis ``a``: yields
    ``(at, values)`` where ``at(j)`` is the index of item j (without the last axis)."""
    rest = [k for k in range(x.ndim - 1) if k != a]
    for outer in np.ndindex(*[x.shape[k] for k in rest]):
        def at(j, outer=outer):
            pos = [0] * (x.ndim - 1)
            for k, v in zip(rest, outer, strict=True):
                pos[k] = v
            pos[a] = j
            return tuple(pos)
        yield at, [complex(float(x[at(j) + (0,)]), float(x[at(j) + (1,)])) for j in range(x.shape[a])]


def _fft_fast(z: np.ndarray, axis: int, inverse: bool) -> np.ndarray:
    return np.fft.ifft(z, axis=axis) * z.shape[axis] if inverse else np.fft.fft(z, axis=axis)


# --- fft ------------------------------------------------------------------------------------------------

fft = define("tract_core_fft", FAMILY, """
fragment tract_core_fft( input: tensor<scalar>, axis: integer, inverse: logical ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="The discrete Fourier transform along axis of a complex tensor stored with (real, "
                        "imaginary) on its last axis; inverse uses the conjugate kernel, neither is normalised "
                        "(ops::fft::Fft).")


@fft.shape
def _fft_shape(x, axis, inverse):
    _check_pairs_shape("tract_core_fft", x)
    check_axis("tract_core_fft", axis, len(x) - 1)
    return tuple(x)


@fft.formal
def _fft_formal(x, axis, inverse):
    x = _pairs("tract_core_fft", x)
    a = check_axis("tract_core_fft", axis, x.ndim - 1)
    out = np.empty(x.shape, x.dtype)
    for at, line in _lines(x, a):
        for k, v in enumerate(_dft(line, bool(inverse))):
            out[at(k) + (0,)], out[at(k) + (1,)] = v.real, v.imag
    return out


@fft.fast
def _fft_fast_kernel(x, axis, inverse):
    x = _pairs("tract_core_fft", x)
    a = check_axis("tract_core_fft", axis, x.ndim - 1)
    z = _fft_fast(x[..., 0].astype(np.float64) + 1j * x[..., 1], a, bool(inverse))
    return np.stack([z.real, z.imag], axis=-1).astype(x.dtype)


# --- stft -------------------------------------------------------------------------------------------------

stft = define("tract_core_stft", FAMILY, """
fragment tract_core_stft( input: tensor<scalar>, window: tensor<scalar> = 1.0, axis: integer, frame: integer,
                          stride: integer ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_core_stft( input: tensor<scalar>, axis: integer, frame: integer, "
                                 "stride: integer, window: tensor<scalar> = false ) -> ( output: tensor<scalar> );",
    doc="Short-time Fourier transform along axis of a (real, imaginary)-last tensor: frames of 'frame' "
        "samples every 'stride', each multiplied by the window (shorter windows are centred and padded with "
        "zeros) and transformed; the result replaces axis by (frames, frame) (ops::fft::Stft).  tract "
        "declares window after the attributes with default 'false' (no window); NNEF 1.0.5 wants tensor "
        "parameters first and a number for a tensor default, so here window comes second and a rank-0 window "
        "(the default 1.0) means none.  Files name every argument but the first, so they read the same.")


def _stft_frames(op: str, n, frame, stride):
    f, s = int_value(op, "frame", frame), int_value(op, "stride", stride)
    if f < 1:
        raise attr_error(op, "frame", frame, "must be positive")
    if s < 1:
        raise attr_error(op, "stride", stride, "must be positive")
    if n is not None and f > n:
        raise attr_error(op, "frame", frame, f"is longer than the signal ({n} samples)")
    return None if n is None else (n - f) // s + 1


@stft.shape
def _stft_shape(x, window=(), *, axis, frame, stride):
    op = "tract_core_stft"
    _check_pairs_shape(op, x)
    a = check_axis(op, axis, len(x) - 1)
    frames = _stft_frames(op, x[a], frame, stride)
    if len(window) > 1 or (len(window) == 1 and window[0] is not None and window[0] > int(frame)):
        raise op_error(op, f"window of shape {list(window)} must be 1-D and no longer than the frame ({frame})")
    return tuple(x[:a]) + (frames, int(frame)) + tuple(x[a + 1:])


def _window(op: str, window, frame: int, dtype) -> np.ndarray:
    """The window padded (centred) to the frame; all ones for the default (rank 0)."""
    w = np.asarray(window)
    if w.ndim == 0:
        return np.ones(frame, dtype)
    if w.ndim != 1 or w.shape[0] > frame:
        raise op_error(op, f"window of shape {list(w.shape)} must be 1-D and no longer than the frame ({frame})")
    full = np.zeros(frame, dtype)
    left = (frame - w.shape[0]) // 2
    full[left:left + w.shape[0]] = w
    return full


def _stft_args(x, window, axis, frame, stride):
    x = _pairs("tract_core_stft", x)
    shape = _stft_shape(x.shape, np.shape(window), axis=axis, frame=frame, stride=stride)
    return x, shape, int(axis), shape[int(axis)], _window("tract_core_stft", window, frame, np.float64)


@stft.formal
def _stft_formal(x, window=1.0, *, axis, frame, stride):
    x, shape, a, frames, w = _stft_args(x, window, axis, frame, stride)
    out = np.empty(shape, x.dtype)
    for src, signal in _lines(x, a):
        for f in range(frames):
            chunk = [signal[stride * f + t] * float(w[t]) for t in range(frame)]
            for k, v in enumerate(_dft(chunk, False)):
                pos = list(src(0))
                target = tuple(pos[:a]) + (f, k) + tuple(pos[a + 1:])
                out[target + (0,)], out[target + (1,)] = v.real, v.imag
    return out


@stft.fast
def _stft_fast(x, window=1.0, *, axis, frame, stride):
    x, shape, a, frames, w = _stft_args(x, window, axis, frame, stride)
    z = x[..., 0].astype(np.float64) + 1j * x[..., 1]
    starts = np.arange(frames) * stride
    idx = starts[:, None] + np.arange(frame)[None, :]           # (frames, frame)
    chunks = np.take(z, idx, axis=a)                            # axis a -> (frames, frame)
    spec = np.fft.fft(chunks * w.reshape((frame,) + (1,) * (z.ndim - a - 1)), axis=a + 1)
    return np.stack([spec.real, spec.imag], axis=-1).astype(x.dtype)


# --- complex helpers -------------------------------------------------------------------------------------

_COMPLEX_OF = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}

to_inner = define("tract_core_complex_to_inner_dim", FAMILY, """
fragment tract_core_complex_to_inner_dim( input: tensor<scalar> ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_core_complex_to_inner_dim( input: tensor<complex> ) -> "
                                 "( output: tensor<scalar> );",
    doc="A complex tensor as floats with a new last axis (real, imaginary).  tract types the input "
        "tensor<complex>, which NNEF 1.0.5 lacks: complex element types (c64, c128) are 'scalar' here.")
to_inner.shape(lambda x: tuple(x) + (2,))
to_inner.etypes(lambda x: {"c64": "f32", "c128": "f64"}.get(x, x))


def _complex(op: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind != "c":
        raise op_error(op, f"needs a complex tensor, got {x.dtype}")
    return x


@to_inner.formal
def _to_inner_formal(x):
    x = _complex("tract_core_complex_to_inner_dim", x)
    out = np.empty(x.shape + (2,), x.real.dtype)
    for pos in np.ndindex(*x.shape):
        out[pos + (0,)], out[pos + (1,)] = x[pos].real, x[pos].imag
    return out


@to_inner.fast
def _to_inner_fast(x):
    x = _complex("tract_core_complex_to_inner_dim", x)
    return np.stack([x.real, x.imag], axis=-1)


to_complex = define("tract_core_inner_dim_to_complex", FAMILY, """
fragment tract_core_inner_dim_to_complex( input: tensor<scalar> ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_core_inner_dim_to_complex( input: tensor<scalar> ) -> "
                                 "( output: tensor<complex> );",
    doc="A float tensor whose last axis holds (real, imaginary) as a complex tensor (c64 from f32, c128 from "
        "f64).  tract types the result tensor<complex>.")


@to_complex.shape
def _to_complex_shape(x):
    _check_pairs_shape("tract_core_inner_dim_to_complex", x)
    return tuple(x[:-1])


to_complex.etypes(lambda x: {"f32": "c64", "f64": "c128", "f16": "c64"}.get(x, x))


@to_complex.formal
def _to_complex_formal(x):
    x = _pairs("tract_core_inner_dim_to_complex", x)
    out = np.empty(x.shape[:-1], _COMPLEX_OF.get(x.dtype, np.complex64))
    for pos in np.ndindex(*out.shape):
        out[pos] = complex(float(x[pos + (0,)]), float(x[pos + (1,)]))
    return out


@to_complex.fast
def _to_complex_fast(x):
    x = _pairs("tract_core_inner_dim_to_complex", x)
    return (x[..., 0] + 1j * x[..., 1]).astype(_COMPLEX_OF.get(x.dtype, np.complex64))


guard_family(FAMILY)
