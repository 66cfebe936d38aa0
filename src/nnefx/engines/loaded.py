"""An engine's own compiled model, loaded and run: what ``nnefx.load(OUT)`` of a compiled folder needs.

Nothing here imports nnefx's graph, exporters or engine classes (``base``, ``openvino``,
``onnxruntime``, ``torch``): a compiled model is the engine's file, read by the engine, so
its load pays only the engine's import (measured: the engine classes and the graph model
they bring cost about 8 ms of a load that takes 60-90 ms).  The engine classes use the same
helpers (:func:`import_package`, :func:`engine_version`), so the message for a missing
engine and the version a manifest records are written once.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError

#: The most threads an engine is asked for (each allocates per-thread state up front; a
#: compiled model's manifest is held to the same bound).
MAX_THREADS = 4096


def contiguous(array: np.ndarray) -> np.ndarray:
    """A C-contiguous array of the same shape: ``np.ascontiguousarray`` alone turns a rank-0
    array into shape [1], which OpenVINO refuses for a scalar input and torch broadcasts to a
    result of another rank."""
    return np.ascontiguousarray(array).reshape(np.shape(array))


#: nnefx precision names -> OpenVINO's CPU plugin INFERENCE_PRECISION_HINT.
OV_PRECISIONS = {"f32": "f32", "bf16": "bf16", "f16": "f16"}
#: Engine name -> the package it is and the extra that brings it.
PACKAGES = {"onnxruntime": ("onnxruntime", "onnxruntime"), "openvino": ("openvino", "openvino"),
            "torch": ("torch", "torch")}


def import_package(engine: str, package: str, extra: str) -> Any:
    """``package`` imported for ``engine``, or the error naming the extra to install."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise NNEFXError(f"backend '{engine}' needs {package}: pip install 'nnefx[{extra}]'") from None


def engine_module(engine: str) -> Any:
    package, extra = PACKAGES[engine]
    return import_package(engine, package, extra)


def engine_version(engine: str, module: Any) -> str:
    """The version a manifest records and a load compares: OpenVINO's build string, else ``__version__``."""
    if engine == "openvino" and hasattr(module, "get_version"):
        return str(module.get_version())
    return str(getattr(module, "__version__", "?"))


def ov_core(ov: Any) -> Any:
    """An OpenVINO ``Core`` with its CPU plugin loaded (the plugin's library, its thread pool
    and the machine's topology: a few milliseconds, done while the artifact is checked)."""
    try:
        core = ov.Core()
        core.get_property("CPU", "FULL_DEVICE_NAME")
    except RuntimeError as exc:
        raise NNEFXError(f"OpenVINO's CPU plugin cannot be loaded ({str(exc).splitlines()[0]})") from None
    return core


def port_name(port: Any, names: list[str], k: int) -> str:
    """The graph tensor a port stands for: by its tensor names, else by position."""
    found = [n for n in port.get_names() if n in names]
    return found[0] if found else names[k]


class OvRequest:
    """Inputs fed by position to an OpenVINO compiled model's request, outputs copied out by name."""

    compiled: Any
    request: Any
    inputs: list[str]
    outputs: list[str]

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.request.infer([contiguous(feeds[n]) for n in self.inputs])
        # copied: the next run overwrites the request's buffers
        return {n: np.array(results[port]) for n, port in zip(self.outputs, self.compiled.outputs, strict=True)}


class OvImported(OvRequest):
    """A compiled model OpenVINO exported earlier (``nnefx compile``), imported for the CPU plugin."""

    def __init__(self, core: Any, ov: Any, data: Any, inputs: list[str], outputs: list[str], threads: int,
                 precision: str = "f32"):
        # The precision hint again: on CPUs with bf16 units the plugin's default is bf16.
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": OV_PRECISIONS.get(precision, "f32")}
        # A tensor over the caller's memory (a mapped file): OpenVINO imports from it without
        # copying the blob into a stream first (measured: about 40 % less CPU time for
        # ResNet-18's 47 MB than from io.BytesIO).  It may keep pointing into that memory, so
        # the memory is held (assigned last: released after the compiled model and request).
        blob = ov.Tensor(np.frombuffer(data, np.uint8), shared_memory=True)
        try:
            self.compiled = core.import_model(blob, "CPU", config)
        except RuntimeError as exc:
            raise NNEFXError(f"OpenVINO cannot import the compiled model ({str(exc).splitlines()[0]})") from None
        self.request = self.compiled.create_infer_request()
        self.inputs = [port_name(p, inputs, k) for k, p in enumerate(self.compiled.inputs)]
        self.outputs = [port_name(p, outputs, k) for k, p in enumerate(self.compiled.outputs)]
        self.memory = (blob, data)


def ort_session_options(ort: Any, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # fatal only: ORT logs a failed run on stderr besides raising it, and nnefx reports the
    # exception (one located line); its warnings are not the user's business either
    options.log_severity_level = 4
    return options


class OrtLoaded:
    """A model onnxruntime optimised earlier (``nnefx compile``): loaded without optimising again."""

    def __init__(self, ort: Any, data: bytes | str, outputs: list[str], threads: int):
        options = ort_session_options(ort, threads)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types
            raise NNEFXError(f"onnxruntime cannot load the compiled model ({str(exc).splitlines()[0]})") from None
        self.names = [o.name for o in self.session.get_outputs()]
        self.wanted = outputs

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = dict(zip(self.names, self.session.run(None, feeds), strict=True))
        return {n: values[n] for n in self.wanted}
