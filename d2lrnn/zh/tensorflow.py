"""``from d2lrnn.zh import tensorflow as d2l``: the book's names on TensorFlow (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("tensorflow", globals())
