"""Truncated backpropagation through time against the hand-written float64 reference, on every backend.

The reference's BPTT (``tests/reference.py``) multiplies the gradient flowing back through the
state at step t by xi[t]; d2lrnn's truncation does it by ``scale_gradient`` inside the
differentiated function of the framework. Full backpropagation is xi = 1, regular truncation
every k steps is xi[k] = xi[2k] = ... = 0, randomized truncation a drawn xi in {0, 1/p}.
"""

import itertools

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.errors import ArgumentError
from d2lrnn.lm.train import lm_loss, lm_objective
from d2lrnn.lm.truncation import scale_gradient
from tests import reference
from tests.parity import to_numpy_tree

V, H, B, T = 7, 5, 3, 6
# float32 gradients against float64 ones: ~1e-7 relative rounding per op; 1e-5 leaves room for each
# framework's summation order (as in test_reference.py). atol for entries that cancel to ~0.
RTOL, ATOL = 1e-5, 1e-6


def _case(seed=0, scale=0.5):
    r = np.random.default_rng(seed)
    params = [(scale * r.standard_normal(s)).astype(np.float32) for s in [(V, H), (H, H), (H,), (H, V), (V,)]]
    X, Y = r.integers(0, V, (B, T)), r.integers(0, V, (B, T))
    H0 = (0.5 * r.standard_normal((B, H))).astype(np.float32)
    return params, X, Y, H0


def _net(kind, params):
    net = d2l.make_model(kind, V, H)
    net.load_scratch_params([ops.from_numpy(p) for p in params])
    return net


def _grads(net, truncation, X, Y, H0, *factors):
    """d2lrnn's loss and gradients under ``truncation`` (training=True: dropout would apply; none here)."""
    vg = ops.value_and_grad(lm_objective(net, lm_loss, True, truncation), has_aux=True)
    (l, _), grads = vg(net.params, ops.from_numpy(X), ops.from_numpy(Y), (ops.from_numpy(H0),), *factors)
    return float(ops.to_numpy(l)), to_numpy_tree(grads)


def _assert_grads(actual, expected, what):
    for name, a, e in zip(["W_xh", "W_hh", "b_h", "W_hq", "b_q"], actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg=f"{what}: {name}")


def test_scale_gradient_keeps_the_value_and_scales_the_gradient(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    def weighted_sum(params, xi):
        return ops.sum(scale_gradient(params[0], xi) * ops.from_numpy(w))

    for xi in (0.0, 0.5, 2.0):
        value, (g,) = ops.value_and_grad(weighted_sum)([ops.from_numpy(x)], xi)
        np.testing.assert_array_equal(ops.to_numpy(scale_gradient(ops.from_numpy(x), xi)), x)  # exactly x
        assert float(ops.to_numpy(value)) == pytest.approx(float((x * w).sum()), rel=1e-5)
        np.testing.assert_allclose(ops.to_numpy(g), xi * w, rtol=1e-6)


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_regular_truncation_detaches_the_state_every_k_steps(kind, k):
    params, X, Y, H0 = _case(1)
    xi = np.array([0.0 if t % k == 0 else 1.0 for t in range(T)])
    ref_loss, ref_grads, _ = reference.loss_and_grads(params, X, Y, H0, xi)
    l, grads = _grads(_net(kind, params), d2l.RegularTruncation(k), X, Y, H0)
    assert l == pytest.approx(ref_loss, rel=RTOL)  # truncation changes gradients, never the loss
    _assert_grads(grads, ref_grads, f"k={k}")
    if k < T:  # the cut must matter: the truncated gradient of W_hh differs from the full one
        full = reference.loss_and_grads(params, X, Y, H0)[1]
        assert np.abs(full[1] - ref_grads[1]).max() > 1e-3


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_full_bptt_is_the_exact_gradient(kind):
    params, X, Y, H0 = _case(2)
    ref_loss, ref_grads, _ = reference.loss_and_grads(params, X, Y, H0)
    for truncation in (None, d2l.FullBPTT(), d2l.RandomizedTruncation(1.0)):
        randomized = isinstance(truncation, d2l.RandomizedTruncation)
        factors = (ops.tensor(np.ones(T, np.float32)),) if randomized else ()
        l, grads = _grads(_net(kind, params), truncation, X, Y, H0, *factors)
        assert l == pytest.approx(ref_loss, rel=RTOL)
        _assert_grads(grads, ref_grads, repr(truncation))


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_randomized_truncation_scales_by_xi_and_is_unbiased(kind):
    """For every pattern of kept steps, the gradient is the reference's with that xi; averaged over
    the patterns with their probabilities it is the full gradient (E[xi_t] = 1)."""
    params, X, Y, H0 = _case(3)
    T_short, p = 4, 0.6
    X, Y = X[:, :T_short], Y[:, :T_short]
    net = _net(kind, params)
    expected = [np.zeros_like(g) for g in reference.loss_and_grads(params, X, Y, H0)[1]]
    for keep in itertools.product([False, True], repeat=T_short - 1):
        xi = np.array([1.0] + [1 / p if k else 0.0 for k in keep])  # xi[0]: the minibatch's own start
        _, grads = _grads(net, d2l.RandomizedTruncation(p), X, Y, H0, ops.tensor(xi.astype(np.float32)))
        ref_grads = reference.loss_and_grads(params, X, Y, H0, xi)[1]
        _assert_grads(grads, ref_grads, f"xi={xi}")
        weight = np.prod([p if k else 1 - p for k in keep])
        expected = [e + weight * g for e, g in zip(expected, grads)]
    _assert_grads(expected, reference.loss_and_grads(params, X, Y, H0)[1], "the mean over xi")


def test_randomized_factors_come_from_the_seeded_generator():
    truncation = d2l.RandomizedTruncation(0.5)
    d2l.manual_seed(3)
    first = ops.to_numpy(truncation.factors(200)[0])
    d2l.manual_seed(3)
    np.testing.assert_array_equal(ops.to_numpy(truncation.factors(200)[0]), first)
    assert set(np.unique(first)) == {0.0, 2.0}
    assert 0.35 < (first > 0).mean() < 0.65  # 200 draws of p = 0.5: 4.2 standard deviations either way


@pytest.mark.parametrize("truncation", [None, 3, d2l.RandomizedTruncation(0.8)])
def test_train_ch8_takes_a_truncation_and_learns(truncation):
    train_iter, _, vocab = d2l.load_data_lm(batch_size=4, num_steps=9, max_tokens=800)
    net = d2l.make_model("scratch", len(vocab), 16)
    history = d2l.train_ch8(net, train_iter, vocab, 1, 3, progress=False, verbose=False,
                            truncation=truncation, return_history=True)
    assert history["train_ppl"][-1] < history["train_ppl"][0] < len(vocab)


def test_regular_truncation_in_train_ch8_matches_the_reference_step():
    """One epoch of train_ch8 with k = 2 follows the reference's truncated SGD steps."""
    params, _, _, _ = _case(4, scale=0.3)
    corpus = np.random.default_rng(5).integers(0, V, 200)
    loader = d2l.SeqDataLoader.from_tokens(corpus, None, B, T, False, seed=13)
    net = _net("scratch", params)
    d2l.train_epoch_ch8(net, loader, updater=0.5, truncation=d2l.RegularTruncation(2))
    assert len(loader) >= 8
    xi = np.array([0.0 if t % 2 == 0 else 1.0 for t in range(T)])
    ref, state = reference.as64(params), np.zeros((B, H))
    for X, Y in loader:
        X, Y = ops.to_numpy(X), ops.to_numpy(Y)
        _, grads, state = reference.loss_and_grads(ref, X, Y, state, xi)
        ref = [p - 0.5 * g for p, g in zip(ref, reference.clip(grads, 1.0))]
    for name, mine, theirs in zip(net.param_names, to_numpy_tree(net.params), ref):
        # float32 vs float64 over ~10 steps: 1e-4 relative
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_state_gradient_norms_follow_the_reference(kind):
    params, X, Y, H0 = _case(6)
    norms = d2l.state_gradient_norms(_net(kind, params), ops.from_numpy(X), ops.from_numpy(Y),
                                     (ops.from_numpy(H0),))
    ref = [np.linalg.norm(g) for g in reference.last_loss_state_grads(params, X, Y, H0)][::-1]
    np.testing.assert_allclose(norms, ref, rtol=1e-4)  # float32 products of up to T Jacobians
    assert norms.shape == (T,)


def test_bad_truncations_are_one_line_errors():
    for bad, message in [("sometimes", "unknown truncation 'sometimes'"), (0, "k must be"),
                         (True, "unknown truncation True")]:
        with pytest.raises(ArgumentError, match=message):
            d2l.train_ch8(d2l.make_model("scratch", V, H), [], d2l.Vocab(list("abcdef")), 1, 1,
                          truncation=bad)
    for p in (0, 1.5, float("nan")):
        with pytest.raises(ArgumentError, match="p must"):
            d2l.RandomizedTruncation(p)
