"""``from d2lrnn.zh import mxnet as d2l``: the book's names on MXNet (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("mxnet", globals())
