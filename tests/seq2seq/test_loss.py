"""Masked losses: the book's numbers, hand-computed cases, padding that reaches neither value nor gradient."""

import math

import numpy as np
import pytest

from d2lrnn import ops
from d2lrnn.seq2seq import MaskedSoftmaxCELoss, masked_token_loss, sequence_mask
from tests.parity import assert_parity


def test_sequence_mask_by_hand_and_with_a_value():
    X = ops.from_numpy(np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    valid_len = ops.from_numpy(np.array([1, 2]))
    np.testing.assert_array_equal(ops.to_numpy(sequence_mask(X, valid_len)), [[1, 0, 0], [4, 5, 0]])
    X3 = ops.ones((2, 3, 4))
    out = ops.to_numpy(sequence_mask(X3, valid_len, value=-1.0))
    assert (out[0, 0] == 1).all() and (out[0, 1:] == -1).all() and (out[1, 2] == -1).all()


def test_the_books_example_valid_lengths_4_2_0():
    loss = MaskedSoftmaxCELoss()
    values = ops.to_numpy(loss(ops.ones((3, 4, 10)), ops.from_numpy(np.ones((3, 4), dtype=np.int64)),
                               ops.from_numpy(np.array([4, 2, 0]))))
    np.testing.assert_allclose(values, [math.log(10), math.log(10) / 2, 0.0], rtol=1e-6)
    assert f"{values[0]:.4f} {values[1]:.4f} {values[2]:.4f}" == "2.3026 1.1513 0.0000"


def _case(seed=0):
    rng = np.random.default_rng(seed)
    pred = rng.standard_normal((3, 5, 7)).astype(np.float32)
    label = rng.integers(0, 7, (3, 5))
    valid_len = np.array([5, 2, 3])
    return pred, label, valid_len


def _numpy_token_loss(pred, label, valid_len):
    total, count = 0.0, 0
    for i in range(3):
        for t in range(valid_len[i]):
            logits = pred[i, t].astype(np.float64)
            total += np.log(np.exp(logits).sum()) - logits[label[i, t]]
            count += 1
    return total / count


def test_the_token_loss_is_the_mean_over_valid_tokens_by_hand():
    pred, label, valid_len = _case()
    got = masked_token_loss(ops.from_numpy(pred), ops.from_numpy(label), ops.from_numpy(valid_len))
    assert float(ops.to_numpy(got)) == pytest.approx(_numpy_token_loss(pred, label, valid_len), rel=1e-5)


def test_padded_logits_and_labels_change_neither_loss_nor_gradient():
    pred, label, valid_len = _case(1)
    changed_pred, changed_label = pred.copy(), label.copy()
    for i, n in enumerate(valid_len):
        changed_pred[i, n:] = 100.0 * np.random.default_rng(i).standard_normal((5 - n, 7))
        changed_label[i, n:] = (label[i, n:] + 3) % 7

    def run(p, y):
        f = ops.value_and_grad(lambda params, Y, L: masked_token_loss(params[0], Y, L))
        value, grads = f([ops.from_numpy(p)], ops.from_numpy(y), ops.from_numpy(valid_len))
        g = ops.to_numpy(grads[0])
        return float(ops.to_numpy(value)), g

    v1, g1 = run(pred, label)
    v2, g2 = run(changed_pred, changed_label)
    assert v1 == v2
    np.testing.assert_array_equal(g1, g2)
    for i, n in enumerate(valid_len):
        assert not g1[i, n:].any() and g1[i, :n].any()


def test_masked_losses_follow_numpy_on_every_backend():
    pred, label, valid_len = _case(2)

    def losses(p, y, n):
        return [MaskedSoftmaxCELoss()(p, y, n), masked_token_loss(p, y, n)]

    assert_parity(losses, [pred, label, valid_len])


def _numpy_smoothed_token_loss(pred, label, valid_len, eps):
    """By hand: each valid token's cross-entropy against (1 - eps) one-hot(y) + eps / K, averaged."""
    losses = []
    for i, n in enumerate(valid_len):
        for t in range(n):
            logits = pred[i, t].astype(np.float64)
            log_p = logits - np.log(np.exp(logits).sum())
            target = np.full(logits.shape, eps / logits.size)
            target[label[i, t]] += 1 - eps
            losses.append(-(target * log_p).sum())
    return float(np.mean(losses))


@pytest.mark.parametrize("eps", [0.1, 0.5])
def test_label_smoothing_is_the_cross_entropy_against_the_smoothed_target_by_hand(eps):
    pred, label, valid_len = _case(3)
    got = masked_token_loss(ops.from_numpy(pred), ops.from_numpy(label), ops.from_numpy(valid_len), eps)
    assert float(ops.to_numpy(got)) == pytest.approx(_numpy_smoothed_token_loss(pred, label, valid_len, eps),
                                                     rel=1e-5)
    plain = masked_token_loss(ops.from_numpy(pred), ops.from_numpy(label), ops.from_numpy(valid_len), 0.0)
    assert float(ops.to_numpy(plain)) == pytest.approx(_numpy_token_loss(pred, label, valid_len), rel=1e-5)


def test_label_smoothing_pulls_every_valid_logit_toward_the_uniform_target():
    """The gradient of the smoothed loss at a valid position is (softmax(z) - q) / N, q the smoothed target:
    every word's probability, the wrong ones' too, is pulled to eps / K at least."""
    pred, label, valid_len = _case(4)
    eps = 0.2
    f = ops.value_and_grad(lambda params, Y, L: masked_token_loss(params[0], Y, L, eps))
    _, grads = f([ops.from_numpy(pred)], ops.from_numpy(label), ops.from_numpy(valid_len))
    expected = np.zeros(pred.shape)
    count = int(sum(valid_len))
    for i, n in enumerate(valid_len):
        for t in range(n):
            logits = pred[i, t].astype(np.float64)
            p = np.exp(logits - logits.max())
            p /= p.sum()
            target = np.full(logits.shape, eps / logits.size)
            target[label[i, t]] += 1 - eps
            expected[i, t] = (p - target) / count
    np.testing.assert_allclose(ops.to_numpy(grads[0]), expected, rtol=1e-4, atol=1e-7)


def test_label_smoothed_losses_follow_numpy_on_every_backend():
    pred, label, valid_len = _case(5)
    assert_parity(lambda p, y, n: [masked_token_loss(p, y, n, 0.1)], [pred, label, valid_len])
