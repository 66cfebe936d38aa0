"""Train the digits CNN with PyTorch and save it as an NNEF model folder with nnefx.

    .venv/bin/python examples/digits/train.py [--out examples/digits/model] [--epochs 40]

Needs torch (``make venv`` installs it); the demo that runs the saved model does not.
The network is written with :class:`nnefx.io.builder.GraphBuilder` — NNEF operations
``conv``, ``relu``, ``max_pool``, ``reshape``, ``linear`` and ``softmax`` — and saved with
:func:`nnefx.save`.  Before finishing, the script loads the folder back with nnefx and checks
that nnefx's outputs agree with PyTorch's on the held-out images, so a committed model is
known to mean what the trained network computes.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import digits_data  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def make_net():
    """The network: two 3×3 convolutions (16, 32 channels) with ReLU and 2×2 max pooling, then
    a linear layer to the 10 digits."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc = nn.Linear(32 * 2 * 2, 10)

        def forward(self, x):
            x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
            x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
            return self.fc(x.flatten(1))

    return Net()


def train(epochs: int, seed: int):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    x_train, y_train, x_test, y_test = digits_data.split()
    net = make_net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        order = torch.randperm(len(xt), generator=gen)
        net.train()
        total = 0.0
        for i in range(0, len(xt), 32):
            idx = order[i:i + 32]
            loss = nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        schedule.step()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: loss {total / len(xt):.4f}")
    net.eval()
    with torch.no_grad():
        probs = torch.softmax(net(torch.from_numpy(x_test)), dim=1).numpy()
    print(f"torch held-out accuracy: {(probs.argmax(1) == y_test).mean():.4f} ({len(y_test)} images)")
    return net, probs


def build_model(net):
    """The trained network as an nnefx Model, written with the graph builder."""
    from nnefx.io.builder import GraphBuilder

    def param(t) -> np.ndarray:
        return t.detach().numpy().astype(np.float32)

    b = GraphBuilder("digits")
    x = b.external("input", shape=(1, 1, 8, 8))
    pool = {"size": [1, 1, 2, 2], "stride": [1, 1, 2, 2], "padding": [(0, 0)] * 4}
    h = x
    for name, conv in (("conv1", net.conv1), ("conv2", net.conv2)):
        w = b.variable(f"{name}/filter", param(conv.weight))
        bias = b.variable(f"{name}/bias", param(conv.bias).reshape(1, -1))  # NNEF biases are [1, C]
        h = b.op("conv", h, w, bias, padding=[(1, 1), (1, 1)], name=name)
        h = b.op("relu", h, name=f"{name}_relu")
        h = b.op("max_pool", h, name=f"{name}_pool", **pool)
    h = b.op("reshape", h, shape=[0, -1], name="flat")     # [N, 32, 2, 2] -> [N, 128], any batch
    w = b.variable("fc/filter", param(net.fc.weight))
    bias = b.variable("fc/bias", param(net.fc.bias).reshape(1, -1))
    logits = b.op("linear", h, w, bias, name="logits")
    b.output(b.op("softmax", logits, axes=[1], name="probabilities"))
    return b.build()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "model"))
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import nnefx

    net, torch_probs = train(args.epochs, args.seed)
    nnefx.save(build_model(net), args.out)
    print(f"wrote {args.out}")

    # Load the folder back and compare with PyTorch on every held-out image.
    _, _, x_test, _ = digits_data.split()
    session = nnefx.Session(nnefx.load(args.out), input_shapes={"input": (None, 1, 8, 8)})
    probs = session.run({"input": x_test})["probabilities"]
    diff = float(np.abs(probs - torch_probs).max())
    print(f"nnefx vs torch on {len(x_test)} images: max |difference| {diff:.2e}")
    if diff > 1e-4:
        print("error: nnefx and torch disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
