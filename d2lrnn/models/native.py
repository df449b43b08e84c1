"""The framework's own recurrent layer, running parameters kept in the book's layout.

Each backend declares its native layers (``ops.native_rnn()``, a
:class:`d2lrnn.backends.NativeRNN`, or None on NumPy): how to build one, how to read the settings
of one the reader built, the order in which it stores the gates, whether its weights are
transposed, and how to call it with given weights. This adapter does the rest, once for every
framework: it packs the book's per-gate parameters into the layer's layout inside the
differentiated function, so SGD updates the same tensors as the scratch model, and it checks
a reader's layer for settings the book's model does not have. Where a backend has no native
layer for a cell (NumPy, or the book's GRU form on torch and MXNet) the cell's own recurrence
runs instead.
"""

from .. import ops
from ..backends import backend_name
from ..errors import ArgumentError
from .stack import RecurrentStack

#: Why locked dropout between layers needs the scratch model.
LOCKED_BETWEEN_NATIVE = ("locked dropout between layers needs the scratch model (make_model('scratch', "
                         "...), --model scratch): the framework's multi-layer layer draws its own masks "
                         "between its layers; or set dropout to 0")


def _joined(parts, axis):
    """The gates' parts concatenated along ``axis``; a single gate's (the tanh RNN's) as it is, not copied."""
    return parts[0] if len(parts) == 1 else ops.concat(parts, axis)


def _declaration():
    return ops.native_rnn()


class NativeLayer(RecurrentStack):
    """A :class:`RecurrentStack` computed by the framework's own layer (``self.native``) where it has one.

    ``reset_after`` (GRU only) defaults to the frameworks' form, True. Pass ``native`` to wrap a
    layer the reader built; its settings then define the stack and the others must be left out.
    """

    def __init__(self, cell, num_inputs, num_hiddens, num_layers=1, bidirectional=False, dropout=0.0,
                 reset_after=None, native=None):
        decl = _declaration()
        self.wrapped = native is not None  # a layer the reader built
        if reset_after is None:
            reset_after = cell == "gru"
        super().__init__(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after)
        self.declaration = decl if decl is not None and decl.supports(self.cell.name, self.cell.reset_after) \
            else None
        if native is None and self.declaration is not None:
            native = self.declaration.build(self.cell.name, self.num_inputs, self.num_hiddens,
                                            self.num_layers, self.bidirectional, self.dropout,
                                            self.cell.reset_after)
        self.native = native

    @classmethod
    def wrap(cls, native, num_inputs, inputs=None):
        """A layer the reader built (``torch.nn.GRU(...)``, ``keras.layers.LSTM(...)``, ...), checked:
        it must read ``num_inputs`` features (``inputs`` says where they come from, for the error)."""
        decl = _declaration()
        if decl is None:
            raise ArgumentError(f"the {backend_name()} backend has no framework layers to wrap: pass "
                                "d2l.rnn_layer(...) or use d2l.make_model('scratch', ...)")
        config, unsupported = decl.describe(native)
        if config is None:
            raise ArgumentError(f"RNNModel cannot use {type(native).__name__}: pass the framework's RNN, GRU "
                                f"or LSTM layer ({decl.layer_names})")
        if unsupported:
            raise ArgumentError(f"RNNModel does not support {type(native).__name__} with "
                                f"{', '.join(unsupported)}: build the layer without "
                                f"{'these settings' if len(unsupported) > 1 else 'it'}")
        if config["num_inputs"] not in (None, num_inputs):
            given = inputs or f"the vocabulary has {num_inputs} tokens"
            raise ArgumentError(f"the layer takes {config['num_inputs']} inputs but {given}: build it with "
                                f"input size {'len(vocab)' if inputs is None else num_inputs}")
        layer = cls(config["cell"], num_inputs, config["num_hiddens"], config["num_layers"],
                    config["bidirectional"], config["dropout"], config["reset_after"],
                    native=decl.prepare(native, num_inputs))
        return layer

    def compile_key(self):
        """As :meth:`RecurrentStack.compile_key`; None for a layer the reader built (it may have settings
        of its own)."""
        key = super().compile_key()
        return None if key is None or self.wrapped else key + (self.declaration is not None,)

    def pack(self, params):
        """One layer-direction's parameters in the native layout ``[W_x, W_h, b_x, b_h]``.

        The gates are concatenated in the framework's order; ``b_h`` is the recurrent bias, zero
        except for the reset-after GRU's candidate (``b_hh``).
        """
        by_name = dict(zip(self.cell.names, params))
        order = self.declaration.gate_order[self.cell.name]
        # transposed: each gate's W^T stacked along the first axis, one copy laid out as the layer reads it
        laid_out, axis = (ops.transpose, 0) if self.declaration.transposed else ((lambda W: W), 1)
        W_x = _joined([laid_out(by_name[f"W_x{g}"]) for g in order], axis)
        W_h = _joined([laid_out(by_name[f"W_h{g}"]) for g in order], axis)
        b_x = _joined([by_name[f"b_{g}"] for g in order], 0)
        b_h = _joined([by_name["b_hh"] if g == "h" and self.cell.reset_after
                       else ops.zeros_like(by_name[f"b_{g}"]) for g in order], 0)
        return [W_x, W_h, b_x, b_h]

    def unpack(self, weights):
        """The book's per-gate parameters (in :meth:`split` order) of native ``[W_x, W_h, b_x, b_h]``
        per layer-direction, :meth:`pack`'s inverse for the same function: a gate's two biases become one
        ``b_g = b_x + b_h`` (the reset-after GRU's candidate keeps ``b_hh`` apart, multiplied by r)."""
        params = []
        for W_x, W_h, b_x, b_h in weights:
            if self.declaration.transposed:
                W_x, W_h = ops.transpose(W_x), ops.transpose(W_h)
            h, by_name = self.num_hiddens, {}
            for i, g in enumerate(self.declaration.gate_order[self.cell.name]):
                gate = slice(i * h, (i + 1) * h)
                by_name[f"W_x{g}"], by_name[f"W_h{g}"] = W_x[:, gate], W_h[:, gate]
                if g == "h" and self.cell.reset_after:
                    by_name[f"b_{g}"], by_name["b_hh"] = b_x[gate], b_h[gate]
                else:
                    by_name[f"b_{g}"] = b_x[gate] + b_h[gate]
            params.extend(by_name[name] for name in self.cell.names)
        return params

    def own_params(self):
        """The wrapped framework layer's own weights in the book's layout, or None where the backend
        cannot read them (or the layer has not made them yet)."""
        if self.declaration is None or self.declaration.weights is None or self.native is None:
            return None
        weights = self.declaration.weights(self.native)
        return None if weights is None else self.unpack(weights)

    def layer_params(self, params):
        """The native layout of every layer and direction: a list of ``[W_x, W_h, b_x, b_h]``
        (the book's per-slot parameter lists where the framework has no layer of its own)."""
        slots = self.split(params, len(self.cell.names))
        return slots if self.declaration is None else [self.pack(p) for p in slots]

    def forward(self, params, X, state, training=False, masks=None):
        if self.native is None:
            return super().forward(params, X, state, training, masks)
        if masks is not None and training and self.dropout and self.num_layers > 1:
            raise ArgumentError(LOCKED_BETWEEN_NATIVE)
        if len(ops.shape(X)) == 2:  # token indices: framework layers take one-hot rows
            X = ops.one_hot(X, self.num_inputs)
        weights = self.layer_params(params)
        states = [tuple(s) for s in self.split(state, len(self.cell.state_names))]
        call = self.declaration.call
        if self.declaration.stacks_layers:
            Y, new_states = call(self.native, weights, X, states, training)
        else:  # one framework layer per layer (Keras): stack them here, with dropout between
            D, new_states = self.num_directions, []
            for layer, native in enumerate(self.native):
                X, s = call(native, weights[layer * D:(layer + 1) * D], X, states[layer * D:(layer + 1) * D],
                            training)
                new_states.extend(s)
                if training and self.dropout and layer < self.num_layers - 1:
                    X = ops.dropout(X, self.dropout)
            Y = X
        return Y, tuple(s for slot in new_states for s in slot)


def rnn_layer(num_inputs, num_hiddens, cell="rnn", num_layers=1, bidirectional=False, dropout=0.0,
              reset_after=None):
    """The active framework's own recurrent layer for :class:`RNNModel` (the cell's recurrence on NumPy)."""
    return NativeLayer(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after)
