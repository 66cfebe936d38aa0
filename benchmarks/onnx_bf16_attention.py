"""Where nnefx and the node suite's expectations differ on bfloat16 Attention, and why.

    python benchmarks/onnx_bf16_attention.py [--only SUBSTRING]

For every bfloat16 ``Attention`` case of the installed onnx package's node suite (the direct
node and its ``_expanded`` function body), on both nnefx backends:

* **vs expected**: items of ``Y`` that differ from the case's expected output, and the largest
  difference in bfloat16 steps (ulps of the expected value);
* **first node**: the expanded model run node by node by ``onnx.reference`` and by nnefx (every
  intermediate made a graph output): the first node whose result differs, and how many items;
* **sums**: rows of that ``Softmax`` whose ``ReduceSum`` differs between numpy's reduction of
  the bfloat16 array (what ``onnx.reference`` computes: one addition at a time, each rounded to
  bfloat16) and the float32 sum rounded once (nnefx's element-type contract), and which of the
  two is the correctly rounded exact sum;
* **float32 sums**: the expected output recomputed by ``onnx.reference`` with only its
  ``Softmax`` changed to sum in float32 and round once; ``=nnefx`` when it equals nnefx's output
  bit for bit (direct node and expansion alike).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np


def _steps(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference in bfloat16 steps of the expected value (2^-7 relative)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    both = np.isfinite(g) & np.isfinite(w) & (w != 0)
    if not both.any():
        return 0.0
    step = 2.0 ** (np.floor(np.log2(np.abs(w[both]))) - 7)
    return float((np.abs(g[both] - w[both]) / step).max())


def _differ(a: np.ndarray, b: np.ndarray) -> int:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return int((a != b).sum())
    af, bf = a.astype(np.float64), b.astype(np.float64)
    return int((~((af == bf) | (np.isnan(af) & np.isnan(bf)))).sum())


def _every_value(model):
    """The model with every node result that shape inference types made a graph output."""
    import onnx
    from onnx import shape_inference

    model = shape_inference.infer_shapes(model)
    known = {v.name: v for v in model.graph.value_info}
    names = [o.name for o in model.graph.output]
    for node in model.graph.node:
        for out in node.output:
            if out in known and out not in names:
                model.graph.output.append(known[out])
                names.append(out)
    return model, names, onnx


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="bf16", help="cases whose name contains this (default bf16)")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    import ml_dtypes
    import onnx
    from onnx.backend.test.case.node import collect_testcases
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.ops import op_softmax

    import nnefx

    class Softmax(op_softmax.Softmax):  # the name onnx.reference replaces its own Softmax by
        """onnx.reference's Softmax with its ReduceSum accumulated in float32, rounded once."""

        op_domain = ""

        def _run(self, X, axis=None):  # noqa: N803 - onnx.reference's signature
            axis = axis or self.axis
            e = np.exp(X - X.max(axis=axis, keepdims=True))
            total = e.astype(np.float32).sum(axis=axis, keepdims=True).astype(X.dtype)
            return ((e / total).astype(X.dtype),)

    bf16 = np.dtype(ml_dtypes.bfloat16)
    cases = {c.name: c for c in collect_testcases(None)
             if c.name.startswith("test_attention") and args.only in c.name}
    print("| case | backend | Y items off expected (max bf16 steps) | first node differing | "
          "softmax rows: bf16-step sum vs float32 sum (correctly rounded: nnefx) | float32 sums |")
    print("|---|---|---:|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(cases):
            case = cases[name]
            if np.dtype(np.asarray(case.data_sets[0][1][0]).dtype) != bf16:
                continue
            expanded = cases.get(name if name.endswith("_expanded") else name + "_expanded")
            inputs, outputs = case.data_sets[0]
            feeds = dict(zip([i.name for i in case.model.graph.input], [np.asarray(x) for x in inputs], strict=True))
            path = os.path.join(tmp, "m.onnx")
            onnx.save(case.model, path)
            summed = None
            if expanded is not None:
                summed = ReferenceEvaluator(expanded.model, new_ops=[Softmax]).run(None, feeds)[0]
            for backend in ("fast", "formal"):
                got = list(nnefx.Session(nnefx.load(path), backend).run(feeds).values())[0]
                want = np.asarray(outputs[0])
                first, rows = "-", "-"
                if expanded is not None:
                    model, names, _ = _every_value(expanded.model)
                    full = os.path.join(tmp, "all.onnx")
                    onnx.save(model, full)
                    ref = dict(zip(names, ReferenceEvaluator(model).run(None, feeds), strict=True))
                    ours = dict(zip(names, nnefx.Session(nnefx.load(full), backend).run(feeds).values(), strict=True))
                    for node in model.graph.node:
                        bad = [(o, _differ(ours[o], ref[o])) for o in node.output if o in ref]
                        bad = [(o, n) for o, n in bad if n]
                        if bad:
                            first = f"{node.op_type} {bad[0][1]}/{np.asarray(ref[bad[0][0]]).size}"
                            if node.op_type == "Softmax":
                                x = ref[node.input[0]]
                                e = np.exp(x - x.max(axis=-1, keepdims=True))
                                stepwise = e.sum(axis=-1, keepdims=True)
                                once = e.astype(np.float32).sum(axis=-1, keepdims=True).astype(bf16)
                                exact = e.astype(np.float64).sum(axis=-1, keepdims=True).astype(bf16)
                                finite = np.isfinite(exact.astype(np.float64))
                                rows = (f"{_differ(stepwise[finite], once[finite])}/{int(finite.sum())} differ; "
                                        f"exact = float32 sum on {_differ(once[finite], exact[finite]) == 0}, "
                                        f"= bf16-step sum on {_differ(stepwise[finite], exact[finite]) == 0}")
                            break
                    else:
                        first = "none"
                verdict = "-" if summed is None else ("=nnefx" if _differ(got, summed) == 0 else
                                                      f"{_differ(got, summed)} items off")
                print(f"| {name} | {backend} | {_differ(got, want)}/{want.size} ({_steps(got, want):.1f}) | {first} | "
                      f"{rows} | {verdict} |")


if __name__ == "__main__":
    main()
