"""The language model's loss: the mean cross-entropy of the next token."""

from .. import ops


def lm_loss(Y_hat, Y):
    """Mean cross-entropy of predictions (num_steps * batch, vocab) for labels Y (batch, num_steps).

    The predictions are step-major, as the book's models return them, so the labels are read the same
    way: Y transposed, then flattened.
    """
    return ops.mean(ops.softmax_cross_entropy(Y_hat, ops.reshape(ops.transpose(Y), (-1,))))
