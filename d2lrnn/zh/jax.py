"""``from d2lrnn.zh import jax as d2l``: the book's names on JAX (see :mod:`d2lrnn.zh`)."""

from ._pinned import pin

__getattr__, __dir__ = pin("jax", globals())
