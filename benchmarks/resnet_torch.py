"""ResNet-18 and ResNet-50 (the v1.5 layout: stride on the 3×3 convolution) in plain torch.

Written here because no CPU build of torchvision can be installed; the layer layout,
channel widths and block counts are the published architecture's.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = _skip(cin, cout, stride)

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = _skip(cin, cout, stride)

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def _skip(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, block, counts, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for i, (width, count) in enumerate(zip((64, 128, 256, 512), counts, strict=True)):
            for j in range(count):
                layers.append(block(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * block.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def resnet(depth: int) -> ResNet:
    torch.manual_seed(0)
    if depth == 18:
        return ResNet(Basic, (2, 2, 2, 2)).eval()
    if depth == 50:
        return ResNet(Bottleneck, (3, 4, 6, 3)).eval()
    raise ValueError(depth)
