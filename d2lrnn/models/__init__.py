"""Recurrent layers: three cells, any number of layers, one or two directions, from scratch or on the
framework's own layer.

- ``rnn.py``, ``gru.py``, ``lstm.py``: each cell's equations, the book's step and the fast form;
  ``cell.py`` what the stacker needs to know about a cell, ``cells.py`` the table of them;
  ``bptt.py`` the hand-written backward passes of the fast forms.
- ``stack.py``: one stacker for layers (dropout between them) and directions.
- ``native.py``: the framework's own layer running the same parameters (the concise models).

The language models built on them are in :mod:`d2lrnn.lm`, the encoder-decoder in
:mod:`d2lrnn.seq2seq`. Parameters stay in the book's layout (per-gate ``W_x*``, ``W_h*``, ``b_*``),
named, which is what checkpoints store, so a model trained on one backend loads on any other.
"""

from .cell import Cell
from .cells import cell_names, get_cell
from .gru import get_gru_params, gru, gru_textbook, init_gru_state
from .lstm import get_lstm_params, init_lstm_state, lstm, lstm_textbook
from .native import NativeLayer, rnn_layer
from .rnn import get_params, init_rnn_state, rnn, rnn_textbook
from .stack import RecurrentStack

__all__ = [
    "Cell", "cell_names", "get_cell", "RecurrentStack", "NativeLayer", "rnn_layer",
    "get_params", "init_rnn_state", "rnn", "rnn_textbook",
    "get_gru_params", "init_gru_state", "gru", "gru_textbook",
    "get_lstm_params", "init_lstm_state", "lstm", "lstm_textbook",
]
