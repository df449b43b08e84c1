"""Language models: a recurrent layer (any cell, layers, directions) plus an output layer.

Every model has ``params`` (a flat list of tensors) and ``param_names`` (the same length),
``forward(params, X, state, training=False)``, ``net(X, state)``, ``begin_state(batch_size,
device)``, ``vocab_size``, ``num_hiddens``, ``kind`` and ``config()`` (what a checkpoint needs to
rebuild it). ``X`` holds token indices (batch, num_steps); the output is
(num_steps * batch, vocab_size), step-major, as in the book.

- :class:`RNNModelScratch` is the book's class: any ``get_params`` / ``init_state`` /
  ``forward_fn``, the book's or the reader's.
- :class:`StackedRNNModelScratch` runs a cell from scratch over layers and directions.
- :class:`RNNModel` is the book's concise class, on the framework's own layer.

The parameters are always in the book's layout (per-gate ``W_x*``, ``W_h*``, ``b_*``, then ``W_hq``,
``b_q``), so the same SGD step, checkpoints and parity tests serve every model and backend.
"""

import numpy as np

from .. import checks, ops
from ..backends import checked_indices, generator
from ..errors import ArgumentError
from ..keys import device_key, from_d2lrnn, own
from ..models import NativeLayer, RecurrentStack, get_cell, rnn_layer
from ..models.native import LOCKED_BETWEEN_NATIVE
from ..models.rnn import get_params, init_rnn_state, output_layer, output_params, rnn
from ..models.stack import check_dropout


def _named(net):
    return dict(zip(net.param_names, net.params, strict=True))


class _LanguageModel:
    """What every model shares: calling, named parameters, the book-layout accessors."""

    def __call__(self, X, state, params=None):
        """``(Y, new_state)`` for token indices ``X`` (batch, num_steps), each checked to be in the
        vocabulary (``forward``, what compiled steps run, takes them unchecked)."""
        X = checked_indices("X", X, self.vocab_size)
        return self.forward(self.params if params is None else params, X, state)

    def named_params(self):
        """``{name: tensor}`` in order: ``W_xh``, ..., ``l1.W_xh``, ..., ``W_hq``, ``b_q``."""
        return _named(self)

    def scratch_params(self):
        """The parameters in the book's layout (what checkpoints store), as a new list."""
        return list(self.params)

    def load_scratch_params(self, params):
        """Set the parameters from the book's layout (used by checkpoints)."""
        params = list(params)
        if len(params) != len(self.params):
            raise ArgumentError(f"expected {len(self.params)} parameters ({', '.join(self.param_names)}), "
                                f"got {len(params)}")
        self.params = params


class _LayerModel(_LanguageModel):
    """A recurrent layer (a :class:`RecurrentStack`) with the output layer O_t = H_t W_hq + b_q on top.

    Regularization in training (AWD-LSTM's, Merity et al. 2017): ``locked_dropout`` draws the input,
    between-layer and output dropout masks once per sequence, the same at every step, instead of per
    unit and step; ``weight_drop`` drops entries of every recurrent weight ``W_h*`` (DropConnect), one
    mask per minibatch. These masks are inputs of ``forward`` (:meth:`draw_masks`), drawn outside the
    compiled step from a NumPy generator, so every backend drops the same numbers.
    """

    def __init__(self, layer, vocab_size, device=None, input_dropout=0.0, output_dropout=0.0, init="normal",
                 locked_dropout=False, weight_drop=0.0):
        self.layer, self.vocab_size, self.device = layer, vocab_size, device
        self.num_hiddens = layer.num_hiddens
        self.input_dropout = check_dropout(input_dropout, "input_dropout")
        self.output_dropout = check_dropout(output_dropout, "output_dropout")
        if not isinstance(locked_dropout, bool):
            raise ArgumentError(f"locked_dropout is {locked_dropout!r}: use True (one dropout mask per "
                                "sequence) or False (--locked-dropout)")
        self.locked_dropout = locked_dropout
        self.weight_drop = check_dropout(weight_drop, "weight_drop")
        self.params = (layer.init_params(device, init, token_inputs=True)
                       + output_params(layer.num_outputs, vocab_size, device, init))
        self.param_names = layer.names + ("W_hq", "b_q")

    def mask_shapes(self, batch_size):
        """``{name: (shape, p)}`` of the masks one minibatch of ``batch_size`` sequences trains with, in
        the order :meth:`forward` takes them: with ``locked_dropout``, 'input' (batch, vocab), 'l1', ...
        between the layers and 'output' (batch, num_outputs); with ``weight_drop``, one (h, h) mask per
        recurrent weight, under the weight's name ('W_hh', 'l1.rev.W_hz', ...)."""
        shapes, F = {}, self.layer.num_outputs
        if self.locked_dropout:
            if self.input_dropout:
                shapes["input"] = ((batch_size, self.vocab_size), self.input_dropout)
            if self.layer.dropout:
                shapes.update({f"l{i}": ((batch_size, F), self.layer.dropout)
                               for i in range(1, self.layer.num_layers)})
            if self.output_dropout:
                shapes["output"] = ((batch_size, F), self.output_dropout)
        if self.weight_drop:
            h = self.num_hiddens
            shapes.update({name: ((h, h), self.weight_drop) for name in self.layer.names
                           if name.rpartition(".")[2].startswith("W_h")})
        return shapes

    @property
    def regularized(self):
        """Whether training draws masks (:meth:`draw_masks`) for ``forward``."""
        return bool(self.mask_shapes(1))

    def draw_masks(self, batch_size, rng):
        """The masks of one minibatch (see :meth:`mask_shapes`), drawn from the NumPy generator ``rng``:
        a tuple of float32 tensors, each entry 0 with probability p and 1 / (1 - p) otherwise."""
        masks = []
        for shape, p in self.mask_shapes(batch_size).values():
            keep = rng.random(shape) >= p
            masks.append(ops.from_numpy((keep / (1 - p)).astype(np.float32), device=self.device))
        return tuple(masks)

    def forward(self, params, X, state, training=False, masks=None):
        """Run the model with the given ``params`` (what ``value_and_grad`` differentiates).

        In training, ``input_dropout`` drops whole input tokens (their one-hot vectors, the kept ones
        scaled by 1 / (1 - p)) and ``output_dropout`` drops units of the last layer's output before
        the output layer; the layer's own ``dropout`` acts between its layers. With ``locked_dropout``
        each of these multiplies every step by one mask per sequence (on the inputs, a (batch, vocab)
        mask drops token types for the whole sequence: embedding dropout), and ``weight_drop`` uses
        W_h* * M for every recurrent weight: the cell sees the masked weight, so a dropped entry gets no
        gradient. ``masks`` are :meth:`draw_masks`'s (drawn here from d2lrnn's generator if not given).
        """
        X = ops.to_device(X, self.device)  # as the book's X.to(device): the iterators make it on the CPU
        drop = {}  # the masks by name (mask_shapes)
        if training and self.regularized:
            if masks is None:  # an eager call: a compiled step gets them as inputs (lm.train.lm_objective)
                masks = self.draw_masks(ops.shape(X)[0], generator())
            drop = dict(zip(self.mask_shapes(1), masks))
        X = ops.transpose(X)
        if training and self.input_dropout:
            X = ops.one_hot(X, self.vocab_size)
            X = X * drop["input"] if "input" in drop else ops.dropout(X, self.input_dropout)
        layer_params = params[:-2]
        if training and self.weight_drop:
            layer_params = [p * drop[name] if name in drop else p
                            for name, p in zip(self.layer.names, layer_params)]
        between = [drop[f"l{i}"] for i in range(1, self.layer.num_layers)] if "l1" in drop else None
        Hs, state = self.layer.forward(layer_params, X, state, training, between)
        if training and self.output_dropout:
            Hs = Hs * drop["output"] if "output" in drop else ops.dropout(Hs, self.output_dropout)
        return output_layer(Hs, *params[-2:]), state

    def begin_state(self, batch_size, device=None):
        """A fresh (zero) state for ``batch_size`` sequences."""
        return self.layer.begin_state(batch_size, device)

    def compile_key(self):
        """What :meth:`forward` computes besides its arguments (``ops.compile``'s ``key``): the class, the
        layer's key, every setting and the device; None for a reader's subclass or layer."""
        layer = self.layer.compile_key()
        if layer is None or not own(self):
            return None
        return (type(self), layer, self.vocab_size, self.input_dropout, self.output_dropout,
                self.locked_dropout, self.weight_drop, device_key(self.device))

    def config(self):
        """The settings that rebuild this model (see :func:`d2lrnn.models.make_model`)."""
        layer = self.layer
        return {"kind": self.kind, "cell": layer.cell.name, "vocab_size": self.vocab_size,
                "num_hiddens": self.num_hiddens, "num_layers": layer.num_layers,
                "bidirectional": layer.bidirectional, "dropout": layer.dropout,
                "reset_after": layer.cell.reset_after, "input_dropout": self.input_dropout,
                "output_dropout": self.output_dropout, "locked_dropout": self.locked_dropout,
                "weight_drop": self.weight_drop}


class StackedRNNModelScratch(_LayerModel):
    """A language model on ``num_layers`` layers of ``cell`` ('rnn', 'gru', 'lstm') from scratch.

    ``bidirectional`` runs each layer in both directions; ``dropout`` acts between layers during
    training, ``input_dropout`` on the input tokens and ``output_dropout`` before the output layer,
    with ``locked_dropout`` one mask per sequence; ``weight_drop`` drops recurrent weights;
    ``reset_after`` picks the GRU's cuDNN form (the book's form by default); ``init`` the starting
    weights, 'normal' (the book's) or 'uniform' (see :func:`d2lrnn.models.cell.init_param`).
    """

    kind = "scratch"

    def __init__(self, vocab_size, num_hiddens, cell="rnn", num_layers=1, bidirectional=False, dropout=0.0,
                 reset_after=False, device=None, input_dropout=0.0, output_dropout=0.0, init="normal",
                 locked_dropout=False, weight_drop=0.0):
        vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
        layer = RecurrentStack(cell, vocab_size, num_hiddens, num_layers, bidirectional, dropout, reset_after)
        super().__init__(layer, vocab_size, device, input_dropout, output_dropout, init, locked_dropout,
                         weight_drop)


class RNNModel(_LayerModel):
    """The book's concise model: ``RNNModel(rnn_layer, vocab_size)`` on the framework's own layer.

    ``rnn_layer`` is what :func:`d2lrnn.rnn_layer` returns, or a layer the reader built with the
    framework (``torch.nn.GRU(len(vocab), 256, num_layers=2)``, ``keras.layers.LSTM(256)``,
    ``gluon.rnn.RNN(256)``, ...). The model draws its own starting weights from d2lrnn's generator
    (the same numbers on every backend) and keeps them in the book's layout; the layer computes
    with them, mapped to its own layout inside the differentiated function: by default the book's
    N(0, 0.01^2), or with ``init='uniform'`` the frameworks' (see :func:`d2lrnn.models.cell.init_param`).
    """

    kind = "concise"

    def __init__(self, rnn_layer, vocab_size, device=None, input_dropout=0.0, output_dropout=0.0,
                 init="normal", locked_dropout=False, weight_drop=0.0):
        vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
        if not isinstance(rnn_layer, RecurrentStack):  # a framework layer the reader built
            rnn_layer = NativeLayer.wrap(rnn_layer, vocab_size)
        elif rnn_layer.num_inputs != vocab_size:
            raise ArgumentError(f"the layer takes {rnn_layer.num_inputs} inputs but the vocabulary has "
                                f"{vocab_size} tokens: build it with d2l.rnn_layer(len(vocab), ...)")
        if locked_dropout is True and rnn_layer.dropout and rnn_layer.num_layers > 1:
            raise ArgumentError(LOCKED_BETWEEN_NATIVE)
        super().__init__(rnn_layer, vocab_size, device, input_dropout, output_dropout, init, locked_dropout,
                         weight_drop)
        self.rnn = rnn_layer

    def layer_params(self):
        """The recurrent layer's weights in its own layout, ``[W_x, W_h, b_x, b_h]`` per layer-direction."""
        return self.rnn.layer_params(self.params[:-2])


class RNNModelScratch(_LanguageModel):
    """An RNN language model from scratch (the book's ``RNNModelScratch``).

    ``net(X, state)`` takes token indices X of shape (batch, num_steps) and returns
    ``(Y, state)`` with Y of shape (num_steps * batch, vocab_size). ``forward_fn(inputs, state,
    params)`` gets one-hot inputs (num_steps, batch, vocab_size) as in the book, or token indices
    when it says it accepts them (``forward_fn.accepts_indices``, as d2lrnn's fast ``rnn``,
    ``gru`` and ``lstm`` do). The parameters are a plain list, ``net.params``; training replaces
    the list with new tensors.
    """

    def __init__(self, vocab_size, num_hiddens, device=None, get_params=get_params,
                 init_state=init_rnn_state, forward_fn=rnn):
        vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
        num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 512)")
        self.vocab_size, self.num_hiddens, self.device = vocab_size, num_hiddens, device
        self.params = list(get_params(vocab_size, num_hiddens, device))
        self.init_state, self.forward_fn = init_state, forward_fn
        self.cell = self._cell(get_params, len(self.params))
        if self.cell is not None:
            self.param_names = self.cell.names + ("W_hq", "b_q")
        else:  # the reader's own functions: positional names
            self.param_names = tuple(f"param{i}" for i in range(len(self.params)))
        self.kind = "scratch" if self.cell is not None else "custom"

    @staticmethod
    def _cell(get_params, count):
        """The d2lrnn cell behind ``get_params`` (if it is one of d2lrnn's), in the form its count implies."""
        name = getattr(get_params, "cell", None)
        if name is None:
            return None
        for reset_after in (False, True):
            if name == "gru" or not reset_after:
                cell = get_cell(name, reset_after)
                if len(cell.names) + 2 == count:
                    return cell
        return None

    def forward(self, params, X, state, training=False):
        """Run the model with the given ``params`` (what ``value_and_grad`` differentiates)."""
        X = ops.to_device(X, self.device)  # as the book's X.to(device): the iterators make it on the CPU
        if getattr(self.forward_fn, "accepts_indices", False):
            inputs = ops.transpose(X)
        else:
            inputs = ops.one_hot(ops.transpose(X), self.vocab_size)
        return self.forward_fn(inputs, state, params)

    def begin_state(self, batch_size, device=None):
        """A fresh (zero) state for ``batch_size`` sequences: ``init_state(batch_size, num_hiddens,
        device)``."""
        return self.init_state(batch_size, self.num_hiddens, device)

    def compile_key(self):
        """What :meth:`forward` computes besides its arguments (``ops.compile``'s ``key``), where the forward
        function is one of d2lrnn's: it, the vocabulary size and the device; None for the reader's own."""
        if not (own(self) and from_d2lrnn(self.forward_fn)):
            return None
        return (type(self), self.forward_fn, self.vocab_size, device_key(self.device))

    def config(self):
        """The settings that rebuild this model, if it is built from d2lrnn's own functions."""
        if self.cell is None:
            return {"kind": "custom", "vocab_size": self.vocab_size, "num_hiddens": self.num_hiddens}
        return {"kind": "scratch", "cell": self.cell.name, "vocab_size": self.vocab_size,
                "num_hiddens": self.num_hiddens, "num_layers": 1, "bidirectional": False, "dropout": 0.0,
                "reset_after": self.cell.reset_after, "input_dropout": 0.0, "output_dropout": 0.0,
                "locked_dropout": False, "weight_drop": 0.0}


#: Model kinds of format-1 checkpoints, before cells and layers.
_OLD_KINDS = {"rnn_scratch": "scratch", "rnn_concise": "concise"}


def make_model(kind, vocab_size, num_hiddens, device=None, cell="rnn", num_layers=1, bidirectional=False,
               dropout=0.0, reset_after=None, input_dropout=0.0, output_dropout=0.0, init="normal",
               locked_dropout=False, weight_drop=0.0):
    """A fresh language model.

    ``kind`` is 'scratch' (the cell's own equations) or 'concise' (the framework's layer, where
    the backend has one); ``cell`` is 'rnn', 'gru' or 'lstm'. ``reset_after`` picks the GRU's form:
    by default the book's for 'scratch' and the frameworks' (cuDNN) form for 'concise'. In
    training, ``dropout`` acts between recurrent layers, ``input_dropout`` on the input tokens and
    ``output_dropout`` before the output layer; ``locked_dropout`` draws these three masks once per
    sequence (the same at every step), and ``weight_drop`` drops entries of the recurrent weights
    ``W_h*``, one mask per minibatch (DropConnect). ``init`` draws the starting weights: 'normal', the book's
    N(0, 0.01^2) with zero biases, or 'uniform', the frameworks' U(-1/sqrt(h), 1/sqrt(h)) with the rows
    that tokens pick at an embedding's scale (:func:`d2lrnn.models.cell.init_param`).
    """
    kind = _OLD_KINDS.get(kind, kind)
    vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
    num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 512)")
    if kind == "scratch":
        return StackedRNNModelScratch(vocab_size, num_hiddens, cell, num_layers, bidirectional, dropout,
                                      bool(reset_after), device, input_dropout, output_dropout, init,
                                      locked_dropout, weight_drop)
    if kind == "concise":
        layer = rnn_layer(vocab_size, num_hiddens, cell, num_layers, bidirectional, dropout, reset_after)
        return RNNModel(layer, vocab_size, device, input_dropout, output_dropout, init, locked_dropout,
                        weight_drop)
    raise ArgumentError(f"unknown model {kind!r}: choose 'scratch' or 'concise'")


def num_params(vocab_size, cell, num_hiddens, num_layers):
    """How many numbers the parameters of a model of ``cell`` hold (before it is built)."""
    G, h, L = {"rnn": 1, "gru": 3, "lstm": 4}.get(cell, 4), num_hiddens, num_layers
    layers = G * ((vocab_size + h + 1) * h + (L - 1) * (2 * h + 1) * h)
    return layers + vocab_size * h + vocab_size
