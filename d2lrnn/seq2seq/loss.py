"""Losses over padded sequences: positions past a sequence's valid length count for nothing.

A batch of target sentences is padded to ``num_steps``; row ``i`` holds ``valid_len[i]`` real
tokens (its ``<eos>`` included), then ``<pad>``. With the mask M[i, t] = 1 if t < valid_len[i] else 0
and the cross-entropy l[i, t] of step t::

    MaskedSoftmaxCELoss: loss_i = (1 / num_steps) * sum_t M[i, t] l[i, t]   (the book's, per sentence)
    masked_token_loss:   sum_{i,t} M[i, t] l[i, t] / sum_{i,t} M[i, t]      (per valid token)

A padded position's logits and label reach neither value, so they get no gradient.

Label smoothing (Szegedy et al. 2016) with weight eps asks for the target y with probability 1 - eps
and spreads eps evenly over all K words: the cross-entropy against that distribution is

    l_eps = (1 - eps) (-log p_y) + eps (-(1 / K) sum_k log p_k)

so the model is never pushed to put all its probability on one word.
"""

from .. import ops
from ..backends import checked_indices, checked_lengths, checked_tensor


def sequence_mask(X, valid_len, value=0.0):
    """``X`` (batch, num_steps, ...) with every position t >= ``valid_len[i]`` of row i set to ``value``.

    Built from a 0/1 mask (X * M + value * (1 - M)), not by writing into ``X``, so it can be
    differentiated on every backend. ``valid_len`` must hold lengths from 0 to num_steps.
    """
    checked_tensor("X", X)
    checked_lengths("valid_len", valid_len, ops.shape(X)[1])
    return _sequence_mask(X, valid_len, value)


def _sequence_mask(X, valid_len, value=0.0):
    """:func:`sequence_mask` unchecked: what the (compiled) losses run."""
    shape = ops.shape(X)
    batch, steps = shape[0], shape[1]
    positions = ops.arange(steps, device=ops.device_of(valid_len))  # beside the lengths (a GPU's)
    positions = ops.reshape(ops.astype(positions, "float32"), (1, steps))
    lengths = ops.reshape(ops.astype(valid_len, "float32"), (batch, 1))
    kind = _kind_of(X)
    mask = ops.reshape(ops.astype(positions < lengths, kind), (batch, steps) + (1,) * (len(shape) - 2))
    if kind != "float32":
        value = int(value)
    return X * mask + value * (1 - mask)


def _kind_of(X):
    """'int32' or 'int64' for a tensor of integers (TensorFlow multiplies no integers by floats), else
    'float32'. Read from the dtype's name, which every framework spells with these words."""
    name = str(getattr(X, "dtype", ""))
    return next((kind for kind in ("int64", "int32") if kind in name), "float32")


def _masked_step_losses(pred, label, valid_len, label_smoothing=0.0):
    """(M * l, M): the cross-entropy of every step (``label_smoothing``: l_eps), zero past each valid
    length, and the mask."""
    batch, steps, classes = ops.shape(pred)
    logits = ops.reshape(pred, (batch * steps, classes))
    losses = ops.softmax_cross_entropy(logits, ops.reshape(label, (-1,)))
    if label_smoothing:
        uniform = -ops.mean(ops.log_softmax(logits, axis=-1), axis=-1)  # the cross-entropy against 1/K
        losses = (1 - label_smoothing) * losses + label_smoothing * uniform
    weights = _sequence_mask(ops.ones((batch, steps), device=ops.device_of(pred)), valid_len)
    return ops.reshape(losses, (batch, steps)) * weights, weights


class MaskedSoftmaxCELoss:
    """The book's masked loss: ``loss(pred, label, valid_len)`` -> (batch,) losses, each the mean over
    all ``num_steps`` of the cross-entropy at the valid positions (padding adds zeros).

    ``pred`` is (batch, num_steps, vocab) logits, ``label`` (batch, num_steps) indices. The book's
    TensorFlow cells give the valid lengths first and the labels before the logits, as Keras losses
    take them: ``MaskedSoftmaxCELoss(valid_len)(label, pred)``.
    """

    def __init__(self, valid_len=None):
        self.valid_len = valid_len

    def __call__(self, *args):
        if self.valid_len is None:
            pred, label, valid_len = args
        else:
            (label, pred), valid_len = args, self.valid_len
        checked_tensor("pred", pred)
        batch, steps, classes = ops.shape(pred)
        checked_indices("label", label, classes, "the logits' classes")
        checked_lengths("valid_len", valid_len, steps)
        return sentence_losses(pred, label, valid_len)


def sentence_losses(pred, label, valid_len, label_smoothing=0.0):
    """:class:`MaskedSoftmaxCELoss`'s losses, unchecked: what the (compiled) training objective runs."""
    losses, _ = _masked_step_losses(pred, label, valid_len, label_smoothing)
    return ops.mean(losses, axis=1)


def masked_token_loss(pred, label, valid_len, label_smoothing=0.0):
    """The mean cross-entropy per valid token: what training reports and optimises (a batch of long
    sentences and one of short ones weigh each of their tokens alike); ``label_smoothing`` eps: the
    cross-entropy against the target smoothed by eps (see the module's docstring)."""
    losses, weights = _masked_step_losses(pred, label, valid_len, label_smoothing)
    return ops.sum(losses) / ops.maximum(ops.sum(weights), 1.0)
