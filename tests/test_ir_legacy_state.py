"""Legacy Memory pairs (state across runs -> NNEF variable + update) and TensorIterator
(body run step by step) end to end."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.runtime.session import Session
from test_ir_legacy import rand
from test_ir_legacy_util import LegacyNet


def memory_net(second_index: int = 1) -> LegacyNet:
    net = LegacyNet("mem")
    x = net.input("x", [1, 4])
    (m,) = net.add("Memory", [], [[1, 4]], {"id": "r_1-2", "index": str(second_index), "size": "2"}, name="mem_read")
    (s,) = net.add("Eltwise", [x, m], [[1, 4]], {"operation": "sum"}, name="acc")
    net.add("Memory", [s], [], {"id": "r_1-2", "index": "0", "size": "2"}, name="mem_write")
    net.add("Power", [s], [[1, 4]], {"scale": "1"}, name="out")     # the net's output
    return net


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_memory_pair_carries_state_across_runs(tmp_path, backend):
    model = nnefx.load(memory_net().save(tmp_path))
    ops = [op.op for op in model.graph.operations]
    assert ops.count("variable") == 1 and ops.count("update") == 1
    sess = Session(model, backend=backend)
    xs = [rand(1, 4) for _ in range(3)]
    total = np.zeros((1, 4), "f4")
    for x in xs:
        total = total + x
        out = sess.run({"x": x})
        np.testing.assert_allclose(out["out"], total, rtol=1e-6)
    sess.reset()
    np.testing.assert_allclose(sess.run({"x": xs[0]})["out"], xs[0], rtol=1e-6)


def test_memory_pair_errors(tmp_path):
    with pytest.raises(NNEFXError, match="uses index 0 for both"):
        nnefx.load(memory_net(second_index=0).save(tmp_path))
    net = LegacyNet("mem")
    x = net.input("x", [1, 4])
    net.add("Memory", [x], [], {"id": "a", "index": "0", "size": "3"}, name="m")
    with pytest.raises(NNEFXError, match=r"layer 1 'm' \(Memory\).*attribute 'size' = 3"):
        nnefx.load(net.save(tmp_path, "m2"))
    lone = LegacyNet("lone")
    x = lone.input("x", [1, 4])
    (m,) = lone.add("Memory", [], [[1, 4]], {"id": "solo", "index": "1", "size": "2"}, name="m")
    lone.add("Eltwise", [x, m], [[1, 4]], {"operation": "sum"}, name="out")
    with pytest.raises(NNEFXError, match="Memory 'solo' has no writing layer"):
        nnefx.load(lone.save(tmp_path, "m3"))


def rnn_ti(N, T, I, S, W, B, stride=1, out_axis=True) -> LegacyNet:
    """A TensorIterator running an RNNCell over axis 1 of X [N, T, I], state H [N, S]."""
    body = LegacyNet("body")
    (xr,) = body.add("Reshape", [None], [[N, I]], {"dim": f"{N},{I}"}, in_dims=[[N, 1, I]], name="xr")
    (h,) = body.add("RNNCell", [xr, None], [[N, S]], {"hidden_size": str(S)}, in_dims=[None, [N, S]],
                    blobs={"weights": W, "biases": B}, name="cell")
    (hr,) = body.add("Reshape", [h], [[N, 1, S]], {"dim": f"{N},1,{S}"}, name="hr")
    net = LegacyNet("ti")
    x = net.input("x", [N, T, I])
    h0 = net.input("h0", [N, S])
    if stride > 0:
        sl = 'axis="1" start="0" end="-1" stride="1" part_size="1"'
    else:
        sl = 'axis="1" start="-1" end="0" stride="-1" part_size="1"'
    outs = [[N, T, S], [N, S]] if out_axis else [[N, S]]

    def extra(parent, body=body, sl=sl):
        pm = ['<port_map>',
              f'<input external_port_id="0" internal_layer_id="0" internal_port_id="0" {sl}/>',
              '<input external_port_id="1" internal_layer_id="1" internal_port_id="1"/>']
        if out_axis:
            pm.append(f'<output external_port_id="2" internal_layer_id="2" internal_port_id="{body.port_id(hr)}" '
                      f'{sl}/>')
            pm.append(f'<output external_port_id="3" internal_layer_id="1" internal_port_id="{body.port_id(h)}"/>')
        else:
            pm.append(f'<output external_port_id="2" internal_layer_id="1" internal_port_id="{body.port_id(h)}"/>')
        pm.append('</port_map><back_edges>'
                  f'<edge from-layer="1" from-port="{body.port_id(h)}" to-layer="1" to-port="1"/></back_edges>')
        return "".join(pm) + body.body_xml(parent)

    net.add("TensorIterator", [x, h0], outs, name="ti", extra_xml=extra)
    return net


@pytest.mark.parametrize("stride", [1, -1])
def test_tensor_iterator_rnn(tmp_path, stride):
    N, T, I, S = 2, 5, 3, 4
    W, B = rand(S, I + S), rand(S)
    X, H0 = rand(N, T, I), rand(N, S)
    model = nnefx.load(rnn_ti(N, T, I, S, W, B, stride).save(tmp_path))
    # reference: step by step in numpy
    h = H0
    steps = {}
    order = range(T) if stride > 0 else range(T - 1, -1, -1)
    for tt in order:
        h = np.tanh(np.concatenate([X[:, tt], h], 1) @ W.T + B)
        steps[tt] = h
    seq = np.stack([steps[tt] for tt in range(T)], axis=1)
    for backend in ("fast", "formal"):
        out = Session(model, backend=backend).run({"x": X, "h0": H0})
        got = list(out.values())
        np.testing.assert_allclose(got[0], seq, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], h, rtol=1e-5, atol=1e-6)


def test_tensor_iterator_last_value_only(tmp_path):
    N, T, I, S = 1, 3, 2, 2
    W, B = rand(S, I + S), rand(S)
    X, H0 = rand(N, T, I), rand(N, S)
    model = nnefx.load(rnn_ti(N, T, I, S, W, B, out_axis=False).save(tmp_path))
    h = H0
    for tt in range(T):
        h = np.tanh(np.concatenate([X[:, tt], h], 1) @ W.T + B)
    (got,) = Session(model).run({"x": X, "h0": H0}).values()
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-6)


def test_tensor_iterator_missing_initial_value(tmp_path):
    N, T, I, S = 1, 2, 2, 2
    net = rnn_ti(N, T, I, S, rand(S, I + S), rand(S))
    path = net.save(tmp_path)
    text = open(path).read().replace('<input external_port_id="1" internal_layer_id="1" internal_port_id="1"/>', "")
    open(path, "w").write(text)
    with pytest.raises(NNEFXError, match=r"TensorIterator.*back edge into body port 1:1 has no initial value"):
        nnefx.load(path)


def test_tensor_iterator_unroll_limit(tmp_path):
    N, T, I, S = 1, 70_000, 1, 1
    net = rnn_ti(N, T, I, S, rand(S, I + S), rand(S))
    with pytest.raises(NNEFXError, match="exceeds the limit"):
        nnefx.load(net.save(tmp_path))


def test_catalog_ti_example_typed_power_is_a_tensor_iterator(tmp_path):
    N, T, I, S = 1, 3, 2, 2
    W, B = rand(S, I + S), rand(S)
    X, H0 = rand(N, T, I), rand(N, S)
    net = rnn_ti(N, T, I, S, W, B, out_axis=False)
    net.layers[-1].type = "Power"            # as the catalog's example writes it
    h = H0
    for tt in range(T):
        h = np.tanh(np.concatenate([X[:, tt], h], 1) @ W.T + B)
    (got,) = Session(nnefx.load(net.save(tmp_path))).run({"x": X, "h0": H0}).values()
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-6)


def test_tensor_iterator_lstm_two_back_edges_and_body_const(tmp_path):
    """The shape Model Optimizer gave LSTMs: TI over an LSTMCell, h and c fed back, a body Const."""
    N, T, I, S = 2, 4, 3, 2
    W, B = rand(4 * S, I + S), rand(4 * S)
    X, H0, C0 = rand(N, T, I), rand(N, S), rand(N, S)
    body = LegacyNet("body")
    shape = body.const("xshape", np.array([N, I], "f4"))
    (xr,) = body.add("Reshape", [None, shape], [[N, I]], in_dims=[[N, 1, I], None], name="xr")
    h, c = body.add("LSTMCell", [xr, None, None], [[N, S], [N, S]], {"hidden_size": str(S)},
                    in_dims=[None, [N, S], [N, S]], blobs={"weights": W, "biases": B}, name="cell")
    (hr,) = body.add("Reshape", [h], [[N, 1, S]], {"dim": f"{N},1,{S}"}, name="hr")
    net = LegacyNet("ti_lstm")
    x, h0, c0 = net.input("x", [N, T, I]), net.input("h0", [N, S]), net.input("c0", [N, S])

    def extra(parent):
        return ('<port_map>'
                '<input external_port_id="0" internal_layer_id="1" internal_port_id="0" axis="1"/>'
                '<input external_port_id="1" internal_layer_id="2" internal_port_id="1"/>'
                '<input external_port_id="2" internal_layer_id="2" internal_port_id="2"/>'
                f'<output external_port_id="3" internal_layer_id="3" internal_port_id="{body.port_id(hr)}" axis="1"/>'
                f'<output external_port_id="4" internal_layer_id="2" internal_port_id="{body.port_id(c)}"/>'
                '</port_map><back_edges>'
                f'<edge from-layer="2" from-port="{body.port_id(h)}" to-layer="2" to-port="1"/>'
                f'<edge from-layer="2" from-port="{body.port_id(c)}" to-layer="2" to-port="2"/>'
                '</back_edges>' + body.body_xml(parent))

    net.add("TensorIterator", [x, h0, c0], [[N, T, S], [N, S]], name="ti", extra_xml=extra)
    hh, cc, seq = H0, C0, []
    for tt in range(T):
        g = np.concatenate([X[:, tt], hh], 1) @ W.T + B
        f, i, gg, o = (g[:, k * S:(k + 1) * S] for k in range(4))
        cc = 1 / (1 + np.exp(-f)) * cc + 1 / (1 + np.exp(-i)) * np.tanh(gg)
        hh = 1 / (1 + np.exp(-o)) * np.tanh(cc)
        seq.append(hh)
    model = nnefx.load(net.save(tmp_path))
    for backend in ("fast", "formal"):
        got = list(Session(model, backend=backend).run({"x": X, "h0": H0, "c0": C0}).values())
        np.testing.assert_allclose(got[0], np.stack(seq, 1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], cc, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("old,new,message", [
    ('axis="1" start="0" end="-1" stride="1" part_size="1"', 'axis="1" start="0" end="-1" stride="0" part_size="1"',
     "stride must not be 0"),
    ('axis="1" start="0" end="-1" stride="1" part_size="1"', 'axis="7" start="0" end="-1" stride="1" part_size="1"',
     "port map axis of port 0 = 7"),
    ('axis="1" start="0" end="-1" stride="1" part_size="1"', 'axis="1" start="9" end="-1" stride="1" part_size="1"',
     "fall outside the axis extent"),
    ('<input external_port_id="1" internal_layer_id="1" internal_port_id="1"/>',
     '<input external_port_id="5" internal_layer_id="1" internal_port_id="1"/>', "external port 5"),
    ('internal_port_id="1"/>', 'internal_port_id="x"/>', "is not an integer"),
])
def test_tensor_iterator_bad_port_maps(tmp_path, old, new, message):
    net = rnn_ti(1, 3, 2, 2, rand(2, 4), rand(2))
    path = net.save(tmp_path)
    text = open(path).read()
    assert old in text
    open(path, "w").write(text.replace(old, new, 1))
    with pytest.raises(NNEFXError, match=message):
        nnefx.load(path)
