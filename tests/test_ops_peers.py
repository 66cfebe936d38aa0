"""Peer checks against PyTorch's functional operators where the definitions coincide.

Differences between the definitions are handled explicitly (noted per test): NNEF pads
explicitly per side and may pad asymmetrically (torch pads symmetrically, so we pad with
``F.pad`` first), NNEF bias is ``[1, C]``, NNEF ``gelu`` is the sigmoid approximation
(torch's default is exact erf, so it is not compared), and NNEF LRN's ``alpha`` is
divided by the window volume (torch divides by ``size`` too, and pads ``size // 2`` before,
which equals NNEF's automatic padding for odd sizes).  Both backends are checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.ops import registry

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.peer
BACKENDS = ["formal", "fast"]
rng = np.random.default_rng(7)


def run(name, backend, *args, **attrs):
    return registry.get(name).kernel(backend)(*args, **attrs)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def close(ours, theirs, atol=2e-5):
    np.testing.assert_allclose(ours, theirs.detach().numpy() if hasattr(theirs, "detach") else theirs,
                               rtol=1e-5, atol=atol)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["constant", "replicate", "reflect"])
def test_conv2d_with_groups_dilation_stride_and_borders(backend, mode):
    x, w, b = randn(2, 4, 7, 6), randn(6, 2, 3, 2), randn(1, 6)
    pads = [(1, 2), (0, 1)]
    ours = run("conv", backend, x, w, b, border=mode, padding=pads, stride=[2, 1], dilation=[1, 2], groups=2)
    xp = F.pad(t(x), (0, 1, 1, 2), mode=mode)  # torch pads last dim first
    close(ours, F.conv2d(xp, t(w), t(b[0]), stride=(2, 1), dilation=(1, 2), groups=2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv1d_and_depthwise(backend):
    x, w = randn(1, 3, 9), randn(6, 1, 4)
    ours = run("conv", backend, x, w, 0.0, padding=[(2, 1)], stride=[2], groups=0)
    close(ours, F.conv1d(F.pad(t(x), (2, 1)), t(w), stride=2, groups=3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv3d(backend):
    x, w, b = randn(1, 2, 4, 5, 3), randn(3, 2, 2, 3, 2), randn(1, 3)
    ours = run("conv", backend, x, w, b, padding=[(1, 1), (1, 1), (0, 1)])
    close(ours, F.conv3d(F.pad(t(x), (0, 1, 1, 1, 1, 1)), t(w), t(b[0])))


@pytest.mark.parametrize("backend", BACKENDS)
def test_deconv_matches_conv_transpose(backend):
    # torch output_padding adds rows at the end; NNEF takes it from output_shape.
    x, w, b = randn(2, 4, 3, 4), randn(4, 3, 3, 2), randn(1, 6)
    ours = run("deconv", backend, x, w, b, padding=[(1, 1), (0, 0)], stride=[2, 3], dilation=[1, 2],
               output_shape=[2, 6, 6, 12], groups=2)
    theirs = F.conv_transpose2d(t(x), t(w), t(b[0]), stride=(2, 3), padding=(1, 0), output_padding=(1, 0),
                                dilation=(1, 2), groups=2)
    close(ours, theirs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool_and_avg_pool(backend):
    x = randn(2, 3, 7, 8)
    pool = dict(size=[1, 1, 3, 3], stride=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (1, 1), (1, 1)])
    # 'ignore' = torch's -inf padding for max and count_include_pad=False for avg;
    # 'constant' = zeros that take part, i.e. count_include_pad=True.
    close(run("max_pool", backend, x, border="ignore", **pool), F.max_pool2d(t(x), 3, 2, padding=1))
    close(run("avg_pool", backend, x, border="ignore", **pool),
          F.avg_pool2d(t(x), 3, 2, padding=1, count_include_pad=False))
    close(run("avg_pool", backend, x, border="constant", **pool),
          F.avg_pool2d(t(x), 3, 2, padding=1, count_include_pad=True))
    close(run("area_downsample", backend, x[:, :, :6, :], factor=[2, 4]), F.avg_pool2d(t(x[:, :, :6, :]), (2, 4)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool_with_index_values_match_torch(backend):
    # Index conventions differ (NNEF: window-relative; torch: flat spatial offset), so
    # compare the values and check that the two indices point at the same element.
    x = randn(1, 2, 6, 6)
    out, idx = run("max_pool_with_index", backend, x, size=[1, 1, 2, 2], stride=[1, 1, 2, 2],
                   padding=[(0, 0)] * 4)
    tv, ti = F.max_pool2d(t(x), 2, 2, return_indices=True)
    close(out, tv)
    rows = np.arange(3)[:, None] * 2 + idx[0, :, :, :] // 2
    cols = np.arange(3)[None, :] * 2 + idx[0, :, :, :] % 2
    np.testing.assert_array_equal(rows * 6 + cols, ti[0].numpy())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axes", [[1], [1, 2]])
def test_softmax(backend, axes):
    x = randn(2, 5, 3)
    if axes == [1]:
        close(run("softmax", backend, x, axes=axes), F.softmax(t(x), dim=1))
    else:
        flat = F.softmax(t(x).reshape(2, 15), dim=1).reshape(2, 5, 3)
        close(run("softmax", backend, x, axes=axes), flat)


@pytest.mark.parametrize("backend", BACKENDS)
def test_normalizations(backend):
    x = randn(2, 5, 4, 3)
    mean, var, off, scale = randn(1, 5), np.abs(randn(1, 5)) + 0.5, randn(1, 5), randn(1, 5)
    close(run("batch_normalization", backend, x, mean, var, off, scale, epsilon=1e-3),
          F.batch_norm(t(x), t(mean[0]), t(var[0]), t(scale[0]), t(off[0]), eps=1e-3))
    close(run("local_response_normalization", backend, x, size=[1, 3, 1, 1], alpha=0.3, beta=0.75, bias=2.0),
          F.local_response_norm(t(x), 3, alpha=0.3, beta=0.75, k=2.0))
    close(run("l2_normalization", backend, x, axes=[1], epsilon=1e-6), F.normalize(t(x), p=2.0, dim=1, eps=1e-6))
    close(run("l1_normalization", backend, x, axes=[1], epsilon=1e-6), F.normalize(t(x), p=1.0, dim=1, eps=1e-6))


@pytest.mark.parametrize("backend", BACKENDS)
def test_activations(backend):
    x = randn(3, 7) * 3
    close(run("sigmoid", backend, x), torch.sigmoid(t(x)))
    close(run("relu", backend, x), F.relu(t(x)))
    close(run("elu", backend, x, alpha=0.7), F.elu(t(x), alpha=0.7))
    close(run("selu", backend, x), F.selu(t(x)))  # torch's constants equal the NNEF defaults
    close(run("silu", backend, x), F.silu(t(x)))
    close(run("softplus", backend, x), F.softplus(t(x)))
    close(run("leaky_relu", backend, x, alpha=0.2), F.leaky_relu(t(x), 0.2))
    alpha = np.abs(randn(1, 7))
    close(run("prelu", backend, x, alpha), F.prelu(t(x), t(alpha[0])))


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_and_linear(backend):
    a, b = randn(2, 1, 3, 4), randn(1, 5, 6, 4)
    close(run("matmul", backend, a, b, transposeB=True), torch.matmul(t(a), t(b).transpose(-1, -2)))
    x, w, bias = randn(3, 4), randn(5, 4), randn(1, 5)
    close(run("linear", backend, x, w, bias), F.linear(t(x), t(w), t(bias[0])))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method,align", [("symmetric", False), ("aligned", True)])
def test_multilinear_upsample_matches_interpolate(backend, method, align):
    # symmetric + replicate = align_corners=False; aligned = align_corners=True.
    x = randn(1, 2, 3, 4)
    close(run("multilinear_upsample", backend, x, factor=[2, 3], method=method),
          F.interpolate(t(x), size=(6, 12), mode="bilinear", align_corners=align))
    close(run("nearest_upsample", backend, x, factor=[2, 3]), F.interpolate(t(x), size=(6, 12), mode="nearest"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_roi_align_whole_image_matches_upsample_then_pool(backend):
    # A RoI over the whole image with sampling 1 equals bilinear interpolation to output_size.
    x = randn(1, 2, 4, 6)
    ours = run("avg_roi_align", backend, x, np.array([[0, 0, 4, 6]], np.float32), np.array([0]),
               output_size=[8, 12], sampling_rate=[1, 1])
    close(ours, F.interpolate(t(x), size=(8, 12), mode="bilinear", align_corners=False))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["constant", "replicate", "reflect"])
def test_pad(backend, mode):
    x = randn(2, 3, 4, 5)
    ours = run("pad", backend, x, padding=[(0, 0), (0, 0), (2, 1), (3, 0)], border=mode)
    close(ours, F.pad(t(x), (3, 0, 2, 1), mode=mode))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_and_gather(backend):
    x = randn(3, 4, 5)
    close(run("sum_reduce", backend, x, axes=[0, 2]), t(x).sum(dim=(0, 2), keepdim=True))
    close(run("mean_reduce", backend, x, axes=[1]), t(x).mean(dim=1, keepdim=True))
    np.testing.assert_array_equal(run("argmax_reduce", backend, x, axes=[1]), t(x).argmax(dim=1, keepdim=True))
    idx = np.array([[3, 0], [1, 1]])
    np.testing.assert_array_equal(run("gather", backend, x, idx, axis=1, dtype="scalar"),
                                  t(x)[:, t(idx)].numpy())
