"""ONNX DFT (opsets 17-20) and STFT (opset 17) as single operations.

Complex values travel as ONNX stores them: a trailing axis of extent 2 (real, imaginary), or
extent 1 for a real signal.  ``axis``, ``dft_length`` and ``frame_step`` decide the result's
shape, so they are attributes here (``dft_length = 0``: ONNX's default; DFT-20's ``axis``
input and DFT-17's attribute both arrive as ``axis``).  Forward transforms use
``X[k] = sum_n x[n] exp(-2 pi i k n / N)``; inverse ones the ``+`` sign and ``1/N``.  With
``onesided``, a forward transform keeps the ``N/2 + 1`` non-redundant bins and an inverse one
reads a one-sided spectrum and returns the real signal (length ``dft_length``, by default
``2 (n - 1)``).  Formal kernels sum the definition directly in float64; fast kernels use
``numpy.fft`` in the input's width (complex64 for float32 signals).
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define
from ._common import norm_axis

FAMILY = "onnx_signal"

onnx_dft = define("onnx_dft", FAMILY, """
fragment onnx_dft(
    input: tensor<scalar>,
    axis: integer,
    dft_length: integer = 0,
    inverse: logical = false,
    onesided: logical = false )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX DFT along `axis` of a real ([..., 1]) or complex ([..., 2]) signal; inverse, "
                        "one-sided and zero-padded/truncated (dft_length) forms.")


def _dft_axes(x, axis, dft_length, inverse, onesided):
    name = "onnx_dft"
    if len(x) < 2 or x[-1] not in (1, 2, None):
        raise op_error(name, f"the input needs shape [..., 1] (real) or [..., 2] (complex), got {list(x)}")
    a = norm_axis(name, axis, len(x))
    if a == len(x) - 1:
        raise attr_error(name, "axis", axis, "must not be the last (real/imaginary) axis")
    if dft_length < 0:
        raise attr_error(name, "dft_length", dft_length, "must not be negative")
    n = dft_length
    if n == 0 and x[a] is not None:
        n = 2 * (x[a] - 1) if inverse and onesided else x[a]
    return a, n


@onnx_dft.shape
def _dft_shape(x, axis, dft_length=0, inverse=False, onesided=False):
    a, n = _dft_axes(x, axis, dft_length, inverse, onesided)
    out = list(x)
    if n == 0 and x[a] is None:
        out[a] = None
    elif inverse and onesided:
        out[a] = n
    else:
        out[a] = n // 2 + 1 if onesided else n
    out[-1] = 1 if inverse and onesided else 2
    return tuple(out)


def _complex(x: np.ndarray, formal: bool = True) -> np.ndarray:
    """The signal as complex numbers: complex128 for the formal kernels; for the fast ones in
    the input's own width (complex64 for float32 and narrower, as ONNX computes float32)."""
    x = x.astype(np.float64 if formal or x.dtype == np.float64 else np.float32)
    return x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]


def _fit(z: np.ndarray, a: int, n: int) -> np.ndarray:
    """``z`` truncated or zero-padded to ``n`` items along axis ``a``."""
    if z.shape[a] >= n:
        return np.take(z, range(n), axis=a)
    pad = [(0, 0)] * z.ndim
    pad[a] = (0, n - z.shape[a])
    return np.pad(z, pad)


def _interleave(z: np.ndarray, real_only: bool, dtype) -> np.ndarray:
    if real_only:
        return z.real[..., None].astype(dtype)
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


@onnx_dft.formal
def _dft_formal(x, axis, dft_length=0, inverse=False, onesided=False):
    x = np.asarray(x)
    a, n = _dft_axes(x.shape, axis, dft_length, inverse, onesided)
    z = _complex(x)
    if inverse and onesided:
        # Rebuild the full spectrum from its non-redundant half: X[n - k] = conj(X[k]).
        half = _fit(z, a, n // 2 + 1)
        rest = [np.conj(np.take(half, [n - k], axis=a)) for k in range(n // 2 + 1, n)]
        z = np.concatenate([half, *rest], axis=a) if rest else half
    else:
        z = _fit(z, a, n)
    sign = 1.0 if inverse else -1.0
    m = np.arange(n)
    lines = np.moveaxis(z, a, 0)
    out = np.empty(lines.shape, np.complex128)
    for k in range(n):  # X[k] = sum_m x[m] e^(-+2 pi i k m / N), one frequency at a time
        out[k] = np.tensordot(np.exp(sign * 2j * np.pi * k * m / n), lines, axes=(0, 0))
    out = np.moveaxis(out, 0, a)
    if inverse:
        out = out / n
    if onesided and not inverse:
        out = np.take(out, range(n // 2 + 1), axis=a)
    return _interleave(out, inverse and onesided, x.dtype)


@onnx_dft.fast
def _dft_fast(x, axis, dft_length=0, inverse=False, onesided=False):
    x = np.asarray(x)
    a, n = _dft_axes(x.shape, axis, dft_length, inverse, onesided)
    z = _complex(x, formal=False)
    if inverse and onesided:
        return np.fft.irfft(z, n=n, axis=a)[..., None].astype(x.dtype)
    out = np.fft.ifft(z, n=n, axis=a) if inverse else np.fft.fft(z, n=n, axis=a)
    if onesided:
        out = np.take(out, range(n // 2 + 1), axis=a)
    return _interleave(out, False, x.dtype)


onnx_stft = define("onnx_stft", FAMILY, """
fragment onnx_stft(
    signal: tensor<scalar>,
    window: tensor<scalar> = 1.0,
    frame_step: integer,
    frame_length: integer = 0,
    onesided: logical = true )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX STFT: the DFT of each windowed frame of a [batch, length, 1|2] signal, "
                        "[batch, frames, bins, 2].")


def _stft_dims(signal, window, frame_step, frame_length):
    name = "onnx_stft"
    if len(signal) != 3 or signal[2] not in (1, 2, None):
        raise op_error(name, f"the signal needs shape [batch, length, 1 or 2], got {list(signal)}")
    if frame_step <= 0:
        raise attr_error(name, "frame_step", frame_step, "must be positive")
    if len(window) > 1:
        raise op_error(name, f"the window must be 1-D, got shape {list(window)}")
    if frame_length < 0:
        raise attr_error(name, "frame_length", frame_length, "must not be negative")
    length = frame_length or (window[0] if window else 0)
    if not length:
        raise op_error(name, "neither a window nor frame_length gives the frame length")
    if window and window[0] is not None and window[0] != length:
        raise op_error(name, f"the window has {window[0]} items but frame_length is {frame_length}")
    if signal[1] is not None and signal[1] < length:
        raise op_error(name, f"the signal ({signal[1]} items) is shorter than one frame ({length})")
    frames = None if signal[1] is None else (signal[1] - length) // frame_step + 1
    return length, frames


@onnx_stft.shape
def _stft_shape(signal, window=(), frame_step=1, frame_length=0, onesided=True):
    length, frames = _stft_dims(signal, window, frame_step, frame_length)
    return (signal[0], frames, length // 2 + 1 if onesided else length, 2)


def _frames(signal: np.ndarray, window, frame_step: int, frame_length: int):
    length, frames = _stft_dims(signal.shape, np.shape(window), frame_step, frame_length)
    w = np.broadcast_to(np.asarray(window, np.float64), (length,))
    return length, frames, w


@onnx_stft.formal
def _stft_formal(signal, window=1.0, frame_step=1, frame_length=0, onesided=True):
    signal = np.asarray(signal)
    length, frames, w = _frames(signal, window, frame_step, frame_length)
    z = _complex(signal)
    bins = length // 2 + 1 if onesided else length
    out = np.zeros((signal.shape[0], frames, bins), np.complex128)
    for b in range(signal.shape[0]):
        for f in range(frames):
            for k in range(bins):
                for m in range(length):
                    out[b, f, k] += z[b, f * frame_step + m] * w[m] * np.exp(-2j * np.pi * k * m / length)
    return _interleave(out, False, signal.dtype)


@onnx_stft.fast
def _stft_fast(signal, window=1.0, frame_step=1, frame_length=0, onesided=True):
    signal = np.asarray(signal)
    length, frames, w = _frames(signal, window, frame_step, frame_length)
    z = _complex(signal, formal=False)
    w = w.astype(z.real.dtype)
    starts = np.arange(frames) * frame_step
    windows = z[:, starts[:, None] + np.arange(length)] * w
    out = np.fft.fft(windows, axis=-1)
    if onesided:
        out = out[..., : length // 2 + 1]
    return _interleave(out, False, signal.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
