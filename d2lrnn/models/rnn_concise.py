"""The concise RNN language model: the framework's own recurrent layer plus an output layer.

``rnn_layer(len(vocab), num_hiddens)`` is ``torch.nn.RNN``, ``keras.layers.SimpleRNN`` or
``mxnet.gluon.rnn.RNN`` depending on the backend (on NumPy, the scratch recurrence), and
:class:`RNNModel` puts it behind the same interface as :class:`RNNModelScratch`, so the same
training, prediction and checkpoint code serves both.
"""

from .. import checks, ops
from .rnn_scratch import get_params


def rnn_layer(num_inputs, num_hiddens):
    """The active framework's own one-layer tanh RNN, wrapped for :class:`RNNModel`."""
    return ops.rnn_layer(num_inputs, num_hiddens)


class RNNModel:
    """An RNN language model on the framework's recurrent layer (the book's ``RNNModel``).

    O_t = H_t W_hq + b_q on top of the layer's hidden states H_t; inputs are one-hot. The
    parameters are kept in the scratch layout ``[W_xh, W_hh, b_h, W_hq, b_q]`` and start from
    the same draw (``get_params``); ``forward`` maps them to the layer's layout (transposes, and
    a zero second bias on torch and MXNet) inside the differentiated function. So SGD updates the
    same five tensors as the scratch model, on every backend, and only the kernel differs.
    """

    kind = "rnn_concise"

    def __init__(self, rnn_layer, vocab_size, device=None):
        vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
        if not hasattr(rnn_layer, "from_scratch"):  # a framework layer the reader built
            rnn_layer = ops.rnn_layer(vocab_size, None, native=rnn_layer)
        self.rnn, self.vocab_size, self.device = rnn_layer, vocab_size, device
        self.num_hiddens = rnn_layer.num_hiddens
        self.params = get_params(vocab_size, self.num_hiddens, device)

    def forward(self, params, X, state):
        """Run the model with the given ``params`` ``[W_xh, W_hh, b_h, W_hq, b_q]``."""
        W_xh, W_hh, b_h, W_hq, b_q = params
        layer_params = self.rnn.from_scratch(W_xh, W_hh, b_h)
        Y, H = self.rnn.forward(layer_params, ops.one_hot(ops.transpose(X), self.vocab_size), state[0])
        T, B, h = ops.shape(Y)
        return ops.matmul(ops.reshape(Y, (T * B, h)), W_hq) + b_q, (H,)

    def __call__(self, X, state):
        return self.forward(self.params, X, state)

    def begin_state(self, batch_size, device=None):
        """A fresh (zero) state for ``batch_size`` sequences."""
        return (ops.zeros((batch_size, self.num_hiddens), device=device),)

    def layer_params(self):
        """The recurrent layer's weights in its own layout (e.g. torch's ``weight_ih_l0``, ...)."""
        return self.rnn.from_scratch(*self.params[:3])

    def scratch_params(self):
        """The parameters in the from-scratch layout ``[W_xh, W_hh, b_h, W_hq, b_q]``."""
        return list(self.params)

    def load_scratch_params(self, params):
        """Set the parameters from the from-scratch layout (used by checkpoints)."""
        self.params = list(params)
