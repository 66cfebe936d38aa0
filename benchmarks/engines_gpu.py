"""The torch backend on a CUDA GPU: nnefx against torch eager on the same card.

    python benchmarks/engines_gpu.py [--nets r18b1,r50b8,enc] [--runs 50] [--json OUT.json]

Networks as in ``benchmarks/engines.py`` (random weights, fixed seeds): ResNet-18 at batch 1,
ResNet-50 at batch 8 (224 x 224) and a 4-layer transformer encoder (width 256, 128 tokens).
Each is exported by torch to ONNX (opset 13, TorchScript exporter) and read by nnefx from
that file (a GPU machine need not have nnef-tools).

Rows per network, each the median latency of ``--runs`` timed runs after five warm-ups,
every run from a host array to a host array (``Session.run`` takes and returns numpy):

* ``nnefx torch cuda f32`` / ``f16`` / ``bf16``: ``Session(model, "torch", device="cuda",
  precision=...)``; f32 means float32 products (TensorFloat-32 off while the model runs); the
  network is replayed as one captured CUDA graph;
* ``nnefx torch cuda f32, eager``: the same steps launched one by one (CUDA graph off);
* ``torch eager cuda f32``: the torch module itself on the card, input copied in and the
  result copied out as in the nnefx rows (TF32 off too);
* ``torch eager cuda f32, on device``: the same without the two copies (the card's own time).

The error of each nnefx row against nnefx's fast numpy backend (f32 on the CPU) is reported as
``max |diff| / max |ref|``; the GPU tests (``tests/test_engine_torch_cuda.py``) check the
operations against the formal backend.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _median_ms(run, x, runs: int) -> float:
    from engines import median_ms

    return median_ms(run, x, runs, warmups=5)


def _error(got, ref) -> float:
    import numpy as np

    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def bench(net: str, work: Path, runs: int) -> list[dict]:
    import numpy as np
    import torch
    from engines import prepare_module

    import nnefx

    module = prepare_module(net)
    shape = {"r18b1": (1, 3, 224, 224), "r50b8": (8, 3, 224, 224), "enc": (1, 128, 256)}[net]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    onnx_path = work / f"{net}.onnx"
    torch.onnx.export(module, torch.from_numpy(x), str(onnx_path), opset_version=13, dynamo=False,
                      input_names=["input"], output_names=["output"])
    model = nnefx.load(str(onnx_path))
    reference = nnefx.Session(model, "fast").run({"input": x})["output"]
    rows, sessions = [], []
    for precision in ("f32", "f16", "bf16"):
        session = nnefx.Session(model, "torch", device="cuda", precision=precision)
        sessions.append(session)
        out = session.run({"input": x})["output"]
        rows.append({"net": net, "row": f"nnefx torch cuda {precision}", "error_vs_fast": _error(out, reference),
                     "median_ms": _median_ms(lambda a, s=session: s.run({"input": a}), x, runs)})
    eager_session = nnefx.Session(model, "torch", device="cuda")
    for variant in eager_session._engine._variants.values():
        variant.replay = False  # the same steps launched one by one (no CUDA graph)
    rows.append({"net": net, "row": "nnefx torch cuda f32, eager (no CUDA graph)",
                 "median_ms": _median_ms(lambda a: eager_session.run({"input": a}), x, runs)})
    refused = [v.replay_refused for s in sessions for v in s._engine._variants.values() if v.replay_refused]
    if refused:
        rows[-1]["note"] = "CUDA graph refused: " + refused[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = module.to("cuda")

    def eager(a):
        with torch.inference_mode():
            return gpu(torch.from_numpy(a).to("cuda")).cpu().numpy()

    rows.append({"net": net, "row": "torch eager cuda f32", "error_vs_fast": _error(eager(x), reference),
                 "median_ms": _median_ms(eager, x, runs)})
    on_device = torch.from_numpy(x).to("cuda")

    def resident(_):
        with torch.inference_mode():
            gpu(on_device)
        torch.cuda.synchronize()

    rows.append({"net": net, "row": "torch eager cuda f32, on device", "median_ms": _median_ms(resident, x, runs)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="r18b1,r50b8,enc")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--json")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("torch sees no CUDA device")
    card = torch.cuda.get_device_name(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for net in args.nets.split(","):
            rows += bench(net, Path(tmp), args.runs)
    print(f"card: {card}; torch {torch.__version__}")
    print("| network | row | median ms | error vs fast (f32, CPU) |")
    print("|---|---|---:|---:|")
    for r in rows:
        err = f"{r['error_vs_fast']:.2g}" if "error_vs_fast" in r else ""
        print(f"| {r['net']} | {r['row']} | {r['median_ms']:.2f} | {err} |" + (f" {r['note']}" if "note" in r else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"card": card, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
