"""A recurrent neural network language model from scratch, written once for every backend.

The hidden state follows

    H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h)
    O_t = H_t W_hq + b_q

with one-hot inputs X_t. :func:`rnn_textbook` is that equation line by line, as the
chapter presents it. :func:`rnn` computes the same numbers faster: a one-hot row times
``W_xh`` is just a row of ``W_xh``, so token indices select rows instead of multiplying,
the bias is added to the vocab-sized ``W_xh`` once before gathering, and the output layer
runs once on all time steps instead of once per step.
"""

from .. import checks, ops
from .bptt import rnn_tanh_scan


def get_params(vocab_size, num_hiddens, device=None):
    """The five parameters ``[W_xh, W_hh, b_h, W_hq, b_q]``: weights ~ N(0, 0.01^2), zero biases.

    Drawn from d2lrnn's NumPy generator, so every backend starts from the same numbers.
    """
    num_inputs = num_outputs = vocab_size

    def normal(shape):
        return ops.normal(0, 0.01, shape, device=device)

    W_xh = normal((num_inputs, num_hiddens))
    W_hh = normal((num_hiddens, num_hiddens))
    b_h = ops.zeros(num_hiddens, device=device)
    W_hq = normal((num_hiddens, num_outputs))
    b_q = ops.zeros(num_outputs, device=device)
    return [W_xh, W_hh, b_h, W_hq, b_q]


def init_rnn_state(batch_size, num_hiddens, device=None):
    """The initial hidden state: a tuple holding one (batch_size, num_hiddens) matrix of zeros."""
    return (ops.zeros((batch_size, num_hiddens), device=device),)


def rnn_textbook(inputs, state, params):
    """The chapter's RNN step by step: ``inputs`` is one-hot, shape (num_steps, batch, vocab).

    H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h),  Y_t = H_t W_hq + b_q.
    Returns (Y of shape (num_steps * batch, vocab), (H,)).
    """
    W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in ops.unstack(inputs):
        H = ops.tanh(ops.matmul(X, W_xh) + ops.matmul(H, W_hh) + b_h)
        Y = ops.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return ops.concat(outputs, 0), (H,)


def rnn(inputs, state, params):
    """The same model as :func:`rnn_textbook`, computed faster; ``inputs`` may be token indices.

    With indices of shape (num_steps, batch), X_t W_xh is ``W_xh[X_t]`` (a row gather); with
    one-hot inputs (num_steps, batch, vocab) it is one matmul for all steps before the loop.
    The recurrence runs with a hand-written backward pass (:mod:`d2lrnn.models.bptt`), and the
    output layer is one matmul over all steps after it.
    """
    W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    if len(ops.shape(inputs)) == 2:
        # One-hot row x_t picks row x_t of W_xh, and b_h is added to every row: adding it to the
        # vocab-sized W_xh before gathering gives the same numbers, and its gradient sums
        # vocab rows instead of num_steps * batch rows.
        XW = ops.take(W_xh + b_h, inputs)
    else:
        T, B, V = ops.shape(inputs)
        XW = ops.reshape(ops.matmul(ops.reshape(inputs, (T * B, V)), W_xh), (T, B, -1)) + b_h
    Hs, H = rnn_tanh_scan(XW, H, W_hh)
    T, B, h = ops.shape(Hs)
    return ops.matmul(ops.reshape(Hs, (T * B, h)), W_hq) + b_q, (H,)


rnn.accepts_indices = True


class RNNModelScratch:
    """An RNN language model from scratch (the book's ``RNNModelScratch``).

    ``net(X, state)`` takes token indices X of shape (batch, num_steps) and returns
    ``(Y, state)`` with Y of shape (num_steps * batch, vocab_size). The parameters are a
    plain list, ``net.params``; training replaces the list with new tensors.
    """

    kind = "rnn_scratch"

    def __init__(self, vocab_size, num_hiddens, device=None, get_params=get_params,
                 init_state=init_rnn_state, forward_fn=rnn):
        vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
        num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 512)")
        self.vocab_size, self.num_hiddens, self.device = vocab_size, num_hiddens, device
        self.params = get_params(vocab_size, num_hiddens, device)
        self.init_state, self.forward_fn = init_state, forward_fn

    def forward(self, params, X, state):
        """Run the model with the given ``params`` (what ``value_and_grad`` differentiates)."""
        if getattr(self.forward_fn, "accepts_indices", False):
            inputs = ops.transpose(X)
        else:
            inputs = ops.one_hot(ops.transpose(X), self.vocab_size)
        return self.forward_fn(inputs, state, params)

    def __call__(self, X, state):
        return self.forward(self.params, X, state)

    def begin_state(self, batch_size, device=None):
        """A fresh (zero) state for ``batch_size`` sequences."""
        return self.init_state(batch_size, self.num_hiddens, device)

    def scratch_params(self):
        """The parameters in the from-scratch layout ``[W_xh, W_hh, b_h, W_hq, b_q]``."""
        return list(self.params)

    def load_scratch_params(self, params):
        """Set the parameters from the from-scratch layout (used by checkpoints)."""
        self.params = list(params)
