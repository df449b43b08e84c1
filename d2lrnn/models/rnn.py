"""The recurrent neural network (tanh RNN) cell: the book's step, and the fast form used for training.

    H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h)
    O_t = H_t W_hq + b_q

with one-hot inputs X_t. :func:`rnn_textbook` is that equation line by line, as the chapter
presents it. :func:`rnn_scan` computes the same hidden states faster: the input projection
X_t W_xh + b_h of every step is one gather (or one matmul) before the loop, and the loop runs
with a hand-written backward pass (:mod:`d2lrnn.models.bptt`). :func:`rnn` adds the output layer,
once for all steps.
"""

from .. import ops
from .bptt import rnn_tanh_scan
from .cell import Cell, init_param, input_projection


def get_params(vocab_size, num_hiddens, device=None):
    """The five parameters ``[W_xh, W_hh, b_h, W_hq, b_q]``: weights ~ N(0, 0.01^2), zero biases.

    Drawn from d2lrnn's NumPy generator, so every backend starts from the same numbers.
    """
    return CELL.init_params(vocab_size, num_hiddens, device) + output_params(num_hiddens, vocab_size, device)


get_params.cell = "rnn"


def output_params(num_hiddens, num_outputs, device=None, init="normal"):
    """The output layer ``[W_hq, b_q]``: W_hq ~ N(0, 0.01^2) and b_q zero (the book's), or both
    ~ U(-1/sqrt(num_hiddens), 1/sqrt(num_hiddens)) with ``init='uniform'``."""
    return [init_param((num_hiddens, num_outputs), init, num_hiddens, device),
            init_param((num_outputs,), init, num_hiddens, device)]


def output_layer(Hs, W_hq, b_q):
    """O_t = H_t W_hq + b_q for every step at once: (num_steps * batch, outputs), step-major."""
    T, B, h = ops.shape(Hs)
    return ops.dense(ops.reshape(Hs, (T * B, h)), W_hq, b_q)


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


def rnn_scan(X, state, params):
    """All hidden states of one tanh RNN layer: ``(Hs, (H_T,))`` for inputs X (see :mod:`.cell`)."""
    W_xh, W_hh, b_h = params
    (H,) = state
    Hs, H = rnn_tanh_scan(input_projection(X, W_xh, b_h), H, W_hh)
    return Hs, (H,)


def rnn(inputs, state, params):
    """The same model as :func:`rnn_textbook`, computed faster; ``inputs`` may be token indices.

    With indices of shape (num_steps, batch), X_t W_xh is ``W_xh[X_t]`` (a row gather); with
    one-hot inputs (num_steps, batch, vocab) it is one matmul for all steps before the loop.
    """
    Hs, state = rnn_scan(inputs, state, params[:-2])
    return output_layer(Hs, *params[-2:]), state


rnn.accepts_indices = True
rnn.cell = "rnn"

CELL = Cell("rnn", "h", ("H",), rnn_scan)
