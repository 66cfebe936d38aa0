"""Small real networks built in torch with fixed seeds, for end-to-end tests.

Each builder returns ``(module, example_input)``.  The networks follow the shapes of the
families they are named after (ResNet basic blocks with downsampling, MobileNet depthwise
separable blocks with ReLU6 and upsampling, a pre-norm transformer block with attention,
GELU and layer norm), kept small so the whole conversion chain runs in seconds.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetTiny(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2), BasicBlock(16, 32, 2))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class MobileNetTiny(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()

        def dw_separable(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                                 nn.ReLU6(), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6())

        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(dw_separable(8, 16, 1), dw_separable(16, 24, 2))
        self.head = nn.Linear(24, classes)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        y = self.blocks(self.stem(x))
        y = y + F.interpolate(F.avg_pool2d(y, 2), scale_factor=2, mode="nearest")
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class TransformerBlock(nn.Module):
    """Embedding, pre-norm attention with softmax, GELU feed-forward (exported with erf)."""

    def __init__(self, vocab: int = 50, tokens: int = 7, dim: int = 16, heads: int = 2):
        super().__init__()
        self.t, self.d, self.h = tokens, dim, heads
        self.emb = nn.Embedding(vocab, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, ids):
        t, d, h = self.t, self.d, self.h
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln1(x)).reshape(1, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h), -1) @ v
        x = x + self.out(att.permute(0, 2, 1, 3).reshape(1, t, d))
        return x + self.ff(self.ln2(x))


class NormPool(nn.Module):
    """Nearest upsampling, an L2 norm over channels (lp_reduce) and exclude-pad average pooling."""

    def forward(self, x):
        y = F.interpolate(x, scale_factor=2, mode="nearest")
        n = torch.linalg.vector_norm(y, ord=2, dim=1, keepdim=True)
        return y / (n + 1e-3) + F.avg_pool2d(y, 3, 1, 1, count_include_pad=False)


def build(name: str):
    """``(module, example_input)`` for ``name``, with fixed seeds."""
    torch.manual_seed(1234)
    if name == "resnet":
        net, x = ResNetTiny(), torch.randn(2, 3, 32, 32)
    elif name == "mobilenet":
        net, x = MobileNetTiny(), torch.randn(1, 3, 16, 16)
    elif name == "transformer":
        net, x = TransformerBlock(), torch.randint(0, 50, (1, 7))
    elif name == "normpool":
        net, x = NormPool(), torch.randn(1, 3, 5, 5)
    else:
        raise KeyError(name)
    # Give batch norms non-trivial statistics so they are really exercised.
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return net.eval(), x


NAMES = ("resnet", "mobilenet", "transformer", "normpool")
