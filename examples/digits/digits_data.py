"""The digits data set and the train / held-out split shared by ``train.py`` and ``demo.py``.

scikit-learn bundles the data (1797 grey 8×8 images of handwritten digits, values 0–16), so
nothing is downloaded.  Both scripts call :func:`split` so the demo measures accuracy on
exactly the images training never saw.
"""

from __future__ import annotations

import numpy as np

#: Fraction of the images held out for the demo's accuracy figure.
TEST_FRACTION = 0.25
SEED = 0


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels); images [N, 1, 8, 8] in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_FRACTION, random_state=SEED, stratify=labels)
    return x_train, y_train, x_test, y_test
