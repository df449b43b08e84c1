"""Backpropagation through time written by hand once for every backend: the tanh RNN, the LSTM and the GRU.

Each recurrence runs its time loop outside the framework's autograd tape (``ops.custom_vjp``): the
forward loop keeps what the backward loop needs, and the backward loop walks the steps in reverse,
carrying the gradient of the state. What every scan shares:

- the weight gradients are one matrix product over all steps, not T products and T additions:
  sum_t H_{t-1}^T dG_t = [H_0; ...; H_{T-1}]^T [dG_1; ...; dG_T] (split as H_0^T dG_1 plus one
  product over the stored states H_1..H_{T-1}, which needs no copy), and the input projections'
  gradients are the stacked gate gradients themselves;
- both loops use ``linear`` (X W^T, the addend fused where the backend can), with each weight
  prepacked once per minibatch into the layout the backend's product is fastest with;
- activation gradients come from the stored activations: tanh through the fused ``tanh_grad``,
  sigmoid as dY Y (1 - Y);
- gates that share an activation are computed together (all four of the LSTM's, the GRU's update
  and reset gates), split by one unstack of a (B, gates, h) view rather than by column slices
  (each a copy on MXNet), and their gradients concatenated once per step for one product;
- the forward loop keeps every activation the backward loop needs, so that loop slices nothing.

The inputs are the input projections X_t W_x + b of every step (computed before the loop, one
product or one gather) and the recurrent weights; the outputs the stacked hidden states and the
final state. Shapes: T steps, B rows, h hidden units.

**tanh RNN** (:func:`rnn_tanh_scan`). Forward, for t = 1..T:

    H_t = tanh(A_t),   A_t = XW_t + H_{t-1} W_hh

Backward, for t = T..1 (dH_t starts as dL/dH_t from the outputs, plus what step t+1 sends back):

    dA_t = dH_t * (1 - H_t^2),   dH_{t-1} += dA_t W_hh^T

and dXW_t = dA_t, dW_hh = sum_t H_{t-1}^T dA_t.

**LSTM** (:func:`lstm_scan_fused`), the gates in the book's order i, f, o, c. The candidate's
columns of the input projection and of W_h = [W_hi, W_hf, W_ho, 2 W_hc] come in doubled, so that
one sigmoid per step covers all four gates, with tanh(x) = 2 sigmoid(2x) - 1:

    A_t = sigmoid(G_t),   G_t = XW_t + H_{t-1} W_h         (B, 4h): one product per step
    [I_t, F_t, O_t, A~_t] = A_t,   C~_t = 2 A~_t - 1       (the book's tanh(X_t W_xc + H_{t-1} W_hc + b_c))
    C_t = F_t * C_{t-1} + I_t * C~_t,   H_t = O_t * tanh(C_t)

Backward, for t = T..1, with dC_t the gradient reaching C_t from step t+1 (dL/dC_T at t = T):

    dC_t += dH_t * O_t * (1 - tanh(C_t)^2)
    dA_t = [dC_t * C~_t, dC_t * C_{t-1}, dH_t * tanh(C_t), 2 dC_t * I_t]    (dI_t, dF_t, dO_t, dA~_t)
    dG_t = dA_t * A_t * (1 - A_t)
    dC_{t-1} = dC_t * F_t,   dH_{t-1} += dG_t W_h^T

and dXW_t = dG_t, dW_h = sum_t H_{t-1}^T dG_t (the doubling's factor 2 on the candidate's weights is
the caller's, differentiated by the framework).

**GRU**, the book's form (:func:`gru_scan_fused`), W_hzr = [W_hz, W_hr], the input projections
given as XW_zr = X [W_xz, W_xr] + [b_z, b_r] and XW_h = X W_xh + b_h (no slicing in the loop):

    [Z_t, R_t] = sigmoid(S_t),   S_t = XW_zr_t + H_{t-1} W_hzr      (B, 2h): one product per step
    H~_t = tanh(A_t),            A_t = XW_h_t + (R_t * H_{t-1}) W_hh
    H_t = Z_t * H_{t-1} + (1 - Z_t) * H~_t = H~_t + Z_t * D_t,   D_t = H_{t-1} - H~_t

Backward, for t = T..1:

    dA_t = dH_t * (1 - Z_t) * (1 - H~_t^2)
    dRH_t = dA_t W_hh^T
    dS_t = [dH_t * D_t, dRH_t * H_{t-1}] * [Z_t, R_t] * (1 - [Z_t, R_t])
    dH_{t-1} += dH_t * Z_t + dRH_t * R_t + dS_t W_hzr^T

and dXW_zr_t = dS_t, dXW_h_t = dA_t, dW_hzr = sum_t H_{t-1}^T dS_t, dW_hh = sum_t (R_t * H_{t-1})^T dA_t.

**GRU, reset-after form** (:func:`gru_scan_reset_after_fused`), the same inputs and b_hh:

    [Z_t, R_t] = sigmoid(S_t),   S_t = XW_zr_t + H_{t-1} W_hzr
    N_t = H_{t-1} W_hh + b_hh
    H~_t = tanh(A_t),            A_t = XW_h_t + R_t * N_t
    H_t = H~_t + Z_t * D_t,      D_t = H_{t-1} - H~_t

Backward, for t = T..1, with W_h = [W_hzr, W_hh] (h, 3h) so that the state's gradient is one product:

    dA_t = dH_t * (1 - Z_t) * (1 - H~_t^2),   dN_t = dA_t * R_t
    dS_t = [dH_t * D_t, dA_t * N_t] * [Z_t, R_t] * (1 - [Z_t, R_t])
    dH_{t-1} += dH_t * Z_t + [dS_t, dN_t] W_h^T

and dXW_zr_t = dS_t, dXW_h_t = dA_t, [dW_hzr, dW_hh] = sum_t H_{t-1}^T [dS_t, dN_t], db_hh = the sum of
dN_t over steps and rows.
"""

from .. import backends, ops


def _sigmoid_grad(Y, dY):
    """dY * Y * (1 - Y): the gradient through Y = sigmoid(X) given Y."""
    return dY * (Y - Y * Y)


def _weight_grad(H0, Hs, dG):
    """sum_t H_{t-1}^T dG_t for stored states Hs = H_1..H_T (T, B, h) and dG (T, B, n).

    H_0 pairs with dG_1, and H_1..H_{T-1} (all but the last B rows of the stored states) with
    dG_2..dG_T: one product over the stored states, which needs no copy.
    """
    T, B, h = ops.shape(Hs)
    dG_flat = ops.reshape(dG, (T * B, -1))
    dW = ops.matmul(ops.transpose(H0), dG_flat[:B])
    if T > 1:
        H_flat = ops.reshape(Hs, (T * B, h))
        dW = dW + ops.matmul(ops.transpose(H_flat[: (T - 1) * B]), dG_flat[B:])
    return dW


def _flat_product(Xs, dG):
    """sum_t X_t^T dG_t for stacked X (T, B, n) and dG (T, B, m): one product."""
    T, B, n = ops.shape(Xs)
    return ops.matmul(ops.transpose(ops.reshape(Xs, (T * B, n))), ops.reshape(dG, (T * B, -1)))


# -- tanh RNN ------------------------------------------------------------------------------------


def _rnn_forward(XW, H0, W_hh):
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))  # H W_hh = linear(H, W_hh^T)
    H, hiddens = H0, []
    for XW_t in ops.unstack(XW):
        H = ops.tanh(ops.linear(H, W_hh_T, XW_t))  # H W_hh + XW_t
        hiddens.append(H)
    Hs = ops.stack(hiddens)
    return (Hs, H), (Hs, H0, W_hh)


def _rnn_backward(residuals, dHs, dH_last):
    Hs, H0, W_hh = residuals
    T = ops.shape(Hs)[0]
    hiddens, dH_out = ops.unstack(Hs), ops.unstack(dHs)
    W_hh = ops.prepack_linear(W_hh)  # used in T products below
    dH, dA = dH_last + dH_out[T - 1], [None] * T
    for t in reversed(range(T)):
        dA[t] = ops.tanh_grad(hiddens[t], dH)  # dH_t (1 - H_t^2), one fused kernel
        dH = ops.linear(dA[t], W_hh, dH_out[t - 1] if t > 0 else None)  # dA_t W_hh^T + dL/dH_{t-1}
    dA = ops.stack(dA)
    return dA, dH, _weight_grad(H0, Hs, dA)


# -- LSTM ----------------------------------------------------------------------------------------


def _lstm_forward(XW, H0, C0, W_h):
    B, h = ops.shape(H0)
    W_h_T = ops.prepack_linear(ops.transpose(W_h))  # H W_h = linear(H, W_h^T)
    H, C = H0, C0
    hiddens, cells, steps = [], [C0], []
    for XW_t in ops.unstack(XW):
        A = ops.sigmoid(ops.linear(H, W_h_T, XW_t))  # sigmoid(XW_t + H W_h): the four gates at once
        I, F, O, A_c = ops.unstack(ops.reshape(A, (B, 4, h)), 1)  # noqa: E741 - the book's name
        C_tilde = A_c + A_c - 1.0  # tanh(x) = 2 sigmoid(2x) - 1
        C = F * C + I * C_tilde
        tanh_C = ops.tanh(C)
        H = O * tanh_C
        hiddens.append(H)
        cells.append(C)
        steps.append((A, I, F, O, C_tilde, tanh_C))
    Hs = ops.stack(hiddens)
    return (Hs, H, C), (Hs, H0, cells, steps, W_h)


def _lstm_backward(residuals, dHs, dH_last, dC_last):
    Hs, H0, cells, steps, W_h = residuals
    T = ops.shape(Hs)[0]
    dH_out = ops.unstack(dHs)
    W_h = ops.prepack_linear(W_h)  # used in T products below
    dH, dC, dG = dH_last + dH_out[T - 1], dC_last, [None] * T
    for t in reversed(range(T)):
        A, I, F, O, C_tilde, tanh_C = steps[t]  # noqa: E741 - the book's name
        dC = dC + ops.tanh_grad(tanh_C, dH * O)  # through H_t = O_t tanh(C_t)
        dC_tilde = dC * I
        # dI_t, dF_t, dO_t and, for the doubled candidate, 2 dC~_t
        dA = ops.concat([dC * C_tilde, dC * cells[t], dH * tanh_C, dC_tilde + dC_tilde], 1)
        dG[t] = _sigmoid_grad(A, dA)
        dC = dC * F
        dH = ops.linear(dG[t], W_h, dH_out[t - 1] if t > 0 else None)  # dG_t W_h^T + dL/dH_{t-1}
    dG = ops.stack(dG)
    return dG, dH, dC, _weight_grad(H0, Hs, dG)


# -- GRU, the book's form ------------------------------------------------------------------------


def _update_reset_gates(H, W_hzr_T, XW_zr_t):
    """[Z_t, R_t] = sigmoid(XW_zr_t + H_{t-1} W_hzr) as one (B, 2h) matrix, and Z_t and R_t split
    from it by one unstack of a (B, 2, h) view: both GRU forms start their step with these."""
    B, two_h = ops.shape(XW_zr_t)
    ZR = ops.sigmoid(ops.linear(H, W_hzr_T, XW_zr_t))
    Z, R = ops.unstack(ops.reshape(ZR, (B, 2, two_h // 2)), 1)
    return ZR, Z, R


def _gru_forward(XW_zr, XW_h, H0, W_hzr, W_hh):
    W_hzr_T = ops.prepack_linear(ops.transpose(W_hzr))
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))
    H, hiddens, steps = H0, [], []
    for XW_zr_t, XW_h_t in zip(ops.unstack(XW_zr), ops.unstack(XW_h)):
        ZR, Z, R = _update_reset_gates(H, W_hzr_T, XW_zr_t)
        RH = R * H
        H_tilde = ops.tanh(ops.linear(RH, W_hh_T, XW_h_t))
        D = H - H_tilde
        H = H_tilde + Z * D  # Z H + (1 - Z) H~
        hiddens.append(H)
        steps.append((ZR, Z, R, RH, H_tilde, D))
    Hs = ops.stack(hiddens)
    return (Hs, H), (Hs, H0, steps, W_hzr, W_hh)


def _gru_backward(residuals, dHs, dH_last):
    Hs, H0, steps, W_hzr, W_hh = residuals
    T = ops.shape(Hs)[0]
    hiddens, dH_out = ops.unstack(Hs), ops.unstack(dHs)
    W_hzr, W_hh = ops.prepack_linear(W_hzr), ops.prepack_linear(W_hh)
    dH, dS, dA = dH_last + dH_out[T - 1], [None] * T, [None] * T
    for t in reversed(range(T)):
        ZR, Z, R, _, H_tilde, D = steps[t]
        dHZ = dH * Z
        dA[t] = ops.tanh_grad(H_tilde, dH - dHZ)  # dH_t (1 - Z_t) (1 - H~_t^2)
        dRH = ops.linear(dA[t], W_hh)  # dA_t W_hh^T
        dS[t] = _sigmoid_grad(ZR, ops.concat([dH * D, dRH * (hiddens[t - 1] if t > 0 else H0)], 1))
        rest = dHZ + dRH * R
        dH = ops.linear(dS[t], W_hzr, rest + dH_out[t - 1] if t > 0 else rest)  # dS_t W_hzr^T + the rest
    dS, dA = ops.stack(dS), ops.stack(dA)
    dW_hh = _flat_product(ops.stack([step[3] for step in steps]), dA)  # sum_t (R_t * H_{t-1})^T dA_t
    return dS, dA, dH, _weight_grad(H0, Hs, dS), dW_hh


# -- GRU, reset-after form -----------------------------------------------------------------------


def _gru_ra_forward(XW_zr, XW_h, H0, W_hzr, W_hh, b_hh):
    W_hzr_T = ops.prepack_linear(ops.transpose(W_hzr))
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))
    H, hiddens, steps = H0, [], []
    for XW_zr_t, XW_h_t in zip(ops.unstack(XW_zr), ops.unstack(XW_h)):
        ZR, Z, R = _update_reset_gates(H, W_hzr_T, XW_zr_t)
        N = ops.linear(H, W_hh_T, b_hh)  # H W_hh + b_hh
        H_tilde = ops.tanh(XW_h_t + R * N)
        D = H - H_tilde
        H = H_tilde + Z * D
        hiddens.append(H)
        steps.append((ZR, Z, R, N, H_tilde, D))
    Hs = ops.stack(hiddens)
    return (Hs, H), (Hs, H0, steps, W_hzr, W_hh)


def _gru_ra_backward(residuals, dHs, dH_last):
    Hs, H0, steps, W_hzr, W_hh = residuals
    T, B, h = ops.shape(Hs)
    dH_out = ops.unstack(dHs)
    W_h = ops.prepack_linear(ops.concat([W_hzr, W_hh], 1))  # [dS_t, dN_t] W_h^T: one product per step
    dH, dS, dA, dSN = dH_last + dH_out[T - 1], [None] * T, [None] * T, [None] * T
    for t in reversed(range(T)):
        ZR, Z, R, N, H_tilde, D = steps[t]
        dHZ = dH * Z
        dA[t] = ops.tanh_grad(H_tilde, dH - dHZ)  # dH_t (1 - Z_t) (1 - H~_t^2)
        dS[t] = _sigmoid_grad(ZR, ops.concat([dH * D, dA[t] * N], 1))
        dSN[t] = ops.concat([dS[t], dA[t] * R], 1)  # [dS_t, dN_t]
        dH = ops.linear(dSN[t], W_h, dHZ + dH_out[t - 1] if t > 0 else dHZ)  # [dS_t, dN_t] W_h^T + the rest
    dSN = ops.stack(dSN)
    dW_h = _weight_grad(H0, Hs, dSN)
    db_hh = ops.sum(ops.reshape(dSN, (T * B, 3 * h))[:, 2 * h:], 0)
    return ops.stack(dS), ops.stack(dA), dH, dW_h[:, : 2 * h], dW_h[:, 2 * h:], db_hh


_SCANS = {"rnn": (_rnn_forward, _rnn_backward), "lstm": (_lstm_forward, _lstm_backward),
          "gru": (_gru_forward, _gru_backward), "gru_reset_after": (_gru_ra_forward, _gru_ra_backward)}
_scans = {}


def _scan(kind):
    """The custom-gradient function of ``kind`` for the active backend (made once per backend)."""
    key = (kind, backends.backend_name())
    if key not in _scans:
        _scans[key] = ops.custom_vjp(*_SCANS[kind])
    return _scans[key]


def rnn_tanh_scan(XW, H0, W_hh):
    """All hidden states of H_t = tanh(XW_t + H_{t-1} W_hh), with a hand-written backward pass.

    ``XW`` is (num_steps, batch, hiddens): the input projection X_t W_xh + b_h of every step.
    Returns ``(Hs, H_T)``: the stacked states (num_steps, batch, hiddens) and the last one.
    """
    return _scan("rnn")(XW, H0, W_hh)


def lstm_scan_fused(XW, H0, C0, W_h):
    """All hidden states of the LSTM, with a hand-written backward pass (equations above).

    ``XW`` is (num_steps, batch, 4 * hiddens): X_t [W_xi, W_xf, W_xo, 2 W_xc] + [b_i, b_f, b_o, 2 b_c]
    for every step; ``W_h`` is [W_hi, W_hf, W_ho, 2 W_hc] (hiddens, 4 * hiddens): the candidate's
    columns doubled, as :func:`d2lrnn.models.lstm.lstm_scan` passes them. Returns ``(Hs, H_T, C_T)``.
    """
    return _scan("lstm")(XW, H0, C0, W_h)


def gru_scan_fused(XW_zr, XW_h, H0, W_hzr, W_hh):
    """All hidden states of the book's GRU, with a hand-written backward pass (equations above).

    ``XW_zr`` is (num_steps, batch, 2 * hiddens): X_t [W_xz, W_xr] + [b_z, b_r] for every step,
    ``XW_h`` (num_steps, batch, hiddens): X_t W_xh + b_h; ``W_hzr`` is [W_hz, W_hr] (hiddens,
    2 * hiddens). Returns ``(Hs, H_T)``.
    """
    return _scan("gru")(XW_zr, XW_h, H0, W_hzr, W_hh)


def gru_scan_reset_after_fused(XW_zr, XW_h, H0, W_hzr, W_hh, b_hh):
    """All hidden states of the reset-after GRU, with a hand-written backward pass (equations above).

    Arguments as for :func:`gru_scan_fused`, and ``b_hh``, the recurrent candidate bias.
    Returns ``(Hs, H_T)``.
    """
    return _scan("gru_reset_after")(XW_zr, XW_h, H0, W_hzr, W_hh, b_hh)
