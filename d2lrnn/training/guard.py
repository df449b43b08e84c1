"""The divergence guard: a run whose loss or parameters stop being numbers, or whose loss blows up, stops
with one :class:`~d2lrnn.errors.TrainingError` line and keeps the last parameters that were still good."""

import contextlib
import functools
import math

import numpy as np

from .. import ops
from ..backends import backend_name
from ..errors import TrainingError


@contextlib.contextmanager
def quiet_numerics():
    """Silence NumPy's overflow/invalid warnings: a diverging run is reported by the guard as one
    :class:`TrainingError` line, not by a page of RuntimeWarnings printed before it."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        yield


def _loss_and_probe(l, params):
    """[loss, probe]: the probe is 0 when every parameter is finite and not finite otherwise
    (``ops.nonfinite_probe``), so one small transfer checks them all."""
    return ops.stack([l, ops.nonfinite_probe(params)])


@functools.cache
def _compiled_probe(backend):
    """:func:`_loss_and_probe` compiled on ``backend`` (the active one), once per process: a run of a model
    whose parameters have the shapes of an earlier run's reuses its program (the next run in a notebook, a
    resumed run) instead of tracing and compiling it again."""
    return ops.compile(_loss_and_probe)


#: A run has diverged when an epoch's training perplexity, exp(mean cross-entropy per token), is above this
#: many times the vocabulary size: an untrained model guesses about uniformly (perplexity V, loss log V), so
#: the run has gone far above where it started. A slowly learning run (a tiny learning rate) stays near V and
#: is not flagged. Both tasks, language models and translation, are held to it, on every backend: a loss
#: that grows to 1e31 is as diverged as one that becomes inf.
DIVERGENCE_FACTOR = 2


def blown_up_loss(mean_loss, vocab_size):
    """Whether an epoch's mean cross-entropy per token over ``vocab_size`` tokens shows a diverged run:
    above log(:data:`DIVERGENCE_FACTOR` x ``vocab_size``), or not a number."""
    return not mean_loss <= math.log(DIVERGENCE_FACTOR * vocab_size)


def diverged(what, kept, epoch, step=None):
    """Raise the :class:`TrainingError` of a diverged run: ``what`` happened, ``kept`` says which
    parameters the model holds now."""
    cause = f"{what}: the run diverged; lower the learning rate (--lr) or clip gradients harder (--clip)"
    raise TrainingError(f"{cause}; {kept}", epoch, step, cause)


class DivergenceGuard:
    """What a run falls back to when it diverges.

    ``params`` are the last parameters known to be finite with a finite loss (after a step, the
    parameters that went into it); ``epoch_start`` those the current epoch started from.
    """

    def __init__(self, params):
        self.params = self.epoch_start = params
        self._probe = _compiled_probe(backend_name())

    def check_step(self, net, params, l, new_params, epoch, step):
        """Accept a step (``net.params = new_params``) or keep the last good parameters and raise.

        ``l`` is the loss of ``params``, ``new_params`` their update. Returns the loss as a float.
        """
        loss, probe = (float(v) for v in ops.to_numpy(self._probe(l, new_params)))
        if not math.isfinite(loss):
            net.params = self.params
            diverged(f"loss became {loss} at epoch {epoch}, step {step}",
                     "the last parameters whose loss was finite are kept", epoch, step)
        if not math.isfinite(probe):
            net.params = params  # their loss was finite; their update was not
            diverged(f"the update at epoch {epoch}, step {step} made parameters NaN or inf (loss {loss:.3g})",
                     "the parameters before that update are kept", epoch, step)
        self.params = params
        net.params = new_params
        return loss

    def check_epoch(self, net, epoch, blown_up=None):
        """Raise if the epoch blew up (``blown_up``: what happened, from the task; None: it did not),
        keeping the parameters the epoch started from; else remember the current ones as the next
        epoch's start."""
        if blown_up is not None:
            net.params = self.params = self.epoch_start
            kept = f"the end of epoch {epoch - 1}" if epoch > 1 else "before training"
            diverged(blown_up, f"the parameters from {kept} are kept", epoch)
        self.epoch_start = net.params
