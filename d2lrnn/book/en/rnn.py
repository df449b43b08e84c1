"""The English 1.0 edition's recurrent models as classes: ``RNNScratch``, ``RNNLMScratch``, ``RNN``,
``RNNLM``, ``GRU``, and ``LinearRegression`` (the sequence section's model).

The scratch RNN keeps the book's parameters ``W_xh``, ``W_hh``, ``b_h`` as the module's own (trained in
place) and computes its hidden states with d2lrnn's RNN layer (:func:`d2lrnn.models.rnn.rnn_scan`);
``RNN`` and ``GRU`` hold the framework's own layer, built by the backend's ``native_rnn()`` declaration.
The classes derive from the framework's module class, so :func:`rnn_classes` makes them per backend.
"""

from ... import ops
from ...models.rnn import rnn_scan
from .base import hooks_for


class RNNScratchMethods:
    """H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h), weights ~ N(0, sigma^2), zero bias."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        self.save_hyperparameters()
        parameter = hooks_for("parameter").parameter
        self.W_xh = parameter(ops.normal(0, 1, (num_inputs, num_hiddens)) * sigma)
        self.W_hh = parameter(ops.normal(0, 1, (num_hiddens, num_hiddens)) * sigma)
        self.b_h = parameter(ops.zeros((num_hiddens,)))

    def forward(self, inputs, state=None):
        """``(outputs, H)`` for time-major ``inputs`` (num_steps, batch, num_inputs): ``outputs`` is the list
        of every step's H_t; ``state`` is None (zeros) or the one-tuple ``(H,)``."""
        if state is None:
            H = ops.zeros((ops.shape(inputs)[1], self.num_hiddens), device=ops.device_of(inputs))
        else:
            (H,) = state
            H = ops.reshape(H, (-1, self.num_hiddens))
        # the parameters read as tensors here, outside the layer's hand-written gradient (TensorFlow refuses
        # a Keras 3 variable first read inside a custom gradient)
        params = [ops.reshape(p, ops.shape(p)) for p in (self.W_xh, self.W_hh, self.b_h)]
        Hs, (H,) = rnn_scan(inputs, (H,), params)
        return list(ops.unstack(ops.reshape(Hs, (ops.shape(inputs)[0], -1, self.num_hiddens)))), H


class ScratchLMOutputs:
    """What the scratch language model computes on every framework: one-hot inputs, the scratch RNN over
    them, and O_t = H_t W_hq + b_q at every step, batch-major."""

    def one_hot(self, X):
        """The one-hot inputs, time-major: (num_steps, batch, vocab_size) for X of shape
        (batch, num_steps)."""
        return ops.one_hot(ops.transpose(X), self.vocab_size)

    def output_layer(self, rnn_outputs):
        """The logits (batch, num_steps, vocab_size) of the list of hidden states."""
        return ops.stack([ops.matmul(H, self.W_hq) + self.b_q for H in rnn_outputs], 1)

    def forward(self, X, state=None):
        rnn_outputs, _ = self.rnn(self.one_hot(X), state)
        return self.output_layer(rnn_outputs)


class RNNLMScratchMethods(ScratchLMOutputs):
    """A character language model over an RNN: one-hot inputs, the RNN, O_t = H_t W_hq + b_q; trained by
    cross-entropy and reported as perplexity."""

    def __init__(self, rnn, vocab_size, lr=0.01):
        """``rnn``, ``vocab_size`` and ``lr`` kept as attributes, then the output layer made (``init_params``,
        which the concise ``RNNLM`` replaces)."""
        super().__init__()
        self.save_hyperparameters()
        self.init_params()

    def init_params(self):
        parameter = hooks_for("parameter").parameter
        self.W_hq = parameter(ops.normal(0, 1, (self.rnn.num_hiddens, self.vocab_size)) * self.rnn.sigma)
        self.b_q = parameter(ops.zeros((self.vocab_size,)))
        hooks = hooks_for("parameter")
        if hooks.scratch_params is not None:
            # where the framework registers no scratch parameter (MXNet), the reader's own RNN (GRU, LSTM
            # from scratch) keeps plain arrays: make every array of the model a trained parameter
            for p in hooks.scratch_params(self):
                parameter(p)

    def training_step(self, batch):
        return self._perplexity_drawn(batch, train=True)

    def validation_step(self, batch):
        self._perplexity_drawn(batch, train=False)

    def _perplexity_drawn(self, batch, train):
        """The loss on ``batch`` (inputs, then targets); its exponential, the perplexity, is drawn."""
        *inputs, targets = batch
        loss = self.loss(self(*inputs), targets)
        self.plot("ppl", ops.exp(loss), train=train)
        return loss

    def predict(self, prefix, num_preds, vocab, device=None):
        """``prefix`` followed by ``num_preds`` characters, each the most likely next one."""
        state, outputs = None, [vocab[prefix[0]]]
        for i in range(len(prefix) + num_preds - 1):
            X = ops.tensor([[outputs[-1]]], device=device)
            rnn_outputs, state = self.rnn(self.one_hot(X), state)
            if i < len(prefix) - 1:  # warm-up: feed the prefix
                outputs.append(vocab[prefix[i + 1]])
            else:
                Y = self.output_layer(rnn_outputs)
                outputs.append(int(ops.to_numpy(ops.argmax(Y, axis=2)).reshape(-1)[0]))
        return "".join(vocab.idx_to_token[i] for i in outputs)


class RNNMethods:
    """The framework's own RNN layer (``self.rnn``), one layer of ``num_hiddens`` (on PyTorch also told its
    ``num_inputs``, first)."""

    def __init__(self, num_inputs, num_hiddens):
        super().__init__()
        self.save_hyperparameters()
        self.rnn = _native_layer("rnn", num_inputs, num_hiddens, 1, 0.0)

    def forward(self, inputs, H=None):
        return hooks_for("run_layer").run_layer(self.rnn, inputs, H)


class RNNNoInputsMethods(RNNMethods):
    __doc__ = RNNMethods.__doc__

    def __init__(self, num_hiddens):
        super(RNNMethods, self).__init__()
        self.save_hyperparameters()
        self.rnn = _native_layer("rnn", None, num_hiddens, 1, 0.0)


def _native_layer(cell, num_inputs, num_hiddens, num_layers, dropout):
    hooks = hooks_for("run_layer")
    if hooks.book_layer is not None:  # the book's form of the framework's layer (Keras)
        return hooks.book_layer(cell, num_hiddens, num_layers, dropout)
    native = ops.native_rnn()
    return native.build(cell, num_inputs or 0, num_hiddens, num_layers, False, dropout, native.gru_forms[0])


class RNNLMMethods:
    """The language model over a framework RNN: its output layer is a framework dense layer."""

    def init_params(self):
        hooks = hooks_for("dense")
        self.linear = hooks.dense(self.vocab_size)
        if hooks.initialize is not None:  # the whole model's parameters, the RNN's too (Gluon)
            hooks.initialize(self)

    def output_layer(self, hiddens):
        """(batch, num_steps, vocab_size) logits of the time-major hidden states."""
        return ops.transpose(self.linear(hiddens), (1, 0, 2))


class GRUMethods:
    """The framework's own GRU, ``num_layers`` deep, dropout between layers (on PyTorch also told its
    ``num_inputs``, first)."""

    def __init__(self, num_inputs, num_hiddens, num_layers, dropout=0):
        self._init_module()
        self.save_hyperparameters()
        self.rnn = _native_layer("gru", num_inputs, num_hiddens, num_layers, dropout)


class GRUNoInputsMethods:
    __doc__ = GRUMethods.__doc__

    def __init__(self, num_hiddens, num_layers, dropout=0):
        self._init_module()
        self.save_hyperparameters()
        self.rnn = _native_layer("gru", None, num_hiddens, num_layers, dropout)


class LinearRegressionMethods:
    """y = X w + b with a framework dense layer, trained by the mean squared error. The weights start
    from N(0, 0.01^2) and the bias from zero as the book's do (on PyTorch, the lazy layer's own draw)."""

    def __init__(self, lr):
        super().__init__()
        self.save_hyperparameters()
        hooks = hooks_for("dense")
        self.net = hooks.dense(1, 0.01)
        if hooks.initialize is not None:
            hooks.initialize(self.net)

    def forward(self, X):
        return self.net(X)

    def loss(self, y_hat, y):
        """The mean of the framework's squared-error loss: (y_hat - y)^2, halved where that loss halves it
        (MXNet's)."""
        factor = hooks_for("dense").squared_loss_factor
        return ops.mean((y_hat - ops.reshape(y, ops.shape(y_hat))) ** 2) * factor

    def get_w_b(self):
        """The layer's weight and bias."""
        return tuple(ops.detach(p) for p in hooks_for("module_params").module_params(self.net))


def rnn_classes(Module, Classifier):  # noqa: N803 - class arguments
    """The recurrent model classes over the framework's ``Module`` and ``Classifier``."""

    def make(name, methods, base, doc=None):
        return type(name, (methods, base), {"__doc__": doc or methods.__doc__, "__module__": __name__})

    RNNScratch = make("RNNScratch", RNNScratchMethods, Module)
    RNNLMScratch = make("RNNLMScratch", RNNLMScratchMethods, Classifier)
    takes_inputs = hooks_for("run_layer").layer_inputs
    RNN = make("RNN", RNNMethods if takes_inputs else RNNNoInputsMethods, Module)
    RNNLM = make("RNNLM", RNNLMMethods, RNNLMScratch)
    GRU = make("GRU", GRUMethods if takes_inputs else GRUNoInputsMethods, RNN)
    # GRU skips RNN's __init__ (it builds its own layer): Module's initialisation, as the book calls it
    GRU._init_module = lambda self: Module.__init__(self)
    LinearRegression = make("LinearRegression", LinearRegressionMethods, Module)
    return {"RNNScratch": RNNScratch, "RNNLMScratch": RNNLMScratch, "RNN": RNN, "RNNLM": RNNLM, "GRU": GRU,
            "LinearRegression": LinearRegression}
