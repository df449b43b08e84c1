"""The English 1.0 edition's class API (``from d2lrnn.en import torch as d2l``) over d2lrnn's core.

The 1.0 edition trains with classes: a model is a ``d2l.Module`` (the framework's module with ``loss``,
``training_step``, ``configure_optimizers``), data a ``d2l.DataModule``, and ``d2l.Trainer`` fits one to
the other. :func:`names` gives the face's names for the active backend: the classes derive from its
framework's module class, so they are made once per backend.
"""

import functools

from ... import ops
from ...backends import backend_name, functional_hooks
from ...seq2seq.bleu import bleu
from . import functional
from .base import (
    SGD,
    Adam,
    DataModule,
    HyperParameters,
    ProgressBoard,
    Trainer,
    add_to_class,
    check_len,
    check_shape,
    hooks_for,
    module_classes,
)
from .data import MTFraEng, TimeMachine, Vocab, download, extract
from .rnn import rnn_classes
from .seq2seq import seq2seq_classes


def randn(*shape, device=None):
    """Samples of N(0, 1) of the given shape (``randn(2, 3)`` or ``randn((2, 3))``), from d2lrnn's
    generator."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return ops.normal(0, 1, shape, device=device)


def swapaxes(x, axis1, axis2):
    """``x`` with two axes exchanged."""
    axes = list(range(len(ops.shape(x))))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return ops.transpose(x, tuple(axes))


def expand_dims(x, axis):
    """``x`` with a new axis of length 1 at ``axis``."""
    shape = list(ops.shape(x))
    shape.insert(axis if axis >= 0 else len(shape) + axis + 1, 1)
    return ops.reshape(x, tuple(shape))


def gpu(i=0):
    """The ``i``-th GPU (the CPU where there is none)."""
    return ops.try_gpu(i)


@functools.cache
def _classes(backend):
    if functional_hooks() is not None:  # JAX: the Flax classes
        return functional.classes()
    hooks = hooks_for("module_bases")
    classes = module_classes(hooks)
    classes.update(rnn_classes(classes["Module"], classes["Classifier"]))
    classes.update(seq2seq_classes(classes, hooks))
    return classes


def names():
    """The 1.0 edition's names on the active backend (its classes, and the tensor functions the 1.0 cells
    call that the 2.x face does not have)."""
    classes = _classes(backend_name())
    return {
        **classes,
        "HyperParameters": HyperParameters, "ProgressBoard": ProgressBoard, "DataModule": DataModule,
        "Trainer": Trainer, "SGD": SGD, "Adam": Adam, "add_to_class": add_to_class, "check_len": check_len,
        "check_shape": check_shape, "TimeMachine": TimeMachine, "MTFraEng": MTFraEng, "Vocab": Vocab,
        "bleu": bleu, "download": download, "extract": extract,
        "randn": randn, "swapaxes": swapaxes, "expand_dims": expand_dims, "gpu": gpu,
        **{name: classes[name] for name in ("SGD", "Adam", "Trainer") if name in classes},  # JAX's forms
    }
