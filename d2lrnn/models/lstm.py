"""Long short-term memory (LSTM): the book's step, and the fast form used for training.

    I_t = sigmoid(X_t W_xi + H_{t-1} W_hi + b_i)       input gate
    F_t = sigmoid(X_t W_xf + H_{t-1} W_hf + b_f)       forget gate
    O_t = sigmoid(X_t W_xo + H_{t-1} W_ho + b_o)       output gate
    C~_t = tanh(X_t W_xc + H_{t-1} W_hc + b_c)         candidate memory
    C_t = F_t * C_{t-1} + I_t * C~_t                   memory cell
    H_t = O_t * tanh(C_t)

The state is the pair (H, C).
"""

from .. import ops
from .bptt import lstm_scan_fused
from .cell import Cell, input_projection
from .rnn import output_layer, output_params


def get_lstm_params(vocab_size, num_hiddens, device=None):
    """``[W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q]``:
    weights ~ N(0, 0.01^2), zero biases, drawn in that order."""
    return CELL.init_params(vocab_size, num_hiddens, device) + output_params(num_hiddens, vocab_size, device)


get_lstm_params.cell = "lstm"


def init_lstm_state(batch_size, num_hiddens, device=None):
    """The initial state (H, C): two (batch_size, num_hiddens) matrices of zeros."""
    return (ops.zeros((batch_size, num_hiddens), device=device),
            ops.zeros((batch_size, num_hiddens), device=device))


def lstm_textbook(inputs, state, params):
    """The chapter's LSTM step by step: ``inputs`` is one-hot, shape (num_steps, batch, vocab).

    Returns (Y of shape (num_steps * batch, vocab), (H, C)).
    """
    (W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q) = params
    H, C = state
    outputs = []
    for X in ops.unstack(inputs):
        I = ops.sigmoid(ops.matmul(X, W_xi) + ops.matmul(H, W_hi) + b_i)  # noqa: E741 - the book's name
        F = ops.sigmoid(ops.matmul(X, W_xf) + ops.matmul(H, W_hf) + b_f)
        O = ops.sigmoid(ops.matmul(X, W_xo) + ops.matmul(H, W_ho) + b_o)
        C_tilde = ops.tanh(ops.matmul(X, W_xc) + ops.matmul(H, W_hc) + b_c)
        C = F * C + I * C_tilde
        H = O * ops.tanh(C)
        Y = ops.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return ops.concat(outputs, 0), (H, C)


def _doubled_candidate(W_i, W_f, W_o, W_c, axis):
    """[W_i, W_f, W_o, 2 W_c] along ``axis``: the fast scan computes C~ = tanh(x) as 2 sigmoid(2x) - 1."""
    return ops.concat([W_i, W_f, W_o, W_c * 2.0], axis)


def lstm_scan(X, state, params):
    """All hidden states of one LSTM layer: ``(Hs, (H_T, C_T))``, see :mod:`.cell`.

    The four gates' input projections are one product (or one gather) before the loop; the loop
    itself, one recurrent product and one sigmoid per step for the four gates, runs with a
    hand-written backward pass (:func:`d2lrnn.models.bptt.lstm_scan_fused`).
    """
    W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c = params
    XW = input_projection(X, _doubled_candidate(W_xi, W_xf, W_xo, W_xc, 1),
                          _doubled_candidate(b_i, b_f, b_o, b_c, -1))  # biases: (h,) or (batch, h)
    H, C = state
    Hs, H, C = lstm_scan_fused(XW, H, C, _doubled_candidate(W_hi, W_hf, W_ho, W_hc, 1))
    return Hs, (H, C)


def lstm(inputs, state, params):
    """The same model as :func:`lstm_textbook`, computed faster; ``inputs`` may be token indices."""
    Hs, state = lstm_scan(inputs, state, params[:-2])
    return output_layer(Hs, *params[-2:]), state


lstm.accepts_indices = True
lstm.cell = "lstm"

CELL = Cell("lstm", "ifoc", ("H", "C"), lstm_scan)
