"""The recurrent cells d2lrnn knows, in one table: the stacker, the native-layer adapter, checkpoints
and the command line look cells up here.

A cell's equations and its :class:`~d2lrnn.models.cell.Cell` description live in its own module
(``rnn.py``, ``gru.py``, ``lstm.py``); adding a cell is writing that module and one row below.
"""

from ..errors import ArgumentError
from . import gru, lstm, rnn
from .cell import Cell

#: (name, reset_after) -> Cell. Only the GRU has two forms: the book's (reset gate before the
#: recurrent product) and the frameworks' (after it).
CELLS = {
    ("rnn", False): rnn.CELL,
    ("gru", False): gru.CELL,
    ("gru", True): gru.GRU_RESET_AFTER,
    ("lstm", False): lstm.CELL,
}


def cell_names():
    """The names of the known cells, in the table's order."""
    return list(dict.fromkeys(name for name, _ in CELLS))


def get_cell(name, reset_after=False):
    """The :class:`Cell` called ``name`` ('rnn', 'gru' or 'lstm'); ``reset_after`` picks the GRU's form."""
    if isinstance(name, Cell):
        return name
    key = str(name).strip().lower() if isinstance(name, str) else name
    if (key, False) not in CELLS:
        raise ArgumentError(f"unknown cell {name!r}: choose one of {', '.join(cell_names())} (--cell)")
    if reset_after and key != "gru":
        raise ArgumentError(f"reset_after applies to the GRU only, not to {key!r}: leave it out")
    return CELLS[(key, bool(reset_after))]
