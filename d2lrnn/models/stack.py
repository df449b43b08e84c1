"""One stacker for every cell: ``num_layers`` layers, each in one or two directions, dropout between.

Layer l reads the outputs of layer l - 1 (the inputs for l = 0). A bidirectional layer runs the
cell forward over time and, with parameters of its own, backward over the reversed sequence; its
output at step t is [H->_t, H<-_t], so the next layer and the output layer see 2 * num_hiddens
features. Dropout (during training only) is applied to the outputs of every layer but the last: a fresh
mask for every unit at every step, or, given ``masks``, one mask per sequence, the same at every step
(locked dropout).

Parameters are one flat list, named per layer and direction: the book's names for layer 0 in the
forward direction (``W_xh``, ``W_hh``, ``b_h``, ... so a one-layer model has exactly the book's
parameters), ``rev.`` before them for the backward direction and ``l1.``, ``l2.``, ... for the
layers above. The state is a flat tuple: for each layer, for each direction, the cell's states
(H, or H and C).
"""

from .. import checks, ops
from ..errors import ArgumentError
from ..keys import own
from .cells import get_cell


def slot_prefix(layer, reverse):
    """``''``, ``'rev.'``, ``'l1.'``, ``'l1.rev.'``, ...: the prefix of one layer-direction's names."""
    return (f"l{layer}." if layer else "") + ("rev." if reverse else "")


def check_dropout(dropout, name="dropout"):
    """``dropout`` as a float in [0, 1), or one ArgumentError line."""
    return checks.below_one(name, dropout, "probability", "probability of dropping a unit", 0.2)


def reverse_time(X):
    """X with its steps (axis 0) in reverse order."""
    return ops.stack(ops.unstack(X)[::-1])


class RecurrentStack:
    """``num_layers`` layers of ``cell`` in one or two directions: ``forward(params, X, state, training)``.

    ``X`` has shape (num_steps, batch, num_inputs), or holds token indices (num_steps, batch) with
    num_inputs the vocabulary size. Returns (Y of shape (num_steps, batch, directions *
    num_hiddens), the new state).
    """

    def __init__(self, cell, num_inputs, num_hiddens, num_layers=1, bidirectional=False, dropout=0.0,
                 reset_after=False):
        self.cell = get_cell(cell, reset_after)
        self.num_inputs = checks.positive_int("num_inputs", num_inputs, " (the vocabulary size)")
        self.num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 256)")
        self.num_layers = checks.positive_int("num_layers", num_layers, " (stacked layers, e.g. 2)")
        if not isinstance(bidirectional, bool):
            raise ArgumentError(f"bidirectional is {bidirectional!r}: use True or False")
        self.bidirectional, self.dropout = bidirectional, check_dropout(dropout)
        self.num_directions = 2 if bidirectional else 1
        self.slots = [(layer, reverse) for layer in range(self.num_layers)
                      for reverse in range(self.num_directions)]

    def compile_key(self):
        """What :meth:`forward` computes besides its arguments (``ops.compile``'s ``key``): the cell and every
        setting; None for a reader's subclass."""
        if not own(self):
            return None
        return (type(self), self.cell.name, self.cell.reset_after, self.num_inputs, self.num_hiddens,
                self.num_layers, self.bidirectional, self.dropout)

    @property
    def num_outputs(self):
        """Features per step in the output: directions * num_hiddens."""
        return self.num_directions * self.num_hiddens

    def _slot_inputs(self, layer):
        return self.num_inputs if layer == 0 else self.num_outputs

    @property
    def names(self):
        """Every parameter's name, in the order of the flat list."""
        return tuple(slot_prefix(layer, reverse) + name for layer, reverse in self.slots
                     for name in self.cell.names)

    def shapes(self):
        """Every parameter's shape, in the order of the flat list."""
        return [shape for layer, _ in self.slots
                for shape in self.cell.shapes(self._slot_inputs(layer), self.num_hiddens)]

    def init_params(self, device=None, init="normal", token_inputs=False):
        """Fresh parameters, drawn layer by layer, forward direction first: ``init`` 'normal' (the book's)
        or 'uniform' (see :func:`d2lrnn.models.cell.init_param`); ``token_inputs``: the first layer
        reads tokens."""
        return [p for layer, _ in self.slots
                for p in self.cell.init_params(self._slot_inputs(layer), self.num_hiddens, device, init,
                                               token_inputs and layer == 0)]

    def begin_state(self, batch_size, device=None):
        """Zero state for ``batch_size`` sequences: the cell's states for every layer and direction."""
        return tuple(s for _ in self.slots
                     for s in self.cell.init_state(batch_size, self.num_hiddens, device))

    def split(self, seq, per_slot):
        """``seq`` cut into ``len(self.slots)`` consecutive groups of ``per_slot`` items."""
        return [list(seq[i * per_slot:(i + 1) * per_slot]) for i in range(len(self.slots))]

    def forward(self, params, X, state, training=False, masks=None):
        """Run every layer and direction; see the class docstring. ``masks``: the ``num_layers - 1`` locked
        dropout masks between the layers, (batch, num_outputs) each, multiplied into every step's outputs
        (None: a fresh mask per unit and step)."""
        n_params, n_states = len(self.cell.names), len(self.cell.state_names)
        params, states = self.split(params, n_params), self.split(state, n_states)
        new_state, slot = [], 0
        for layer in range(self.num_layers):
            outputs = []
            for reverse in range(self.num_directions):
                inputs = reverse_time(X) if reverse else X
                Hs, s = self.cell.layer(inputs, tuple(states[slot]), params[slot])
                outputs.append(reverse_time(Hs) if reverse else Hs)
                new_state.extend(s)
                slot += 1
            X = outputs[0] if len(outputs) == 1 else ops.concat(outputs, 2)
            if training and self.dropout and layer < self.num_layers - 1:
                X = X * masks[layer] if masks is not None else ops.dropout(X, self.dropout)
        return X, tuple(new_state)
