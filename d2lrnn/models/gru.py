"""The gated recurrent unit (GRU): the book's step, and the fast form used for training.

    Z_t = sigmoid(X_t W_xz + H_{t-1} W_hz + b_z)             update gate
    R_t = sigmoid(X_t W_xr + H_{t-1} W_hr + b_r)             reset gate
    H~_t = tanh(X_t W_xh + (R_t * H_{t-1}) W_hh + b_h)       candidate state
    H_t = Z_t * H_{t-1} + (1 - Z_t) * H~_t

That is the book's GRU, with the reset gate applied *before* the recurrent product. cuDNN, and so
``torch.nn.GRU``, gluon's GRU and Keras's ``GRU`` (``reset_after=True``, its default), apply it
*after*, to the product plus a recurrent bias of its own:

    H~_t = tanh(X_t W_xh + b_h + R_t * (H_{t-1} W_hh + b_hh))      (reset_after=True)

The two are different functions of the same weights. Both are here: the book's is the default,
and the reset-after form has one more parameter, ``b_hh``, after ``b_h``.
"""

from .. import ops
from .bptt import gru_scan_fused, gru_scan_reset_after_fused
from .cell import Cell, input_projection
from .rnn import output_layer, output_params


def get_gru_params(vocab_size, num_hiddens, device=None, reset_after=False):
    """``[W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]`` (``b_hh`` after ``b_h``
    when ``reset_after``): weights ~ N(0, 0.01^2), zero biases, drawn in that order."""
    cell = GRU_RESET_AFTER if reset_after else CELL
    return cell.init_params(vocab_size, num_hiddens, device) + output_params(num_hiddens, vocab_size, device)


get_gru_params.cell = "gru"


def init_gru_state(batch_size, num_hiddens, device=None):
    """The initial hidden state: a tuple holding one (batch_size, num_hiddens) matrix of zeros."""
    return (ops.zeros((batch_size, num_hiddens), device=device),)


def gru_textbook(inputs, state, params):
    """The chapter's GRU step by step: ``inputs`` is one-hot, shape (num_steps, batch, vocab).

    With 12 parameters (``b_hh`` after ``b_h``) it computes the reset-after form.
    Returns (Y of shape (num_steps * batch, vocab), (H,)).
    """
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h = params[:9]
    W_hq, b_q = params[-2:]
    reset_after = len(params) == 12
    (H,) = state
    outputs = []
    for X in ops.unstack(inputs):
        Z = ops.sigmoid(ops.matmul(X, W_xz) + ops.matmul(H, W_hz) + b_z)
        R = ops.sigmoid(ops.matmul(X, W_xr) + ops.matmul(H, W_hr) + b_r)
        if reset_after:
            H_tilde = ops.tanh(ops.matmul(X, W_xh) + b_h + R * (ops.matmul(H, W_hh) + params[9]))
        else:
            H_tilde = ops.tanh(ops.matmul(X, W_xh) + ops.matmul(R * H, W_hh) + b_h)
        H = Z * H + (1 - Z) * H_tilde
        Y = ops.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return ops.concat(outputs, 0), (H,)


def _projections(X, params):
    """The gates' input projections for all steps at once: X_t [W_xz, W_xr] + [b_z, b_r] (num_steps,
    batch, 2 * hiddens) and X_t W_xh + b_h (num_steps, batch, hiddens). A bias may also hold one row
    per sequence, (batch, hiddens) (a decoder's context folded in)."""
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h = params[:9]
    return (input_projection(X, ops.concat([W_xz, W_xr], 1), ops.concat([b_z, b_r], -1)),
            input_projection(X, W_xh, b_h))


def gru_scan(X, state, params):
    """All hidden states of one GRU layer (the book's form): ``(Hs, (H_T,))``, see :mod:`.cell`.

    The gates' input projections are computed before the loop (products or gathers); the loop,
    where the update and reset gates share one recurrent product per step, runs with a
    hand-written backward pass (:func:`d2lrnn.models.bptt.gru_scan_fused`).
    """
    XW_zr, XW_h = _projections(X, params)
    (H,) = state
    W_hzr = ops.concat([params[1], params[4]], 1)  # [W_hz, W_hr]
    Hs, H = gru_scan_fused(XW_zr, XW_h, H, W_hzr, params[7])
    return Hs, (H,)


def gru_scan_reset_after(X, state, params):
    """All hidden states of one GRU layer in the reset-after form: ``(Hs, (H_T,))``, with a
    hand-written backward pass (:func:`d2lrnn.models.bptt.gru_scan_reset_after_fused`)."""
    XW_zr, XW_h = _projections(X, params)
    (H,) = state
    W_hzr = ops.concat([params[1], params[4]], 1)  # [W_hz, W_hr]
    Hs, H = gru_scan_reset_after_fused(XW_zr, XW_h, H, W_hzr, params[7], params[9])
    return Hs, (H,)


def gru(inputs, state, params):
    """The same model as :func:`gru_textbook`, computed faster; ``inputs`` may be token indices."""
    scan = gru_scan_reset_after if len(params) == 12 else gru_scan
    Hs, state = scan(inputs, state, params[:-2])
    return output_layer(Hs, *params[-2:]), state


gru.accepts_indices = True
gru.cell = "gru"

CELL = Cell("gru", "zrh", ("H",), gru_scan)
GRU_RESET_AFTER = Cell("gru", "zrh", ("H",), gru_scan_reset_after, extra=("b_hh",), reset_after=True)
