"""Optimizers and learning-rate schedules, written once above the shim.

An optimizer is a small object with three methods, all functional (new tensors, nothing written
in place, so HIPS autograd and compiled TensorFlow steps run them):

- ``init(params)``: its state for these parameters, a list of tensors (empty for SGD);
- ``scalars(t, lr)``: the numbers step ``t`` (1, 2, ...) needs at learning rate ``lr``, computed
  in Python and passed to the compiled step as one small tensor, so a learning rate that changes
  every step (a schedule) never recompiles the step;
- ``update(params, grads, state, scalars)``: ``(new_params, new_state)``; an optimizer whose
  ``scales_gradients`` is true also takes ``grad_scale=s``, the clipping scale, and steps along s g
  (SGD folds it into the learning rate: one elementwise pass over the parameters fewer).

:class:`SGD` with learning rate 1 and no weight decay is the book's ``sgd``. :class:`Adam` keeps
running averages of the gradient and of its square. Weight decay is L2 for SGD (added to the
gradient) and decoupled for Adam (AdamW: subtracted from the parameters after the adaptive step,
so the decay is not rescaled by the gradient's history).

A :class:`Schedule` maps training progress to a learning rate: a linear warm-up from 0, then
constant, cosine or linear decay to a floor.
"""

import math

from .. import checks, ops
from ..errors import ArgumentError


class SGD:
    """Minibatch stochastic gradient descent with optional L2 weight decay ``wd``:

        p <- p - lr * (g + wd * p)
    """

    name = "sgd"

    def __init__(self, lr=1.0, weight_decay=0.0):
        self.lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 1)")
        self.weight_decay = _weight_decay(weight_decay)

    def init(self, params):
        return []

    def scalars(self, t, lr):
        return [lr]

    #: ``update`` takes the clipping scale s (``grad_scale``) and steps along s g.
    scales_gradients = True

    def update(self, params, grads, state, scalars, grad_scale=None):
        """p - lr (g + wd p), with g = s g for a clipping scale s (``grad_scale``): without weight decay
        p - (lr s) g, the scale folded into the learning rate."""
        lr, wd = scalars[0], self.weight_decay
        if grad_scale is not None:
            if wd:
                grads = [g * grad_scale for g in grads]
            else:
                lr = lr * grad_scale
        if wd:
            return [p - lr * (g + wd * p) for p, g in zip(params, grads)], state
        return [p - lr * g for p, g in zip(params, grads)], state

    def __repr__(self):
        return f"SGD(lr={self.lr:g}, weight_decay={self.weight_decay:g})"


class Adam:
    """Adam (Kingma and Ba, 2015) with decoupled weight decay ``wd`` (AdamW; 0 by default):

        M <- beta1 M + (1 - beta1) g,        V <- beta2 V + (1 - beta2) g^2
        p <- p - lr * (M_hat / (sqrt(V_hat) + eps) + wd * p)

    with the bias corrections M_hat = M / (1 - beta1^t), V_hat = V / (1 - beta2^t) at step t: one
    :func:`d2lrnn.ops.adam_update` for all parameters.
    """

    name = "adam"

    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
        self.lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 0.003 for Adam)")
        for name, beta in (("beta1", beta1), ("beta2", beta2)):
            if not (checks.number(name, beta) >= 0 and beta < 1):
                raise ArgumentError(f"{name} is {beta!r}: use a decay rate in [0, 1), e.g. 0.9")
        self.beta1, self.beta2 = float(beta1), float(beta2)
        self.eps = checks.positive_number("eps", eps, " (added to the denominator, e.g. 1e-8)")
        self.weight_decay = _weight_decay(weight_decay)

    def init(self, params):
        """[M for each parameter, then V for each]: zeros."""
        return [ops.zeros_like(p) for p in params] + [ops.zeros_like(p) for p in params]

    def scalars(self, t, lr):
        """lr and the bias corrections 1 / (1 - beta^t), computed in double precision."""
        return [lr, 1.0 / (1.0 - self.beta1 ** t), 1.0 / (1.0 - self.beta2 ** t)]

    def update(self, params, grads, state, scalars):
        n = len(params)
        new_params, Ms, Vs = ops.adam_update(params, grads, state[:n], state[n:], scalars, self.beta1,
                                             self.beta2, self.eps, self.weight_decay)
        return new_params, Ms + Vs

    def __repr__(self):
        return (f"Adam(lr={self.lr:g}, beta1={self.beta1:g}, beta2={self.beta2:g}, eps={self.eps:g}, "
                f"weight_decay={self.weight_decay:g})")


OPTIMIZERS = {"sgd": SGD, "adam": Adam}
#: How many arrays of each parameter's shape each optimizer's state holds (what a checkpoint's reader
#: expects before it reads them).
STATE_COPIES = {"sgd": 0, "adam": 2}


def sgd(params, grads, lr, batch_size=1):
    """Minibatch stochastic gradient descent, the book's step: p <- p - lr * g / batch_size, as new
    tensors (the book's in-place forms are :func:`d2lrnn.book.training.sgd`)."""
    return [p - (lr / batch_size) * g for p, g in zip(params, grads)]


def _weight_decay(value):
    return checks.number("weight_decay", value, 0, hint=" (e.g. 0.01; 0: none)")


def get_optimizer(optimizer, lr=None, weight_decay=0.0):
    """An optimizer object from a name (``'sgd'``, ``'adam'``) or an optimizer given as is."""
    if isinstance(optimizer, str):
        key = optimizer.strip().lower()
        if key not in OPTIMIZERS:
            raise ArgumentError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
        kwargs = {"weight_decay": weight_decay}
        if lr is not None:
            kwargs["lr"] = lr
        return OPTIMIZERS[key](**kwargs)
    if not all(callable(getattr(optimizer, m, None)) for m in ("init", "scalars", "update")):
        raise ArgumentError(f"optimizer must be 'sgd', 'adam' or an object with init, scalars and update "
                            f"methods (d2l.SGD, d2l.Adam), got {type(optimizer).__name__}")
    return optimizer


DECAYS = ("constant", "cosine", "linear")


class Schedule:
    """The learning rate at a point of training: linear warm-up, then decay.

        lr(x) = lr * x / warmup                              for x < warmup
        lr(x) = lr * (floor + (1 - floor) * d(u))            after, u = (x - warmup) / (total - warmup)

    with d(u) = 1 (constant), (1 + cos(pi u)) / 2 (cosine) or 1 - u (linear), and u capped at 1.
    ``x`` counts whatever ``total`` and ``warmup`` count: optimizer steps, or seconds for training
    with a time budget. ``floor`` is the final learning rate as a fraction of ``lr``.
    """

    def __init__(self, lr, total, warmup=0, decay="cosine", floor=0.0):
        self.lr = checks.positive_number("lr", lr, " (the peak learning rate)")
        self.total = checks.positive_number("total", total, " (steps or seconds of training)")
        self.warmup = checks.number("warmup", warmup, 0, hint=" (steps or seconds of warm-up, e.g. 100)")
        if self.warmup >= self.total:
            raise ArgumentError(f"the warm-up ({warmup:g}) is as long as training ({total:g}): use a shorter "
                                "warm-up")
        if decay not in DECAYS:
            raise ArgumentError(f"unknown decay {decay!r}: use one of {', '.join(DECAYS)}")
        self.decay = decay
        self.floor = checks.number("floor", floor, 0, hint=" (final over peak learning rate, e.g. 0.1)")
        if self.floor > 1:
            raise ArgumentError(f"floor is {floor!r}: use a fraction of the peak learning rate in [0, 1]")

    def __call__(self, x):
        if x < self.warmup:
            return self.lr * x / self.warmup
        u = min(1.0, (x - self.warmup) / (self.total - self.warmup))
        d = {"constant": 1.0, "cosine": 0.5 * (1.0 + math.cos(math.pi * u)), "linear": 1.0 - u}[self.decay]
        return self.lr * (self.floor + (1.0 - self.floor) * d)

    def __repr__(self):
        return (f"Schedule(lr={self.lr:g}, total={self.total:g}, warmup={self.warmup:g}, "
                f"decay={self.decay!r}, floor={self.floor:g})")
