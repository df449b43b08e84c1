"""What the stacker and the native-layer adapter need to know about a recurrent cell.

A cell is described once, next to its equations (``rnn.py``, ``gru.py``, ``lstm.py``), by a
:class:`Cell`; :mod:`d2lrnn.models.cells` lists them all. Each of its G gates ``g`` has the
book's three parameters ``W_xg`` (inputs x
hiddens), ``W_hg`` (hiddens x hiddens) and ``b_g``, in the book's order of gates; a GRU in the
reset-after form has one more, the recurrent candidate bias ``b_hh``. ``layer`` is the fast
recurrence of one layer in one direction::

    layer(X, state, params) -> (Hs, state)

for X of shape (num_steps, batch, inputs), or token indices (num_steps, batch) in the first layer,
``params`` the cell's parameters in the order of ``names``, Hs of shape (num_steps, batch, hiddens)
and ``state`` a tuple of ``len(state_names)`` (batch, hiddens) matrices.
"""

import dataclasses
from collections.abc import Callable

from .. import ops
from ..errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class Cell:
    """A recurrent cell: its gates, the names of its parameters and states, and its fast layer."""

    name: str                 # 'rnn', 'gru', 'lstm'
    gates: str                # the book's gate letters in its parameter order, e.g. 'zrh' for the GRU
    state_names: tuple        # ('H',) or ('H', 'C')
    layer: Callable           # layer(X, state, params) -> (Hs, state): one layer, one direction
    extra: tuple = ()         # parameters after the gates' triples (the reset-after GRU's 'b_hh')
    reset_after: bool = False  # GRU only: where the reset gate applies (see gru.py)

    @property
    def names(self):
        """The parameter names of one layer in one direction, in the book's order."""
        triples = [(f"W_x{g}", f"W_h{g}", f"b_{g}") for g in self.gates]
        return tuple(name for triple in triples for name in triple) + self.extra

    def shapes(self, num_inputs, num_hiddens):
        """The shape of each parameter in :attr:`names`."""
        by_kind = {"W_x": (num_inputs, num_hiddens), "W_h": (num_hiddens, num_hiddens)}
        return [by_kind.get(name[:3], (num_hiddens,)) for name in self.names]  # b_*: biases

    def init_params(self, num_inputs, num_hiddens, device=None, init="normal", token_inputs=False):
        """Fresh parameters drawn in :attr:`names` order (see :func:`init_param`); ``token_inputs``:
        the inputs are tokens (one-hot rows), so ``W_x*`` are drawn as token rows."""
        return [init_param(shape, init, num_hiddens, device, token_rows=token_inputs and name[:3] == "W_x")
                for name, shape in zip(self.names, self.shapes(num_inputs, num_hiddens))]

    def init_state(self, batch_size, num_hiddens, device=None):
        """Zero state: one (batch_size, num_hiddens) matrix per state (H; H and C for the LSTM)."""
        return tuple(ops.zeros((batch_size, num_hiddens), device=device) for _ in self.state_names)


#: Initializations: 'normal' is the book's, 'uniform' the frameworks' (see :func:`init_param`).
INITS = ("normal", "uniform")
#: 'uniform': the bound of the rows a token picks. A one-hot input selects one row of W_x, as an
#: embedding lookup does, so these rows are drawn at an embedding's scale, unit variance like
#: PyTorch's N(0, 1) embeddings: U(-sqrt(3), sqrt(3)). With 1/sqrt(num_hiddens) instead, the input's
#: signal would be tiny beside the recurrent one, and training starts slowly (bench/RESULTS.md).
TOKEN_BOUND = 3 ** 0.5


def check_init(init):
    """``init`` if it is one of :data:`INITS`, else one ArgumentError line."""
    if init not in INITS:
        raise ArgumentError(f"init is {init!r}: choose 'normal' (the book's N(0, 0.01^2) weights, "
                            "zero biases) or 'uniform' (the frameworks' U(-1/sqrt(h), 1/sqrt(h))) (--init)")
    return init


def init_param(shape, init="normal", fan_in=None, device=None, token_rows=False):
    """One fresh parameter of ``shape`` (2 axes: a weight; 1: a bias), from d2lrnn's generator.

    - ``'normal'``, the book's: weights ~ N(0, 0.01^2), biases zero.
    - ``'uniform'``, the frameworks' default for recurrent and linear layers: weights and biases
      ~ U(-a, a) with a = 1/sqrt(fan_in) (for a cell, as PyTorch's recurrent layers, its hidden
      units; for the output layer, the features it reads), and a = :data:`TOKEN_BOUND` for
      ``token_rows``, weights whose rows one-hot tokens pick.
    """
    if check_init(init) == "normal":
        if len(shape) == 2:
            return ops.normal(0, 0.01, shape, device=device)
        return ops.zeros(shape, device=device)
    bound = TOKEN_BOUND if token_rows else 1.0 / fan_in ** 0.5
    return ops.uniform(-bound, bound, shape, device=device)


def input_projection(X, W_x, b):
    """X_t W_x + b for every step at once: (num_steps, batch, G*h) from (num_steps, batch, inputs).

    With token indices (num_steps, batch) a one-hot row times W_x is a row of W_x, so rows are
    gathered instead; b is added to the vocabulary-sized W_x first (same numbers, and its gradient
    sums vocabulary rows instead of num_steps * batch rows).
    """
    if len(ops.shape(X)) == 2:
        return ops.take(W_x + b, X)
    T, B, inputs = ops.shape(X)
    return ops.reshape(ops.matmul(ops.reshape(X, (T * B, inputs)), W_x), (T, B, -1)) + b
