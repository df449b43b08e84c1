"""Training: clipping, SGD, perplexity, state handling, divergence, prediction, backend parity."""

import math

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from tests.parity import assert_close, to_numpy_tree


def test_grad_clipping_by_global_norm():
    # ||(3, 4)|| = 5: clipped to norm 1 gives (0.6, 0.8); a threshold above the norm changes nothing.
    grads = [ops.tensor([3.0]), ops.tensor([[4.0]])]
    clipped = d2l.grad_clipping(grads, 1.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in clipped], [0.6, 0.8], rtol=1e-6)
    same = d2l.grad_clipping(grads, 10.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in same], [3.0, 4.0], rtol=1e-6)


def test_grad_clipping_refuses_a_net_with_a_hint():
    net = d2l.RNNModelScratch(4, 3)
    with pytest.raises(TypeError, match="takes the list of gradients"):
        d2l.grad_clipping(net, 1)


def test_sgd_builds_new_tensors():
    p = [ops.tensor([1.0, 2.0])]
    new = d2l.sgd(p, [ops.tensor([0.5, -1.0])], lr=0.2, batch_size=2)
    np.testing.assert_allclose(ops.to_numpy(new[0]), [0.95, 2.1], rtol=1e-6)
    np.testing.assert_array_equal(ops.to_numpy(p[0]), [1.0, 2.0])


def _batches(V=12, B=4, T=6, n=5, seed=0):
    r = np.random.default_rng(seed)
    stream = r.integers(0, V, B * (T * n + 1))
    rows = stream[: B * (T * n + 1)].reshape(B, -1)
    return [(ops.from_numpy(rows[:, i:i + T]), ops.from_numpy(rows[:, i + 1:i + T + 1]))
            for i in range(0, T * n, T)]


def test_uniform_model_has_perplexity_equal_to_vocabulary_size():
    V = 12
    net = d2l.RNNModelScratch(V, 5)
    net.params = [p * 0.0 for p in net.params]  # all logits equal: p = 1/V for every token
    assert d2l.evaluate_perplexity(net, _batches(V)) == pytest.approx(V, rel=1e-5)


class _Spy:
    """Wraps a model to record the state each minibatch starts from."""

    def __init__(self, net):
        self.net, self.states = net, []

    def __getattr__(self, name):
        return getattr(self.net, name)

    def begin_state(self, batch_size, device=None):
        state = self.net.begin_state(batch_size, device)
        self.states.append("fresh")
        return state


@pytest.mark.parametrize("use_random_iter, fresh", [(True, 5), (False, 1)])
def test_state_is_reset_for_random_sampling_and_carried_for_sequential(use_random_iter, fresh):
    spy = _Spy(d2l.RNNModelScratch(12, 5))
    step = d2l.make_train_step(spy.net, 0.5, 1.0)

    def recording_step(params, X, Y, state):
        l, params, new_state = step(params, X, Y, state)
        spy.net.params = params
        return l, params, new_state

    d2l.train_epoch_ch8(spy, _batches(), None, None, None, use_random_iter, step=recording_step)
    assert spy.states.count("fresh") == fresh


def test_divergence_stops_with_epoch_and_step_and_keeps_last_good_parameters():
    net = d2l.RNNModelScratch(12, 5)
    step = d2l.make_train_step(net, 0.5, 1.0)
    seen = []

    def failing_step(params, X, Y, state):
        l, new_params, state = step(params, X, Y, state)
        seen.append(new_params)
        return (l * math.nan if len(seen) == 3 else l), new_params, state

    with pytest.raises(d2l.TrainingError, match=r"loss became nan at epoch 4, step 3: lower the learning"):
        d2l.train_epoch_ch8(net, _batches(), None, None, None, False, step=failing_step, epoch=4)
    assert net.params is seen[1]  # the parameters after the last step whose loss was finite


def test_training_lowers_perplexity_and_returns_history():
    d2l.manual_seed(0)
    net = d2l.RNNModelScratch(12, 16)
    batches = _batches(n=4)
    history = d2l.train_ch8(net, batches, None, 1.0, 8, val_iter=batches[:2], progress=False,
                            verbose=False)
    assert history["epoch"] == list(range(1, 9))
    assert history["train_ppl"][-1] < history["train_ppl"][0] < 12.5
    assert history["val_ppl"][-1] < history["val_ppl"][0]
    assert all(s > 0 for s in history["tokens_per_sec"])


class _CharVocab:
    def __init__(self, chars):
        self.idx_to_token = ["<unk>"] + list(chars)

    def __getitem__(self, token):
        return self.idx_to_token.index(token) if token in self.idx_to_token else 0

    def __len__(self):
        return len(self.idx_to_token)

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


def test_predict_greedy_and_sampled():
    vocab = _CharVocab("abc ")
    d2l.manual_seed(1)
    net = d2l.RNNModelScratch(len(vocab), 8)
    net.params = [p * 100.0 for p in net.params]
    greedy = d2l.predict_ch8("ab", 10, net, vocab, None)
    assert greedy.startswith("ab") and len(greedy) == 12
    assert greedy == d2l.predict_ch8("ab", 10, net, vocab, None)
    hot = d2l.predict_ch8("ab", 30, net, vocab, None, temperature=5.0, seed=3)
    assert hot == d2l.predict_ch8("ab", 30, net, vocab, None, temperature=5.0, seed=3)
    assert len(hot) == 32 and hot != d2l.predict_ch8("ab", 30, net, vocab, None, temperature=5.0, seed=4)


def test_predict_maps_unknown_prefix_characters_to_unk():
    vocab = _CharVocab("abc ")
    net = d2l.RNNModelScratch(len(vocab), 8)
    text = d2l.predict_ch8("a?Z", 5, net, vocab, None)
    assert text.startswith("a?Z") and len(text) == 8


def _twenty_steps(kind):
    """20 SGD steps with clipping from the same parameters and batches; losses and final params."""
    d2l.manual_seed(0)
    net = d2l.models.make_model(kind, 28, 32)
    step = d2l.make_train_step(net, 1.0, 1.0)
    r = np.random.default_rng(0)  # a repeating random "text": learnable within 20 steps
    stream = np.tile(r.integers(0, 28, 23), 8 * 7).reshape(8, -1)
    state, losses = net.begin_state(8), []
    for i in range(0, 7 * 20, 7):
        X, Y = ops.from_numpy(stream[:, i:i + 7]), ops.from_numpy(stream[:, i + 1:i + 8])
        l, net.params, state = step(net.params, X, Y, state)
        losses.append(float(ops.to_numpy(l)))
    return losses, to_numpy_tree(net.scratch_params())


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_twenty_sgd_steps_follow_numpy(kind):
    losses, params = _twenty_steps(kind)
    with d2l.use_backend("numpy"):
        ref_losses, ref_params = _twenty_steps(kind)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < losses[0]
    assert_close(params, ref_params, rtol=1e-4, atol=1e-5)


def test_perplexity_of_a_huge_finite_loss_is_inf_not_an_overflow():
    assert d2l.train.perplexity(np.log(28.0)) == pytest.approx(28.0)
    assert d2l.train.perplexity(1e6) == math.inf
