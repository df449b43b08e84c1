"""Backpropagation through time in practice: full, regularly truncated, or randomly truncated.

Within a minibatch of T steps, the gradient of the loss reaches the parameters of step t through
the state H_t, and from there flows back into H_{t-1}, H_{t-2}, ... The three strategies differ
in what happens at each step boundary t (between step t-1 and step t): the gradient flowing
back through the state is multiplied by a factor xi_t,

- :class:`FullBPTT`: xi_t = 1 everywhere: the exact gradient over the minibatch's T steps;
- :class:`RegularTruncation` (k): xi_t = 0 every k steps (the state is detached), 1 elsewhere:
  no gradient travels more than k steps;
- :class:`RandomizedTruncation` (p): xi_t = 1/p with probability p and 0 otherwise, drawn afresh
  for every minibatch. E[xi_t] = 1, so the gradient is right on average; dependencies j steps
  long survive with probability p^j, weighted by p^-j when they do.

The forward values are the same under all three: ``scale_gradient`` changes only the gradient.
Between minibatches the state is always detached (the book's sequential training), so "full"
means full over ``num_steps``. Pass one of these as ``train_ch8(..., truncation=...)``.

:func:`state_gradient_norms` measures ||dL_T/dH_t|| for the loss of the last step, the quantity
whose growth or decay with T - t the eigenvalues of W_hh govern.
"""

import numpy as np

from .. import checks, ops
from ..backends import generator
from ..errors import ArgumentError
from ..training.loop import model_device
from .loss import lm_loss


def scale_gradient(x, xi):
    """``x`` in the forward pass; in the backward pass its gradient is multiplied by ``xi``.

    detach(x) + xi * (x - detach(x)) equals x exactly (x - x = 0), and its derivative by x is xi.
    xi = 0 detaches x; xi = 1 leaves it alone.
    """
    frozen = ops.detach(x)
    return frozen + xi * (x - frozen)


class FullBPTT:
    """Backpropagate through every step of the minibatch (xi_t = 1)."""

    name = "full"
    num_factors = 0  # how many tensors factors() gives

    def boundaries(self, num_steps):
        """The steps where the gradient through the state is scaled: none."""
        return []

    def factors(self, num_steps):
        """The extra inputs of the training step: none."""
        return ()

    def __repr__(self):
        return "FullBPTT()"


class RegularTruncation:
    """Detach the state every ``k`` steps: xi_t = 0 for t = k, 2k, ... (steps counted from 0)."""

    name = "regular"
    num_factors = 0

    def __init__(self, k):
        self.k = checks.positive_int("k", k, " (the steps between detaches, e.g. 5)")

    def boundaries(self, num_steps):
        return list(range(self.k, num_steps, self.k))

    def factors(self, num_steps):
        return ()

    def __repr__(self):
        return f"RegularTruncation(k={self.k})"


class RandomizedTruncation:
    """At every step, keep the gradient through the state with probability ``p``, scaled by 1/p.

    The factors xi_1, ..., xi_{T-1} are drawn from d2lrnn's shared generator (seeded by
    ``d2l.manual_seed``) for each minibatch and passed to the compiled step as one tensor.
    """

    name = "randomized"
    num_factors = 1

    def __init__(self, p):
        p = checks.number("p", p, hint=" (the probability of keeping a step's gradient, e.g. 0.8)")
        if not 0 < p <= 1:
            raise ArgumentError(f"p must be above 0 and at most 1 (the probability of keeping a step's "
                                f"gradient, e.g. 0.8), got {p}")
        self.p = p

    def boundaries(self, num_steps):
        return list(range(1, num_steps))

    def factors(self, num_steps):
        """``(xi,)``: a float32 tensor of T factors; xi[t] scales the gradient from step t into t-1
        (xi[0] is unused: the state entering the minibatch is detached anyway)."""
        keep = generator().random(num_steps) < self.p
        return (ops.tensor(np.where(keep, 1.0 / self.p, 0.0).astype(np.float32)),)

    def __repr__(self):
        return f"RandomizedTruncation(p={self.p})"


def get_truncation(truncation):
    """A truncation object from ``None``/'full', an int k (regular), or one of the classes above."""
    if truncation is None or truncation == "full":
        return FullBPTT()
    if isinstance(truncation, (FullBPTT, RegularTruncation, RandomizedTruncation)):
        return truncation
    if isinstance(truncation, int) and not isinstance(truncation, bool):
        return RegularTruncation(truncation)
    raise ArgumentError(f"unknown truncation {truncation!r}: pass None (full), d2l.RegularTruncation(k) "
                        "or d2l.RandomizedTruncation(p)")


def _scale_state(state, xi):
    return tuple(scale_gradient(s, xi) for s in state)


def truncated_forward(forward, truncation, num_steps):
    """``forward(params, X, state)`` run segment by segment, the state between segments scaled.

    Returns ``run(params, X, state, *factors) -> (Y_hat, state)`` with the same outputs as
    ``forward`` (step-major rows, segments concatenated in order). Regular truncation detaches;
    randomized truncation scales by its factors; full backpropagation is ``forward`` itself.
    """
    cuts = truncation.boundaries(num_steps)
    if not cuts:
        return forward
    edges = [0, *cuts, num_steps]

    def run(params, X, state, *factors):
        outputs = []
        for start, stop in zip(edges, edges[1:]):
            if start > 0:
                xi = factors[0][start] if factors else 0.0
                state = _scale_state(state, xi)
            Y_hat, state = forward(params, X[:, start:stop], state)
            outputs.append(Y_hat)
        return ops.concat(outputs, 0), state

    return run


def state_gradient_norms(net, X, Y, state=None, loss=None):
    """||dL_T / dH_{T-d}|| for d = 1, ..., T: how strongly the loss of the last step depends on the
    state d steps before it.

    ``X``, ``Y``: one minibatch (batch, T). The model runs one step at a time; a zero tensor E_t is
    added to the state entering each step, and the gradient of the last step's mean cross-entropy
    L_T with respect to E_t is dL_T/dH_t. Returns a NumPy array of T norms, entry d - 1 for the
    distance d (d = T: the state the minibatch starts from). For an LSTM, H and C together count
    as the state.
    """
    loss, device = loss or lm_loss, model_device(net)
    X, Y = ops.to_device(X, device), ops.to_device(Y, device)  # beside the parameters (a GPU's)
    B, T = ops.shape(X)
    if state is None:
        state = net.begin_state(B, device)
    params, n = net.params, len(state)

    def last_step_loss(probes, X, Y, state):
        for t in range(T):
            state = tuple(s + e for s, e in zip(state, probes[t * n:(t + 1) * n]))
            Y_hat, state = net.forward(params, X[:, t:t + 1], state)
        return loss(Y_hat, Y[:, T - 1:T])

    probes = [ops.zeros_like(s) for _ in range(T) for s in state]
    _, grads = ops.value_and_grad(last_step_loss)(probes, X, Y, state)
    grads = [ops.to_numpy(g).astype(np.float64) for g in grads]
    norms = [np.sqrt(sum(float((g ** 2).sum()) for g in grads[t * n:(t + 1) * n])) for t in range(T)]
    return np.array(norms[::-1])
