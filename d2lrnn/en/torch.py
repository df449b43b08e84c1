"""``from d2lrnn.en import torch as d2l``: the 1.0 edition's names on PyTorch (see :mod:`d2lrnn.en`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("torch", globals())
