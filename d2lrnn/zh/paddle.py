"""``from d2lrnn.zh import paddle as d2l``: the book's names on PaddlePaddle (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("paddle", globals())
