"""The tests whose code depends on the Keras version, under Keras 2: ``python -m tests.keras2 [pytest args]``.

TensorFlow 2.16+ comes with Keras 3, and the book's TensorFlow cells are Keras 2 code. With tf-keras installed
and ``TF_USE_LEGACY_KERAS=1`` (set here, before TensorFlow loads), ``tf.keras`` is Keras 2. The ``tensorflow``
tox env runs the whole suite on Keras 3, then this: the shim's values and gradients (its native Keras layers
among them), the cells against the native layers and their bad inputs, the book's forms (a reader's Keras
layers, the in-place hooks), and the concise language-model and seq2seq-model tests. The rest (the
hand-written BPTT, compilation, data, training loop, command line, notebooks, benchmarks) touches no Keras
layer and runs the same code under either Keras.
"""

import os
import sys

KERAS_DEPENDENT = ["tests/backends/test_values.py", "tests/backends/test_gradients.py",
                   "tests/backends/test_shim.py", "tests/models/test_cells.py",
                   "tests/models/test_bad_input.py", "tests/book", "tests/lm/test_rnn_concise.py",
                   "tests/seq2seq/test_model.py", "tests/en"]


def main(args):
    """Run pytest on ``args`` (by default :data:`KERAS_DEPENDENT`) with Keras 2; return its exit code."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    os.environ.setdefault("D2LRNN_BACKEND", "tensorflow")
    import pytest

    return pytest.main(["-q", "-p", "no:cacheprovider", "--durations=10", *(args or KERAS_DEPENDENT)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
