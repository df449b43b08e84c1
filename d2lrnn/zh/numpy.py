"""``from d2lrnn.zh import numpy as d2l``: the book's names on NumPy and autograd (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("numpy", globals())
