"""The digits demo (``make demo``): check, run and profile the bundled NNEF model.

1. validates ``examples/digits/model`` exactly as ``nnefx check`` does;
2. runs the 450 held-out images (never seen in training, see ``digits_data.py``) through the
   fast backend in batches and prints accuracy and throughput (best of a few warm passes);
3. runs a few images through the formal (reference) backend and compares;
4. prints the time spent per operation kind (one more pass, profiled).

Needs only nnefx (numpy) plus scikit-learn for the bundled data set and tqdm for the
progress bar — no torch; ``train.py`` made the model.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import digits_data  # noqa: E402

import nnefx  # noqa: E402
from nnefx.cli import main as nnefx_main  # noqa: E402
from nnefx.runtime.profile import Profile  # noqa: E402

BATCH = 50
FORMAL_IMAGES = 10
THROUGHPUT_PASSES = 5


def main() -> int:
    from tqdm import tqdm

    model_dir = os.path.relpath(os.path.join(HERE, "model"))
    status = nnefx_main(["check", model_dir])
    if status != 0:
        return status

    model = nnefx.load(model_dir)
    # The model declares one 1x1x8x8 image; any batch size is substituted here.
    shapes = {"input": (None, 1, 8, 8)}
    session = nnefx.Session(model, backend="fast", input_shapes=shapes)
    print(session.plan.summary())

    _, _, images, labels = digits_data.split()
    predictions = []
    sys.stdout.flush()  # the progress bar writes to stderr
    for i in tqdm(range(0, len(images), BATCH), desc="held-out images", unit="batch", file=sys.stderr):
        probs = session.run({"input": images[i:i + BATCH]})["probabilities"]
        predictions.append(probs.argmax(axis=1))
    predicted = np.concatenate(predictions)
    accuracy = float((predicted == labels).mean())
    print(f"accuracy on {len(labels)} held-out images: {accuracy:.2%} "
          f"({int((predicted == labels).sum())} correct)")

    # Throughput: the best of a few warm passes.  One pass is only ~10 ms, so a single
    # scheduler hiccup (a BLAS worker thread waiting for a busy core) would otherwise
    # decide the figure; the first pass above already paid the one-time costs.
    passes = []
    for _ in range(THROUGHPUT_PASSES):
        started = time.perf_counter()
        for i in range(0, len(images), BATCH):
            session.run({"input": images[i:i + BATCH]})
        passes.append(time.perf_counter() - started)
    print(f"throughput (fast backend, batches of {BATCH}, best of {THROUGHPUT_PASSES} passes): "
          f"{len(labels) / min(passes):,.0f} images/s")

    profile = Profile()
    for i in range(0, len(images), BATCH):
        session.run({"input": images[i:i + BATCH]}, profile=profile)

    formal = nnefx.Session(model, backend="formal", input_shapes=shapes)
    sample = images[:FORMAL_IMAGES]
    started = time.perf_counter()
    reference = formal.run({"input": sample})["probabilities"]
    formal_elapsed = time.perf_counter() - started
    fast = session.run({"input": sample})["probabilities"]
    same = bool((reference.argmax(1) == fast.argmax(1)).all())
    print(f"formal backend on {FORMAL_IMAGES} images: {FORMAL_IMAGES / formal_elapsed:,.1f} images/s, "
          f"{'same predictions' if same else 'DIFFERENT predictions'}, "
          f"max |fast - formal| = {float(np.abs(reference - fast).max()):.1e}")

    print("\nprofile (fast backend, one more pass over the held-out batches):")
    print(profile.table())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
