"""Backpropagation through time written by hand once for every backend: the tanh RNN, the LSTM and the GRU.

Each recurrence runs its time loop outside the framework's autograd tape (``ops.custom_vjp``; MXNet, whose
engine runs a recorded backward pass faster than Python dispatches this one, records the forward scan
instead, traced into one cached graph, and differentiates it: the same gradient), as two
``ops.scan`` loops (on JAX one compiled loop each, not T unrolled copies of the step, but for the GRUs'
backward loops, which XLA runs faster unrolled, up to a length): the forward
scan carries the state and returns, stacked over the steps, the hidden states and what the backward
pass needs; the backward scan walks the steps in reverse (``reverse=True``) over those stacked values,
carrying the gradient of the state. Its body is the same at every step: the output gradients come
in shifted by one step, so that step t adds dL/dH_{t-1} (zero at t = 1) to the gradient it sends
back. What every scan shares:

- the weight gradients are one matrix product over all steps, not T products and T additions:
  sum_t H_{t-1}^T dG_t = [H_0; ...; H_{T-1}]^T [dG_1; ...; dG_T] (one product: faster on every backend
  than H_0^T dG_1 plus a product over the stored states H_1..H_{T-1}, which saves the shifted copy
  but adds a small product and a sum), and the input projections'
  gradients are the stacked gate gradients themselves;
- both loops use ``linear`` (X W^T, the addend fused where the backend can), with each weight
  prepacked once per minibatch into the layout the backend's product is fastest with;
- activation gradients come from the stored activations (through the fused ``tanh_grad`` and
  ``sigmoid_grad``), and whatever multiplies the carried gradients at a step is computed for all
  steps at once before the backward loop: the LSTM's loop body is six operations, the GRUs' eight
  or nine (TensorFlow's graph of a 35-step LSTM training step: 1,179 operations, against 1,446 with
  these factors computed inside the loop);
- gates that share an activation are computed together (all four of the LSTM's, the GRU's update
  and reset gates), split by one unstack of a (B, gates, h) view rather than by column slices
  (each a copy on MXNet), and their gradients concatenated once per step for one product;
- the forward scan returns every activation the backward scan needs (the LSTM and the book's GRU
  take C_{t-1} and H_{t-1} as the stored C_t and H_t shifted by one step), and gates that share
  one activation are split from its stacked values once for all steps, by one unstack of a
  (T, B, gates, h) view: the backward scan's inputs are whole-sequence tensors, and its body slices
  nothing.

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


def _candidate(A_c):
    """C~ = tanh(x) from A_c = sigmoid(2x), the doubled candidate's activation: 2 A_c - 1."""
    return A_c + A_c - 1.0


def _flat_product(Xs, dG):
    """sum_t X_t^T dG_t for stacked X (T, B, n) and dG (T, B, m): one product."""
    T, B, n = ops.shape(Xs)
    return ops.matmul(ops.transpose(ops.reshape(Xs, (T * B, n))), ops.reshape(dG, (T * B, -1)))


def _shifted(first, Xs):
    """[first; X_1; ...; X_{T-1}] for stacked Xs (T, B, n): at step t, X_{t-1} (``first`` at t = 1)."""
    T = ops.shape(Xs)[0]
    first = ops.reshape(first, (1, *ops.shape(first)))
    return first if T == 1 else ops.concat([first, Xs[: T - 1]], 0)


def _output_grads(dHs):
    """The backward scan's inputs from the stacked output gradients dL/dH_t: dL/dH_T, which starts the
    carried gradient, and dL/dH_{t-1} at each step t (zero at t = 1: H_0 is no output)."""
    dH_T = dHs[ops.shape(dHs)[0] - 1]
    return dH_T, _shifted(ops.zeros_like(dH_T), dHs)


# -- tanh RNN ------------------------------------------------------------------------------------


def _rnn_forward(XW, H0, W_hh):
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))  # H W_hh = linear(H, W_hh^T)

    def step(H, XW_t):
        H = ops.tanh(ops.linear(H, W_hh_T, XW_t))  # H W_hh + XW_t
        return H, H

    H, Hs = ops.scan(step, H0, XW)
    return (Hs, H), (Hs, H0, W_hh)


def _rnn_backward(residuals, dHs, dH_last):
    Hs, H0, W_hh = residuals
    W_hh = ops.prepack_linear(W_hh)  # used in T products below
    dH_T, dH_prev_out = _output_grads(dHs)

    def step(dH, inputs):
        H, dH_prev_out_t = inputs
        dA = ops.tanh_grad(H, dH)  # dH_t (1 - H_t^2), one fused kernel
        return ops.linear(dA, W_hh, dH_prev_out_t), dA  # dA_t W_hh^T + dL/dH_{t-1}

    dH, dA = ops.scan(step, dH_last + dH_T, (Hs, dH_prev_out), reverse=True)
    return dA, dH, _flat_product(_shifted(H0, Hs), dA)  # sum_t H_{t-1}^T dA_t


# -- LSTM ----------------------------------------------------------------------------------------


def _lstm_forward(XW, H0, C0, W_h):
    B, h = ops.shape(H0)
    W_h_T = ops.prepack_linear(ops.transpose(W_h))  # H W_h = linear(H, W_h^T)

    def step(state, XW_t):
        H, C = state
        A = ops.sigmoid(ops.linear(H, W_h_T, XW_t))  # sigmoid(XW_t + H W_h): the four gates at once
        I, F, O, A_c = ops.unstack(ops.reshape(A, (B, 4, h)), 1)  # noqa: E741 - the book's name
        C = F * C + I * _candidate(A_c)
        tanh_C = ops.tanh(C)
        H = O * tanh_C
        return (H, C), (H, A, C, tanh_C)

    (H, C), (Hs, *steps) = ops.scan(step, (H0, C0), XW)
    return (Hs, H, C), (Hs, H0, C0, steps, W_h)


def _lstm_backward(residuals, dHs, dH_last, dC_last):
    Hs, H0, C0, (A, Cs, tanh_C), W_h = residuals
    T, B, h = ops.shape(Hs)
    I, F, O, A_c = ops.unstack(ops.reshape(A, (T, B, 4, h)), 2)  # noqa: E741 - the gates of every step
    # What multiplies the carried gradients at each step, for all steps at once (the loop then does six
    # operations a step): dC_t gains dH_t O_t (1 - tanh(C_t)^2), and dG_t = [dC_t, dC_t, dH_t, dC_t] * Q_t
    # with Q_t = [C~_t, C_{t-1}, tanh(C_t), 2 I_t] A_t (1 - A_t) (the factor 2: the doubled candidate).
    dC_from_dH = ops.tanh_grad(tanh_C, O)
    Q = ops.sigmoid_grad(A, ops.concat([_candidate(A_c), _shifted(C0, Cs), tanh_C, I + I], 2))
    W_h = ops.prepack_linear(W_h)  # used in T products below
    dH_T, dH_prev_out = _output_grads(dHs)

    def step(state, inputs):
        dH, dC = state
        Q_t, F_t, dC_from_dH_t, dH_prev_out_t = inputs
        dC = dC + dH * dC_from_dH_t  # through H_t = O_t tanh(C_t)
        dG = ops.concat([dC, dC, dH, dC], 1) * Q_t
        return (ops.linear(dG, W_h, dH_prev_out_t), dC * F_t), dG  # dG_t W_h^T + dL/dH_{t-1}, dC_{t-1}

    (dH, dC), dG = ops.scan(step, (dH_last + dH_T, dC_last), (Q, F, dC_from_dH, dH_prev_out), reverse=True)
    return dG, dH, dC, _flat_product(_shifted(H0, Hs), dG)  # sum_t H_{t-1}^T dG_t


# -- GRU, the book's form ------------------------------------------------------------------------


def _update_reset_gates(H, W_hzr_T, XW_zr_t):
    """[Z_t, R_t] = sigmoid(XW_zr_t + H_{t-1} W_hzr) as one (B, 2h) matrix, and Z_t and R_t split
    from it by one unstack of a (B, 2, h) view: both GRU forms start their step with these."""
    B, two_h = ops.shape(XW_zr_t)
    ZR = ops.sigmoid(ops.linear(H, W_hzr_T, XW_zr_t))
    Z, R = ops.unstack(ops.reshape(ZR, (B, 2, two_h // 2)), 1)
    return ZR, Z, R


def _gate_factors(ZR, H_tilde, D, X):
    """What both GRU forms' backward loops multiply by, for all steps at once: Z and R (split from the
    stacked [Z_t, R_t] (T, B, 2h) by one unstack of a (T, B, 2, h) view), (1 - Z_t)(1 - H~_t^2), which
    takes dH_t to dA_t, and Q_t = [D_t, X_t] [Z_t, R_t] (1 - [Z_t, R_t]), with dS_t = [dH_t, g_t] * Q_t
    (the book's form: X_t = H_{t-1}, g_t = dRH_t; the reset-after form: X_t = N_t, g_t = dA_t)."""
    T, B, two_h = ops.shape(ZR)
    Z, R = ops.unstack(ops.reshape(ZR, (T, B, 2, two_h // 2)), 2)
    return Z, R, ops.tanh_grad(H_tilde, 1.0 - Z), ops.sigmoid_grad(ZR, ops.concat([D, X], 2))


def _gru_forward(XW_zr, XW_h, H0, W_hzr, W_hh):
    W_hzr_T = ops.prepack_linear(ops.transpose(W_hzr))
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))

    def step(H, inputs):
        ZR, Z, R = _update_reset_gates(H, W_hzr_T, inputs[0])
        RH = R * H
        H_tilde = ops.tanh(ops.linear(RH, W_hh_T, inputs[1]))  # (R_t * H_{t-1}) W_hh + XW_h_t
        D = H - H_tilde
        H = H_tilde + Z * D  # Z H + (1 - Z) H~
        return H, (H, ZR, RH, H_tilde, D)

    H, (Hs, *steps) = ops.scan(step, H0, (XW_zr, XW_h))
    return (Hs, H), (Hs, H0, steps, W_hzr, W_hh)


def _gru_backward(residuals, dHs, dH_last):
    Hs, H0, (ZR, RH, H_tilde, D), W_hzr, W_hh = residuals
    H_prev = _shifted(H0, Hs)  # H_{t-1} at every step
    Z, R, dA_from_dH, Q = _gate_factors(ZR, H_tilde, D, H_prev)  # dS_t = [dH_t, dRH_t] * Q_t
    W_hzr, W_hh = ops.prepack_linear(W_hzr), ops.prepack_linear(W_hh)
    dH_T, dH_prev_out = _output_grads(dHs)

    def step(dH, inputs):
        Q_t, Z_t, R_t, dA_from_dH_t, dH_prev_out_t = inputs
        dA = dH * dA_from_dH_t
        dRH = ops.linear(dA, W_hh)  # dA_t W_hh^T
        dS = ops.concat([dH, dRH], 1) * Q_t
        rest = dH * Z_t + dRH * R_t + dH_prev_out_t
        return ops.linear(dS, W_hzr, rest), (dS, dA)  # dS_t W_hzr^T + the rest

    # unrolled where the framework compiles loops (JAX): the GRU's whole training step ran 1.5x faster so
    dH, (dS, dA) = ops.scan(step, dH_last + dH_T, (Q, Z, R, dA_from_dH, dH_prev_out), reverse=True,
                            unroll=True)
    dW_hh = _flat_product(RH, dA)  # sum_t (R_t * H_{t-1})^T dA_t
    return dS, dA, dH, _flat_product(H_prev, dS), dW_hh  # dW_hzr = sum_t H_{t-1}^T dS_t


# -- GRU, reset-after form -----------------------------------------------------------------------


def _gru_ra_forward(XW_zr, XW_h, H0, W_hzr, W_hh, b_hh):
    W_hzr_T = ops.prepack_linear(ops.transpose(W_hzr))
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))

    def step(H, inputs):
        ZR, Z, R = _update_reset_gates(H, W_hzr_T, inputs[0])
        N = ops.linear(H, W_hh_T, b_hh)  # H W_hh + b_hh
        H_tilde = ops.tanh(inputs[1] + R * N)  # XW_h_t + R_t * N_t
        D = H - H_tilde
        H = H_tilde + Z * D
        return H, (H, ZR, N, H_tilde, D)

    H, (Hs, *steps) = ops.scan(step, H0, (XW_zr, XW_h))
    return (Hs, H), (Hs, H0, steps, W_hzr, W_hh)


def _gru_ra_backward(residuals, dHs, dH_last):
    Hs, H0, (ZR, N, H_tilde, D), W_hzr, W_hh = residuals
    T, B, h = ops.shape(Hs)
    Z, R, dA_from_dH, Q = _gate_factors(ZR, H_tilde, D, N)  # dS_t = [dH_t, dA_t] * Q_t (dN_t = dA_t R_t)
    W_h = ops.prepack_linear(ops.concat([W_hzr, W_hh], 1))  # [dS_t, dN_t] W_h^T: one product per step
    dH_T, dH_prev_out = _output_grads(dHs)

    def step(dH, inputs):
        Q_t, Z_t, R_t, dA_from_dH_t, dH_prev_out_t = inputs
        dA = dH * dA_from_dH_t
        dS = ops.concat([dH, dA], 1) * Q_t
        dSN = ops.concat([dS, dA * R_t], 1)  # [dS_t, dN_t]
        return ops.linear(dSN, W_h, dH * Z_t + dH_prev_out_t), (dS, dA, dSN)  # [dS_t, dN_t] W_h^T + the rest

    dH, (dS, dA, dSN) = ops.scan(step, dH_last + dH_T, (Q, Z, R, dA_from_dH, dH_prev_out), reverse=True,
                                 unroll=True)
    dW_h = _flat_product(_shifted(H0, Hs), dSN)  # sum_t H_{t-1}^T [dS_t, dN_t]
    db_hh = ops.sum(ops.reshape(dSN, (T * B, 3 * h))[:, 2 * h:], 0)
    return dS, dA, dH, dW_h[:, : 2 * h], dW_h[:, 2 * h:], db_hh


_SCANS = {"rnn": (_rnn_forward, _rnn_backward), "lstm": (_lstm_forward, _lstm_backward),
          "gru": (_gru_forward, _gru_backward), "gru_reset_after": (_gru_ra_forward, _gru_ra_backward)}
_scans = {}


def _scan(kind):
    """The custom-gradient function of ``kind`` for the active backend (made once per backend)."""
    key = (kind, backends.backend_name())
    if key not in _scans:
        _scans[key] = ops.custom_vjp(*_SCANS[kind], differentiable=True)  # fwd's operations: bwd's gradient
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
