"""``from d2lrnn.en import tensorflow as d2l``: the 1.0 edition on TensorFlow (see :mod:`d2lrnn.en`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("tensorflow", globals())
