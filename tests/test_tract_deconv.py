"""``deconv``'s filter layout in tract's dialect.

NNEF 1.0.5 §4.3 reads a ``deconv`` filter as ``[C_in, C_out / groups, ...]`` (torch's
ConvTranspose weight); tract reads it as ``[C_out, C_in / groups, ...]``, the matching conv's
layout, and ``groups = 0`` as the filter's first extent (tract ``nnef/src/ops/nnef/deser.rs``
``read_conv_parameters`` / ``conv_like``: ``Deconv`` with ``KernelFormat::OIHW``).  torch-to-nnef
writes tract's layout for its tract target and NNEF's for its Khronos target; each must read back
with torch's results, tract's own run agreeing, and nnefx's tract writer must write what tract reads.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.io.binary import write_tensor

torch = pytest.importorskip("torch")
pytest.importorskip("torch_to_nnef")

from _t2n import export, rel_err  # noqa: E402

TOL = 1e-5

#: ConvTranspose layers with C_in != C_out, groups 1 and 2, stride, padding and output_padding
LAYERS = {
    "2d_g1": (lambda: torch.nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1), (1, 3, 4, 5)),
    "2d_g2": (lambda: torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 2), output_padding=(1, 2),
                                               groups=2), (2, 4, 3, 4)),
    "1d_g2": (lambda: torch.nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, groups=2), (1, 4, 7)),
}


def _run(model: nnefx.Model, x: np.ndarray, backend: str) -> np.ndarray:
    out = nnefx.Session(model, backend=backend).run({model.graph.inputs[0]: x})
    return np.asarray(next(iter(out.values())))


@pytest.mark.parametrize("mode", ["tract", "khronos"])
@pytest.mark.parametrize("case", sorted(LAYERS))
def test_torch_to_nnef_conv_transpose_runs_like_torch(tmp_path, mode, case):
    make, shape = LAYERS[case]
    torch.manual_seed(1)
    layer = make().eval()
    x = torch.randn(*shape)
    ref = layer(x).detach().numpy()
    folder = export(layer, (x,), tmp_path, case, mode=mode)
    model = nnefx.load(folder)
    for backend in ("formal", "fast"):
        assert rel_err(_run(model, x.numpy(), backend), ref) <= TOL, backend
    if mode == "tract":
        tract = pytest.importorskip("tract")
        got = tract.nnef().load(str(folder)).into_runnable().run([x.numpy()])[0].to_numpy()
        assert rel_err(got, ref) <= TOL   # the layout nnefx reads is the one tract runs


_DOC = """version 1.0;

graph g( x ) -> ( y )
{{
    x = external<scalar>(shape = {xs});
    w = variable<scalar>(shape = {ws}, label = 'w');
    b = variable<scalar>(shape = [1, {c}], label = 'b');
    y = deconv(x, w, b, padding = {pad}, stride = {stride}{extra});
}}
"""

#: NNEF-layout deconvs: (input shape, filter shape, output channels, padding, stride, extra)
WRITER_CASES = {
    "g1": ([1, 3, 4, 5], [3, 5, 3, 3], 5, "[(1, 0), (1, 0)]", "[2, 2]", ""),
    "g2": ([2, 4, 3, 4], [4, 3, 3, 2], 6, "[(1, 0), (2, 0)]", "[2, 3]", ", groups = 2"),
    "g0_multiplier": ([1, 3, 5], [3, 2, 3], 6, "[(1, 1)]", "[2]", ", groups = 0"),
    "output_shape": ([1, 2, 4, 4], [2, 3, 3, 3], 3, "[(1, 1), (1, 1)]", "[2, 2]", ", output_shape = [1, 3, 8, 8]"),
    # tract's separable_deconv (its stdlib fragment of two deconvs) reads both filters in its layout
    "separable": ([1, 4, 5, 5], [2, 1, 3, 3], 2, "[(1, 0), (0, 1)]", "[2, 1]", "SEPARABLE"),
}


def test_tract_writer_round_trip_matches_tract(tmp_path):
    """nnefx's tract writer: tract runs each folder like nnefx (formal) runs the source, and
    nnefx reads the folder back with the same results (both backends)."""
    pytest.importorskip("tract")
    from test_tract_writer import _check

    rng = np.random.default_rng(3)
    models, feeds, written = {}, {}, {}
    for key, (xs, ws, c, pad, stride, extra) in WRITER_CASES.items():
        src = tmp_path / f"{key}_src"
        src.mkdir()
        text = _DOC.format(xs=xs, ws=ws, c=c, pad=pad, stride=stride, extra="" if extra == "SEPARABLE" else extra)
        if extra == "SEPARABLE":
            text = text.replace("y = deconv(x, w, b,", "q = variable<scalar>(shape = [4, 2, 1, 1], label = 'q');\n"
                                "    y = separable_deconv(x, w, q, b,")
        (src / "graph.nnef").write_text(text)
        write_tensor(src / "w.dat", rng.standard_normal(ws).astype(np.float32))
        if key == "separable":
            write_tensor(src / "q.dat", rng.standard_normal((4, 2, 1, 1)).astype(np.float32))
        write_tensor(src / "b.dat", rng.standard_normal((1, c)).astype(np.float32))
        models[key] = nnefx.load(src)
        feeds[key] = [rng.standard_normal(xs).astype(np.float32)]
        written[key] = tmp_path / f"{key}_tract"
        nnefx.save(models[key], written[key], dialect="tract")
    _check(models, tmp_path, feeds, written)   # tract vs nnefx on the source
    for key, model in models.items():
        if key == "output_shape":   # tract's spatial output_shape: refused on reading (below)
            continue
        back = nnefx.load(written[key])
        for backend in ("formal", "fast"):
            np.testing.assert_allclose(_run(back, feeds[key][0], backend), _run(model, feeds[key][0], "formal"),
                                       rtol=1e-5, atol=1e-5, err_msg=f"{key} {backend}")


def test_tract_output_shape_refused_located(tmp_path):
    doc = _DOC.format(xs=[1, 2, 4, 4], ws=[3, 2, 3, 3], c=3, pad="[(1, 1), (1, 1)]", stride="[2, 2]",
                      extra=", output_shape = [8, 8]")
    doc = doc.replace("version 1.0;\n", "version 1.0;\nextension tract_registry tract_core;\n")
    path = tmp_path / "g.nnef"
    path.write_text(doc)
    with pytest.raises(NNEFXError, match="output_shape") as err:
        nnefx.load(path)
    assert "g.nnef:" in str(err.value)
