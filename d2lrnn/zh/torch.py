"""``from d2lrnn.zh import torch as d2l``: the book's names on PyTorch (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("torch", globals())
