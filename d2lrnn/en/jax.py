"""``from d2lrnn.en import jax as d2l``: the 1.0 edition's JAX cells, Flax modules trained functionally (see
:mod:`d2lrnn.en` and :mod:`d2lrnn.book.en.functional`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("jax", globals())
