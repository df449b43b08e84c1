"""``from d2lrnn.en import jax as d2l``: the 1.0 edition's JAX cells, not there yet (see :mod:`d2lrnn.en`).

The 1.0 edition's JAX cells write Flax modules (dataclass fields, ``setup``, ``init_with_output``) trained
through optax and a ``TrainState``; d2lrnn does not map them yet. Importing this module says so in one
line, before anything is chosen: the 2.x face on JAX, ``from d2lrnn.zh import jax as d2l``, is there.
"""

from d2lrnn.errors import BackendError

raise BackendError("d2lrnn.en.jax: the 1.0 edition's JAX (Flax) cells are not supported yet; use "
                   "d2lrnn.en.torch, d2lrnn.en.mxnet or d2lrnn.en.tensorflow, or the 2.x face on JAX, "
                   "from d2lrnn.zh import jax as d2l")
