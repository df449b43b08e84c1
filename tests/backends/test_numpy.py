"""The NumPy backend's own guarantees (it is the reference every other backend is tested against)."""

import autograd
import numpy as np
import pytest

from d2lrnn.backends import numpy as npb


@pytest.mark.parametrize("reduce", ["mean", "sum", "max"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 1), False)])
def test_reduction_gradients_stay_float32(reduce, axis, keepdims):
    # A float64 gradient flowing back from the loss turns every product after it into a slow
    # mixed-precision one; HIPS autograd's own mean gradient does this on NumPy 2.
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    fn = getattr(npb, reduce)
    grad = autograd.grad(lambda x: npb.sum(fn(x * 2.0, axis=axis, keepdims=keepdims)))(x)
    assert grad.dtype == np.float32


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 1), True)])
def test_mean_is_the_mean(axis, keepdims):
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    # float32 sums in another order than NumPy's pairwise mean: a few ulps, under 1e-6 relative
    np.testing.assert_allclose(npb.mean(x, axis=axis, keepdims=keepdims),
                               np.mean(x, axis=axis, keepdims=keepdims), rtol=1e-6)
    grad = autograd.grad(lambda x: npb.sum(npb.mean(x, axis=axis, keepdims=keepdims)))(x)
    count = x.size // np.mean(x, axis=axis, keepdims=keepdims).size
    np.testing.assert_allclose(grad, np.full_like(x, 1.0 / count), rtol=1e-6)


def test_gather_and_cross_entropy_gradients_stay_float32():
    # The row-gather and cross-entropy rules build their gradients by hand: a float64 zeros array
    # there would make every parameter float64 after the first update.
    r = np.random.default_rng(2)
    W = r.standard_normal((5, 3)).astype(np.float32)
    logits = r.standard_normal((4, 5)).astype(np.float32)
    rows, labels = np.array([[0, 4], [2, 2]]), np.array([1, 0, 4, 4])
    assert autograd.grad(lambda W: npb.sum(npb.take(W, rows) * 2.0))(W).dtype == np.float32
    grad = autograd.grad(lambda z: npb.sum(npb.softmax_cross_entropy(z * 2.0, labels)))(logits)
    assert grad.dtype == np.float32


def test_max_splits_the_gradient_evenly_among_ties():
    # The convention of TensorFlow's reduce_max and HIPS autograd's np.max: each of k tied
    # maxima gets 1/k of the gradient, so the gradient still sums to that of the maximum.
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=np.float32)
    grad = autograd.grad(lambda x: npb.sum(npb.max(x, axis=1)))(x)
    np.testing.assert_allclose(grad, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)  # by hand
