"""Recurrent language models: three cells, any number of layers, one or two directions.

- ``rnn.py``, ``gru.py``, ``lstm.py``: each cell's equations, the book's step and the fast form.
- ``cell.py``: what the stacker needs to know about a cell; ``bptt.py``: the RNN's hand-written
  backward pass.
- ``stack.py``: one stacker for layers (dropout between them) and directions.
- ``native.py``: the framework's own layer running the same parameters (the concise models).
- ``lm.py``: the language models (the book's ``RNNModelScratch`` and ``RNNModel``, and
  ``StackedRNNModelScratch``).

Every model keeps its parameters in the book's layout, named (``net.param_names``), which is
what checkpoints store, so a model trained on one backend loads on any other.
"""

from .. import checks
from ..errors import ArgumentError
from .cell import Cell, cell_names, get_cell
from .gru import get_gru_params, gru, gru_textbook, init_gru_state
from .lm import RNNModel, RNNModelScratch, StackedRNNModelScratch
from .lstm import get_lstm_params, init_lstm_state, lstm, lstm_textbook
from .native import NativeLayer, rnn_layer
from .rnn import get_params, init_rnn_state, rnn, rnn_textbook
from .stack import RecurrentStack

__all__ = [
    "Cell", "cell_names", "get_cell", "RecurrentStack", "NativeLayer", "rnn_layer",
    "RNNModel", "RNNModelScratch", "StackedRNNModelScratch", "make_model",
    "get_params", "init_rnn_state", "rnn", "rnn_textbook",
    "get_gru_params", "init_gru_state", "gru", "gru_textbook",
    "get_lstm_params", "init_lstm_state", "lstm", "lstm_textbook",
]

#: Model kinds of format-1 checkpoints, before cells and layers.
_OLD_KINDS = {"rnn_scratch": "scratch", "rnn_concise": "concise"}


def make_model(kind, vocab_size, num_hiddens, device=None, cell="rnn", num_layers=1, bidirectional=False,
               dropout=0.0, reset_after=None, input_dropout=0.0, output_dropout=0.0, init="normal"):
    """A fresh language model.

    ``kind`` is 'scratch' (the cell's own equations) or 'concise' (the framework's layer, where
    the backend has one); ``cell`` is 'rnn', 'gru' or 'lstm'. ``reset_after`` picks the GRU's form:
    by default the book's for 'scratch' and the frameworks' (cuDNN) form for 'concise'. In
    training, ``dropout`` acts between recurrent layers, ``input_dropout`` on the input tokens and
    ``output_dropout`` before the output layer. ``init`` draws the starting weights: 'normal', the book's
    N(0, 0.01^2) with zero biases, or 'uniform', the frameworks' U(-1/sqrt(h), 1/sqrt(h)) with the rows
    that tokens pick at an embedding's scale (:func:`d2lrnn.models.cell.init_param`).
    """
    kind = _OLD_KINDS.get(kind, kind)
    vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
    num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 512)")
    if kind == "scratch":
        return StackedRNNModelScratch(vocab_size, num_hiddens, cell, num_layers, bidirectional, dropout,
                                      bool(reset_after), device, input_dropout, output_dropout, init)
    if kind == "concise":
        layer = rnn_layer(vocab_size, num_hiddens, cell, num_layers, bidirectional, dropout, reset_after)
        return RNNModel(layer, vocab_size, device, input_dropout, output_dropout, init)
    raise ArgumentError(f"unknown model {kind!r}: choose 'scratch' or 'concise'")
