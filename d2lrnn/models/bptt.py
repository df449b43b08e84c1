"""Backpropagation through time for the tanh recurrence, written by hand once for every backend.

Forward, for t = 1..T:   H_t = tanh(Z_t),   Z_t = XW_t + H_{t-1} W_hh
Backward, for t = T..1:  dH_t += dL/dH_t (from the outputs)
                         dZ_t  = dH_t * (1 - H_t^2)
                         dH_{t-1} = dZ_t W_hh^T
and, once the loop is done, dXW_t = dZ_t and

    dW_hh = sum_t H_{t-1}^T dZ_t = [H_0; ...; H_{T-1}]^T [dZ_1; ...; dZ_T]

which is a single matrix product over all steps instead of T products and T additions
(split as H_0^T dZ_1 plus one product over the stored states H_1..H_{T-1}, which needs no
copy). Running the time loop outside the framework's autograd tape also saves recording
small operations at every step. Both loops use ``linear`` (X W^T), with the weight prepacked
once per minibatch into the layout the backend's product is fastest with.
"""

from .. import backends, ops


def _forward(XW, H0, W_hh):
    W_hh_T = ops.prepack_linear(ops.transpose(W_hh))  # H W_hh = linear(H, W_hh^T)
    H, hiddens = H0, []
    for XW_t in ops.unstack(XW):
        H = ops.tanh(ops.linear(H, W_hh_T, XW_t))  # H W_hh + XW_t
        hiddens.append(H)
    Hs = ops.stack(hiddens)
    return (Hs, H), (Hs, H0, W_hh)


def _backward(residuals, dHs, dH_last):
    Hs, H0, W_hh = residuals
    T, B, h = ops.shape(Hs)
    hiddens, dH_out = ops.unstack(Hs), ops.unstack(dHs)
    W_hh = ops.prepack_linear(W_hh)  # used in T products below
    dH, dZ = dH_last + dH_out[T - 1], [None] * T
    for t in reversed(range(T)):
        dZ[t] = ops.tanh_grad(hiddens[t], dH)  # dH_t (1 - H_t^2), one fused kernel
        dH = ops.linear(dZ[t], W_hh, dH_out[t - 1] if t > 0 else None)  # dZ_t W_hh^T + dL/dH_{t-1}
    dZ = ops.stack(dZ)
    dZ_flat, H_flat = ops.reshape(dZ, (T * B, h)), ops.reshape(Hs, (T * B, h))
    # sum_t H_{t-1}^T dZ_t: H_0 pairs with dZ_1, and H_1..H_{T-1} (all but the last B rows of the
    # stored states) with dZ_2..dZ_T.
    dW_hh = ops.matmul(ops.transpose(H0), dZ_flat[:B])
    if T > 1:
        dW_hh = dW_hh + ops.matmul(ops.transpose(H_flat[: (T - 1) * B]), dZ_flat[B:])
    return dZ, dH, dW_hh


_scans = {}


def rnn_tanh_scan(XW, H0, W_hh):
    """All hidden states of H_t = tanh(XW_t + H_{t-1} W_hh), with a hand-written backward pass.

    ``XW`` is (num_steps, batch, hiddens): the input projection X_t W_xh + b_h of every step.
    Returns ``(Hs, H_T)``: the stacked states (num_steps, batch, hiddens) and the last one.
    """
    name = backends.backend_name()
    if name not in _scans:
        _scans[name] = ops.custom_vjp(_forward, _backward)
    return _scans[name](XW, H0, W_hh)
