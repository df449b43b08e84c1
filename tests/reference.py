"""An independent reference for the book's RNN language model, in plain NumPy and float64.

Nothing here imports d2lrnn: the forward pass walks the time steps on one-hot inputs, the loss
pairs the output of step t of row b with the label ``Y[b, t]`` (the token that follows), the
gradients come from backpropagation through time written out below (and are themselves checked
against central finite differences in ``tests/test_reference.py``), and decoding is its own loop.
d2lrnn's loss, clipped gradients, updates and generated text are compared with these on every
backend, so a bug in d2lrnn's shared model, loss, training or decoding code cannot be mirrored
here the way it would be in the numpy backend.

Parameters are ``[W_xh, W_hh, b_h, W_hq, b_q]`` with shapes (V, h), (h, h), (h,), (h, V), (V,).
"""

import numpy as np


def as64(params):
    return [np.asarray(p, dtype=np.float64) for p in params]


def forward(params, X, H0):
    """Run the RNN over X (batch, T) of token ids from state H0 (batch, h).

    Returns the logits of every step (a list of T arrays (batch, V)) and the hidden states
    [H_0, H_1, ..., H_T].
    """
    W_xh, W_hh, b_h, W_hq, b_q = as64(params)
    V = W_xh.shape[0]
    batch, T = X.shape
    Hs, logits = [np.asarray(H0, dtype=np.float64)], []
    for t in range(T):
        X_t = np.zeros((batch, V))
        X_t[np.arange(batch), X[:, t]] = 1.0
        H = np.tanh(X_t @ W_xh + Hs[-1] @ W_hh + b_h)
        Hs.append(H)
        logits.append(H @ W_hq + b_q)
    return logits, Hs


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def loss(params, X, Y, H0):
    """Mean cross-entropy over every (row, step): -log p(Y[b, t] | X[b, :t+1], H0)."""
    logits, _ = forward(params, X, H0)
    batch, T = X.shape
    total = 0.0
    for t in range(T):
        logp = _log_softmax(logits[t])
        total -= logp[np.arange(batch), Y[:, t]].sum()
    return total / (batch * T)


def loss_and_grads(params, X, Y, H0, xi=None):
    """The loss, the gradient of every parameter (BPTT by hand), and the final state H_T.

    ``xi`` (length T) truncates: the gradient flowing back from step t into the state H_t it
    started from (and so into steps before t) is multiplied by ``xi[t]``.
    """
    W_xh, W_hh, b_h, W_hq, b_q = as64(params)
    logits, Hs = forward(params, X, H0)
    batch, T = X.shape
    V = W_xh.shape[0]
    n = batch * T
    grads = [np.zeros_like(p) for p in (W_xh, W_hh, b_h, W_hq, b_q)]
    dW_xh, dW_hh, db_h, dW_hq, db_q = grads
    total, dH_next = 0.0, np.zeros_like(Hs[0])
    for t in reversed(range(T)):
        logp = _log_softmax(logits[t])
        total -= logp[np.arange(batch), Y[:, t]].sum()
        dO = np.exp(logp)
        dO[np.arange(batch), Y[:, t]] -= 1.0
        dO /= n  # the loss is a mean over all n predictions
        dW_hq += Hs[t + 1].T @ dO
        db_q += dO.sum(axis=0)
        dH = dO @ W_hq.T + dH_next
        dA = dH * (1.0 - Hs[t + 1] ** 2)  # through the tanh
        X_t = np.zeros((batch, V))
        X_t[np.arange(batch), X[:, t]] = 1.0
        dW_xh += X_t.T @ dA
        dW_hh += Hs[t].T @ dA
        db_h += dA.sum(axis=0)
        dH_next = dA @ W_hh.T * (1.0 if xi is None else xi[t])
    return total / n, grads, Hs[-1]


def last_loss_state_grads(params, X, Y, H0):
    """dL_T/dH_t for t = 0, ..., T-1, where L_T is the mean cross-entropy of the last step only."""
    W_xh, W_hh, b_h, W_hq, b_q = as64(params)
    logits, Hs = forward(params, X, H0)
    batch, T = X.shape
    logp = _log_softmax(logits[-1])
    dO = np.exp(logp)
    dO[np.arange(batch), Y[:, -1]] -= 1.0
    dH = dO @ W_hq.T / batch
    grads = []
    for t in reversed(range(T)):
        dH = (dH * (1.0 - Hs[t + 1] ** 2)) @ W_hh.T  # from H_{t+1} back to H_t
        grads.append(dH)
    return grads[::-1]


def clip(grads, theta):
    """The book's gradient clipping: g <- min(1, theta / ||g||) g over all gradients together."""
    norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
    return [g * min(1.0, theta / norm) for g in grads]


def sgd_step(params, X, Y, H0, lr, theta):
    """One step of the book's training: loss, clipped gradients, updated parameters, final state."""
    l, grads, H = loss_and_grads(params, X, Y, H0)
    grads = grads if theta is None else clip(grads, theta)
    return l, grads, [p - lr * g for p, g in zip(as64(params), grads)], H


def finite_difference_grads(params, X, Y, H0, eps=1e-6):
    """Central differences of :func:`loss` for every entry of every parameter (float64)."""
    params = as64(params)
    grads = []
    for i, p in enumerate(params):
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            shifted = [q.copy() for q in params]
            shifted[i][idx] += eps
            up = loss(shifted, X, Y, H0)
            shifted[i][idx] -= 2 * eps
            down = loss(shifted, X, Y, H0)
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def next_token_probs(logits, temperature, forbidden=0):
    """softmax(logits / T) with the token ``forbidden`` (``<unk>``) given probability 0."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z[forbidden] = -np.inf
    p = np.exp(z - z.max())
    return p / p.sum()


def decode(params, prefix_ids, num_preds, temperature=0.0, rng=None, forbidden=0):
    """Continue ``prefix_ids``: feed the prefix one token at a time from a zero state, then feed
    back each predicted token (argmax, or a draw from softmax(logits / T) with ``rng.choice``).
    Returns the predicted ids."""
    W_xh = as64(params)[0]
    state = np.zeros((1, W_xh.shape[1]))
    for token in prefix_ids[:-1]:
        _, Hs = forward(params, np.array([[token]]), state)
        state = Hs[-1]
    last, out = prefix_ids[-1], []
    for _ in range(num_preds):
        logits, Hs = forward(params, np.array([[last]]), state)
        state = Hs[-1]
        z = logits[0][0].copy()
        if temperature > 0:
            p = next_token_probs(z, temperature, forbidden)
            last = int(rng.choice(len(p), p=p))
        else:
            z[forbidden] = -np.inf
            last = int(np.argmax(z))
        out.append(last)
    return out
