"""d2lrnn's training step, data-order handling and decoding against an independent NumPy reference.

The reference (``tests/reference.py``) shares no code with d2lrnn, so these tests catch bugs in the
code that every backend shares (the loss pairing, clipping inside the step, the state carried or
reset between minibatches, the decode loop), which the backend-parity tests cannot: there both
sides run that same code.
"""

import gc

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from d2lrnn import ops
from tests import reference
from tests.parity import to_numpy_tree

V, H, B, T = 7, 5, 3, 4


def _params(seed=0, scale=0.5):
    """Parameters in the scratch layout, float32, large enough that every term matters."""
    r = np.random.default_rng(seed)
    shapes = [(V, H), (H, H), (H,), (H, V), (V,)]
    return [(scale * r.standard_normal(s)).astype(np.float32) for s in shapes]


def _tokens(seed, shape):
    return np.random.default_rng(seed).integers(0, V, shape)


def _net(kind, params):
    net = d2l.make_model(kind, V, H)
    net.load_scratch_params([ops.from_numpy(p) for p in params])
    return net


# -- the reference itself -------------------------------------------------------------------------


def test_reference_gradients_match_central_finite_differences():
    params = [p.astype(np.float64) for p in _params(1)]
    X, Y = _tokens(2, (B, T)), _tokens(3, (B, T))
    H0 = np.random.default_rng(4).standard_normal((B, H)) * 0.5
    l, grads, _ = reference.loss_and_grads(params, X, Y, H0)
    assert l == pytest.approx(reference.loss(params, X, Y, H0), rel=1e-12)
    # float64, eps 1e-6: truncation error ~eps^2 = 1e-12, rounding error ~1e-16 / eps = 1e-10.
    for g, fd in zip(grads, reference.finite_difference_grads(params, X, Y, H0)):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_reference_loss_pairs_each_output_with_the_next_token():
    # A hand check of the pairing: with W_hq = 0 the logits are b_q at every step, so the loss is
    # the mean of -log softmax(b_q)[Y[b, t]]; swapping rows and steps of Y (a transposed label
    # layout) must change it when the label counts per position differ.
    params = _params(5)
    params[3] = np.zeros_like(params[3])
    X, Y = _tokens(6, (B, T)), np.array([[0, 1, 2, 3], [0, 1, 2, 3], [4, 4, 4, 4]])
    b_q = params[4].astype(np.float64)
    logp = b_q - np.log(np.exp(b_q).sum())
    assert reference.loss(params, X, Y, np.zeros((B, H))) == pytest.approx(-logp[Y].mean(), rel=1e-12)


# -- one training step ------------------------------------------------------------------------------


# float32 against float64: the loss and updates carry ~1e-7 relative rounding; 1e-5 leaves room for
# each framework's summation order. Updates are compared in absolute terms too (atol 1e-6): an entry
# whose gradient is ~0 keeps its float32 parameter value, which has an ulp of ~6e-8 near 1.
RTOL, ATOL = 1e-5, 1e-6


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("theta", [None, 100.0, 0.05])  # none, a threshold that does not bind, one that does
def test_one_step_loss_clipped_gradients_and_update_match_the_reference(kind, theta):
    params = _params(7)
    X, Y = _tokens(8, (B, T)), _tokens(9, (B, T))
    H0 = (0.5 * np.random.default_rng(10).standard_normal((B, H))).astype(np.float32)
    lr = 0.7
    ref_loss, ref_grads, ref_params, ref_H = reference.sgd_step(params, X, Y, H0, lr, theta)
    if theta == 0.05:
        assert np.sqrt(sum((g * g).sum() for g in reference.loss_and_grads(params, X, Y, H0)[1])) > 0.05

    net = _net(kind, params)
    step = d2l.make_train_step(net, lr, theta)
    l, new_params, (H_T,) = step(net.params, ops.from_numpy(X), ops.from_numpy(Y), (ops.from_numpy(H0),))
    new_params = to_numpy_tree(new_params)
    np.testing.assert_allclose(float(ops.to_numpy(l)), ref_loss, rtol=RTOL)
    for name, p, new, ref_new, ref_g in zip(["W_xh", "W_hh", "b_h", "W_hq", "b_q"], params, new_params,
                                            ref_params, ref_grads):
        np.testing.assert_allclose(new, ref_new, rtol=RTOL, atol=ATOL, err_msg=f"updated {name}")
        # the clipped gradient d2lrnn applied, recovered from its update
        np.testing.assert_allclose((p - new) / lr, ref_g, rtol=1e-4, atol=ATOL / lr * 4,
                                   err_msg=f"clipped gradient of {name}")
    np.testing.assert_allclose(ops.to_numpy(H_T), ref_H, rtol=RTOL, atol=ATOL)


class _Recorder:
    """A train step that records each minibatch and the state it started from, and changes nothing."""

    def __init__(self, step):
        self.step, self.batches = step, []

    def __call__(self, params, X, Y, state):
        self.batches.append((ops.to_numpy(X), ops.to_numpy(Y), ops.to_numpy(state[0])))
        return self.step(params, X, Y, state)


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("use_random_iter", [False, True])
def test_an_epoch_carries_or_resets_the_state_as_the_reference_does(kind, use_random_iter):
    """Sequential partitioning carries the state from one minibatch into the next (without its
    gradient); random sampling starts every minibatch from zeros. The reference replays the same
    minibatches with its own state rule and must end with the same parameters."""
    params = _params(11, scale=0.3)
    corpus = np.tile(_tokens(12, 23), 6)
    loader = d2l.SeqDataLoader.from_tokens(corpus, None, B, T, use_random_iter, seed=13)
    net = _net(kind, params)
    record = _Recorder(d2l.make_train_step(net, 0.5, 1.0))
    d2l.train_epoch_ch8(net, loader, use_random_iter=use_random_iter, step=record)
    assert len(record.batches) >= 4

    ref_params, state = params, np.zeros((B, H))
    for i, (X, Y, started_from) in enumerate(record.batches):
        # the labels are the inputs shifted by one token of the corpus
        assert (X[:, 1:] == Y[:, :-1]).all()
        if use_random_iter:
            state = np.zeros((B, H))
        np.testing.assert_allclose(started_from, state, rtol=RTOL, atol=ATOL, err_msg=f"state of batch {i}")
        _, _, ref_params, state = reference.sgd_step(ref_params, X, Y, state, 0.5, 1.0)
    for got, want in zip(to_numpy_tree(net.scratch_params()), ref_params):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # several steps of float32 rounding


def test_the_default_step_of_an_epoch_is_clipped_sgd_at_the_given_rate():
    params = _params(14)
    X, Y = _tokens(15, (B, T)), _tokens(16, (B, T))
    net = _net("scratch", params)
    d2l.train_epoch_ch8(net, [(ops.from_numpy(X), ops.from_numpy(Y))], None, 0.3)  # updater: the rate
    _, _, ref_params, _ = reference.sgd_step(params, X, Y, np.zeros((B, H)), 0.3, 1.0)  # clipped at 1
    for got, want in zip(to_numpy_tree(net.params), ref_params):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_evaluated_perplexity_is_the_reference_loss_carried_across_minibatches():
    params = _params(17)
    batches = [(_tokens(18 + i, (B, T)), _tokens(30 + i, (B, T))) for i in range(3)]
    net = _net("scratch", params)
    ppl = d2l.evaluate_perplexity(net, [(ops.from_numpy(X), ops.from_numpy(Y)) for X, Y in batches])
    state, total = np.zeros((B, H)), 0.0
    for X, Y in batches:
        total += reference.loss(params, X, Y, state)
        state = reference.forward(params, X, state)[1][-1]
    assert ppl == pytest.approx(np.exp(total / len(batches)), rel=1e-5)


# -- generation -------------------------------------------------------------------------------------


class _Chars:
    """A vocabulary of V characters: '<unk>' then 'a', 'b', ..."""

    idx_to_token = ["<unk>"] + [chr(ord("a") + i) for i in range(V - 1)]

    def __getitem__(self, token):
        return self.idx_to_token.index(token) if token in self.idx_to_token else 0

    def __len__(self):
        return V

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("temperature, seed", [(0.0, None), (1.0, 3), (0.5, 4)])
def test_generation_follows_an_independent_decode_loop(kind, temperature, seed):
    """Greedy and sampled text: the state is carried from each generated character to the next,
    every character is fed back, and <unk> is never produced."""
    params = _params(19, scale=1.5)  # logits far apart: no near-ties for float32 to break differently
    vocab, prefix = _Chars(), "abca"
    net = _net(kind, params)
    text = d2l.predict_ch8(prefix, 30, net, vocab, temperature=temperature, seed=seed)
    rng = np.random.default_rng(seed)
    ids = reference.decode(params, [vocab[c] for c in prefix], 30, temperature, rng)
    assert text == prefix + "".join(vocab.to_tokens(ids))
    assert "<unk>" not in text[len(prefix):]


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_generation_compiles_one_token_step_per_model_and_lets_it_go_with_the_model(
        kind, backend, no_shared_programs):
    """Generating calls the model once per token: TensorFlow and JAX run that call as one program made
    once per model (then reused by every later call, with the model's parameters as they are then); the
    other backends call its forward as it is. The prefix's warm-up is compiled on JAX only (one call per
    generation: TensorFlow runs it eagerly). The steps go when the model does."""
    params = _params(19, scale=1.5)
    vocab, steps, prefixes = _Chars(), d2lrnn.lm.generate._TOKEN_STEPS, d2lrnn.lm.generate._PREFIX_STEPS
    net = _net(kind, params)
    first = d2l.predict_ch8("abca", 12, net, vocab)
    retrained = _params(23, scale=1.5)
    net.load_scratch_params([ops.from_numpy(p) for p in retrained])  # new tensors, as training makes
    second = d2l.predict_ch8("abca", 12, net, vocab)
    for text, weights in ((first, params), (second, retrained)):
        expected = reference.decode(weights, [1, 2, 3, 1], 12, 0.0, None)  # "abca" as ids
        assert text == "abca" + "".join(vocab.to_tokens(expected))
    assert first != second  # the second run read the new parameters
    step, prefix = d2lrnn.lm.generate.token_step(net), d2lrnn.lm.generate.prefix_step(net)
    assert net in steps and step is steps[net] and prefix is prefixes[net]
    if backend in ("tensorflow", "jax"):
        assert step.compilations() == 1  # two calls of 12 tokens each
    else:
        assert step.compilations is None  # no compiler: the model's forward itself
    if backend == "jax":  # compiled for its few calls only where each eager operation would compile
        assert prefix.compilations() == 1  # "abc" twice
    else:
        assert prefix.compilations is None
    del net, step, prefix
    gc.collect()
    assert len(steps) == len(prefixes) == 0


def test_sampling_frequencies_follow_softmax_of_logits_over_temperature():
    # 20,000 draws of the next character after one prefix, at T = 0.5 and at T = 2: each
    # character's frequency within 4 standard errors of softmax(logits / T) (and <unk> never).
    params = _params(21, scale=1.0)
    vocab = _Chars()
    logits = reference.forward(params, np.array([[vocab[c] for c in "bad"]]), np.zeros((1, H)))[0][-1][0]
    for temperature in (0.5, 2.0):
        p = reference.next_token_probs(logits, temperature)
        rng = np.random.default_rng(22)
        draws = np.array([d2lrnn.lm.generate.next_token(logits, temperature, rng) for _ in range(20000)])
        freq = np.bincount(draws, minlength=V) / len(draws)
        se = np.sqrt(p * (1 - p) / len(draws))
        assert freq[0] == 0
        np.testing.assert_array_less(np.abs(freq - p), 4 * se + 1e-12)
