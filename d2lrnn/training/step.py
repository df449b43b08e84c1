"""One training step, compiled: the gradient of a task's objective, clipping, the optimizer's update.

Updates are functional: a step takes the parameter list and returns a new one, so the same code runs
under HIPS autograd (which forbids in-place writes), torch, TensorFlow and JAX (where the whole step is
compiled) and MXNet.
"""

import contextlib

import numpy as np

from .. import checks, ops
from ..backends import backend_name
from ..errors import ArgumentError
from ..keys import settings_key
from .optim import get_optimizer


def clip_scale(grads, theta):
    """min(1, theta / ||g||) for the global norm ||g|| of all gradients, as a scalar tensor.

    Computed as ``theta / max(||g||, theta)``, which equals min(1, theta/||g||) without a Python branch,
    so it also runs inside a compiled (graph-mode) step.
    """
    norm = ops.sqrt(ops.sum_of_squares(grads))
    return theta / ops.maximum(norm, theta)


def clip_by_global_norm(grads, theta):
    """g <- min(1, theta / ||g||) g over all gradients at once, as new tensors."""
    scale = clip_scale(grads, theta)
    return [g * scale for g in grads]


def check_average(average):
    """``average``, the decay of the parameters' moving average, as a float in [0, 1) (0: none); one line
    otherwise."""
    value = checks.number("average", average, hint=" (the decay of the averaged weights, e.g. 0.999)")
    if not 0 <= value < 1:
        raise ArgumentError(f"average is {average!r}: use a decay in [0, 1), e.g. 0.999 (0: no averaged "
                            "weights) (--ema)")
    return float(value)


def check_clip(clip):
    """``clip`` as a positive number, or None (no clipping); one line otherwise."""
    if clip is None:
        return None
    return checks.positive_number("clip", clip, " (the largest gradient norm, e.g. 1; None: no clipping)")


#: The precisions a training step's products may run in: float32, or bfloat16 with float32 weights.
PRECISIONS = ("float32", "bfloat16")


def check_precision(precision, device=None):
    """Whether ``precision`` asks for mixed precision: False for 'float32', True for 'bfloat16' where the
    backend has automatic mixed precision (``ops.autocast``); one line naming the fix otherwise."""
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision is {precision!r}: choose 'float32' or 'bfloat16' (products in "
                            "bfloat16, weights in float32) (--precision)")
    if precision == "float32":
        return False
    if ops.autocast(precision, device) is None:
        raise ArgumentError(f"precision 'bfloat16' needs automatic mixed precision, which d2lrnn has on the "
                            f"torch backend only, not on {backend_name()}: use --backend torch, or leave "
                            "--precision out")
    return True


class Updater:
    """A compiled training step with an optimizer: ``updater(params, *batch) -> (loss, new_params, aux)``.

    ``objective(params, *batch) -> (loss, aux)`` is what is differentiated (the task's: the language
    model's loss through its state, the encoder-decoder's masked loss). The gradient, clipping to global
    norm ``clip`` (None: none) and the optimizer's update run as one compiled function. The updater keeps
    the optimizer's state and the step count ``t``; the learning rate of step t is ``schedule(t)`` (a
    :class:`d2lrnn.training.optim.Schedule` or any function of t), else the optimizer's ``lr``.
    ``device`` is where the parameters live (the per-step numbers are put there).

    ``average`` (a decay in [0, 1); 0: off) keeps an exponential moving average of the parameters,
    updated inside the compiled step after every update, starting from the parameters it is made with:

        A_0 = P_0,   A_t = average * A_{t-1} + (1 - average) * P_t

    (:meth:`averaged_params`; what training validates and saves as the model when on). The averages are
    part of :meth:`state_dict`, so a resumed run continues them.

    ``precision`` 'bfloat16' runs the forward and backward passes under the backend's automatic mixed
    precision (``ops.autocast``: the products in bfloat16; the weights, their gradients, the optimizer and the
    loss in float32), where it has one (torch), and is refused in one line elsewhere.

    ``key`` names what ``objective`` computes besides its arguments (see ``ops.compile``): with it, and one
    of d2lrnn's optimizers, updaters of equal keys, optimizer settings, clipping and averaging share their
    compiled steps (a model of an earlier one's structure trains without tracing its step again).
    """

    def __init__(self, params, objective, optimizer, clip=1.0, schedule=None, device=None, average=0.0,
                 key=None, precision="float32"):
        self.device = device
        mixed = check_precision(precision, device)
        self.optimizer = get_optimizer(optimizer)
        clip = check_clip(clip)
        if schedule is not None and not callable(schedule):
            raise ArgumentError(f"schedule must be a function of the step (d2l.Schedule), got "
                                f"{type(schedule).__name__}")
        self.schedule, self.t = schedule, 0
        self._scalar_key = self._scalar_tensor = None
        self.average = decay = check_average(average)
        self.state = list(self.optimizer.init(params))
        n = self.num_optimizer_arrays = len(self.state)
        if decay:
            self.state += list(params)  # A_0 = P_0 (tensors are never written in place)
        value_and_grad = ops.value_and_grad(objective, has_aux=True)
        optimizer = self.optimizer

        def step(params, opt_state, scalars, *batch):
            # a fresh context each call: the products in bfloat16 where asked
            with ops.autocast(precision, device) if mixed else contextlib.nullcontext():
                (l, aux), grads = value_and_grad(params, *batch)
            if clip is not None and getattr(optimizer, "scales_gradients", False):
                # the optimizer applies the clipping scale itself (SGD: into the learning rate, one
                # elementwise pass over every parameter fewer)
                new_params, new_state = optimizer.update(params, grads, opt_state[:n], scalars,
                                                         grad_scale=clip_scale(grads, clip))
            else:
                if clip is not None:
                    grads = clip_by_global_norm(grads, clip)
                new_params, new_state = optimizer.update(params, grads, opt_state[:n], scalars)
            if decay:
                new_state = list(new_state) + [decay * A + (1.0 - decay) * P
                                               for A, P in zip(opt_state[n:], new_params)]
            return l, new_params, new_state, aux

        settings = settings_key(optimizer)
        shared = (None if key is None or settings is None
                  else ("step", key, settings, clip, decay, n, precision))
        self._step = ops.compile(step, key=shared)

    def _scalars(self, t):
        """The optimizer's numbers for step t as one tensor, made again only when they change (creating a
        tensor from NumPy costs Paddle 0.2 ms, a tenth of the book's RNN's concise step's overhead)."""
        values = tuple(float(v) for v in self.optimizer.scalars(t, self.lr(t)))
        key = (values, id(self.device))
        if key != self._scalar_key:
            self._scalar_key = key
            self._scalar_tensor = ops.tensor(np.array(values, np.float32), device=self.device)
        return self._scalar_tensor

    def lr(self, t=None):
        """The learning rate of step ``t`` (default: the next one)."""
        t = self.t + 1 if t is None else t
        return float(self.schedule(t)) if self.schedule is not None else self.optimizer.lr

    def __call__(self, params, *batch):
        t = self.t + 1
        l, new_params, self.state, aux = self._step(params, self.state, self._scalars(t), *batch)
        self.t = t
        return l, new_params, aux

    def averaged_params(self):
        """The moving average of the parameters (a new list), or None when ``average`` is off."""
        return list(self.state[self.num_optimizer_arrays:]) if self.average else None

    def state_dict(self):
        """The optimizer's state as NumPy arrays and the step count: what a resumed run needs (with
        ``average``, the averaged parameters after the optimizer's arrays, and ``averaged``: True)."""
        saved = {"optimizer": self.optimizer.name, "t": self.t,
                 "arrays": [np.asarray(ops.to_numpy(s), np.float32) for s in self.state]}
        if self.average:
            saved["averaged"] = True
        return saved

    def load_state_dict(self, saved):
        """Continue from :meth:`state_dict`'s output (checked against this updater's optimizer)."""
        name = getattr(self.optimizer, "name", None)
        arrays = list(saved.get("arrays", []))
        expected = [ops.shape(s) for s in self.state]
        shapes = [tuple(a.shape) for a in arrays]
        if saved.get("optimizer") != name or shapes != [tuple(e) for e in expected] \
                or bool(saved.get("averaged", False)) != bool(self.average):
            raise ArgumentError(f"the saved optimizer state is for {saved.get('optimizer')!r} with "
                                f"{len(arrays)} arrays{' (averaged weights)' * bool(saved.get('averaged'))}; "
                                f"this run uses {name!r} with {len(expected)}"
                                f"{' (averaged weights)' * bool(self.average)}: resume with the run's own "
                                "optimizer")
        self.state = [ops.from_numpy(a, device=self.device) for a in arrays]
        self.t = checks.integer("t", saved.get("t"), 0)
