"""Run one tract-domain operation through tract itself (its Python bindings, a test-only peer).

:func:`tract_run` writes a one-operation NNEF document (``extension tract_registry ...`` header,
each tensor argument a ``tract_core_external`` input of its datum type, attributes as literals),
loads it with tract, runs it on the arguments and returns tract's results as numpy arrays.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from nnefx.ops import registry

_DATUM = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
          "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool"}


def literal(v) -> str:
    """An NNEF literal for an attribute value."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if np.isfinite(v) else ("inf" if v > 0 else "-inf")
    return str(int(v))


def tensor_params(name: str) -> list[str]:
    """The names of the tensor parameters of ``name``'s declaration, in order."""
    decl = registry.get(name).declaration
    params = decl[decl.index("(") + 1:decl.index("->")]
    params = params[:params.rindex(")")]
    return [m.group(1) for m in re.finditer(r"(\w+)\s*:\s*tensor<", params)]


def tract_run(name: str, args: list, kwargs: dict, registries=("tract_core",), n_results: int = 1):
    import tract

    lines, inputs, feed = [], [], []
    tparams = tensor_params(name)

    def external(a):
        a = np.asarray(a)
        ident = f"i{len(inputs)}"
        inputs.append(ident)
        feed.append(np.ascontiguousarray(a))
        lines.append(f"    {ident} = tract_core_external(shape = {literal(list(a.shape))}, "
                     f"datum_type = '{_DATUM[a.dtype.name]}');")
        return ident

    call = []
    for pname, a in zip(tparams, args, strict=False):
        if isinstance(a, list):
            ref = "[" + ", ".join(external(x) for x in a) + "]"
        elif isinstance(a, np.ndarray):
            ref = external(a)
        else:
            ref = literal(a)
        call.append(ref if not call or "=" not in call[-1] else f"{pname} = {ref}")
    call += [f"{k} = {literal(v)}" for k, v in kwargs.items()]
    outs = [f"o{k}" for k in range(n_results)]
    lhs = outs[0] if n_results == 1 else "(" + ", ".join(outs) + ")"
    lines.append(f"    {lhs} = {name}({', '.join(call)});")
    header = "\n".join(f"extension tract_registry {r};" for r in registries)
    text = (f"version 1.0;\n{header}\n\ngraph g( {', '.join(inputs)} ) -> ( {', '.join(outs)} )\n{{\n"
            + "\n".join(lines) + "\n}\n")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "graph.nnef").write_text(text)
        nnef = tract.nnef()
        if "tract_transformers" in registries:
            nnef = nnef.with_tract_transformers()
        model = nnef.load(tmp).into_runnable()
        return [r.to_numpy() for r in model.run(feed)]
