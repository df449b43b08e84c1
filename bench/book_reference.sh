#!/bin/sh
# The book's own d2l 1.0.3 package and what it imports, for `book_check.py --edition d2l-en --face book`:
# test input only, never a dependency of d2lrnn. Nothing here goes into the tox envs: every package is
# installed with --no-deps into a folder of DIR that the checker puts on PYTHONPATH for the book's runs.
#
#   sh bench/book_reference.sh [DIR]        # DIR defaults to /work/ref
#
# DIR/d2l103       the d2l 1.0.3 wheel (its d2l/torch.py, mxnet.py, ...)
# DIR/deps-torch   what the torch env lacks: scipy, pandas (+ dateutil, six, pytz, tzdata), requests
#                  (+ urllib3, idna, certifi, charset_normalizer), and a stand-in torchvision (below)
# DIR/deps-mxnet   what the mxnet env lacks, in versions for its NumPy 1.23: scipy 1.11, pandas 2.1
# DIR/numpy23      NumPy 2.3.5, for the tensorflow column (below)
set -eu
DIR=${1:-/work/ref}
TOX=${TOX_DIR:-/work/main/.tox}
PIP="$TOX/torch/bin/python -m pip install -q --no-deps --target"
# A folder already there is kept as it is (delete it to install afresh).
[ -d "$DIR/d2l103" ] || $PIP "$DIR/d2l103" d2l==1.0.3
[ -d "$DIR/deps-torch" ] || $PIP "$DIR/deps-torch" scipy pandas python-dateutil six pytz tzdata requests \
    urllib3 idna certifi charset_normalizer
[ -d "$DIR/deps-mxnet" ] || $PIP "$DIR/deps-mxnet" "scipy==1.11.4" "pandas==2.1.4" python-dateutil six pytz tzdata
# Not the book's package: NumPy below 2.4 for the tensorflow column of either face (--path tensorflow=DIR/numpy23):
# the book's TensorFlow cells call int() on one-element tensors, which NumPy 2.4 refuses.
[ -d "$DIR/numpy23" ] || $PIP "$DIR/numpy23" "numpy==2.3.5"
# torchvision from PyPI is built for another torch than the env's and does not import beside it. d2l's
# torch.py imports it at the top and uses it only for image data sets, which the RNN chapters never load.
mkdir -p "$DIR/deps-torch/torchvision"
cat > "$DIR/deps-torch/torchvision/__init__.py" <<'PY'
"""A stand-in for torchvision on the book-reference path only (bench/book_reference.sh).

d2l 1.0.3's torch.py imports torchvision at the top; the RNN chapters use nothing of it. Anything
used from it fails loudly.
"""
from . import transforms  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"torchvision.{name}: this is the book checker's stand-in, not torchvision")
PY
cat > "$DIR/deps-torch/torchvision/transforms.py" <<'PY'
"""The stand-in's transforms: nothing (see the package's docstring)."""


def __getattr__(name):
    raise AttributeError(f"torchvision.transforms.{name}: the book checker's stand-in has none")
PY
echo "book reference in $DIR"
