"""Training: clipping, SGD, perplexity, state handling, divergence, prediction, backend parity."""

import math
import warnings

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from tests.parity import assert_close, to_numpy_tree


def test_grad_clipping_by_global_norm():
    # ||(3, 4)|| = 5: clipped to norm 1 gives (0.6, 0.8); a threshold above the norm changes nothing.
    # rtol 1e-6: one float32 rounding of the scale (float32 has ~6e-8 relative precision).
    grads = [ops.tensor([3.0]), ops.tensor([[4.0]])]
    clipped = d2l.grad_clipping(grads, 1.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in clipped], [0.6, 0.8], rtol=1e-6)
    same = d2l.grad_clipping(grads, 10.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in same], [3.0, 4.0], rtol=1e-6)


def test_grad_clipping_refuses_a_net_with_a_hint():
    net = d2l.RNNModelScratch(4, 3)
    with pytest.raises(d2l.ArgumentError, match="takes the list of gradients"):
        d2l.grad_clipping(net, 1)


@pytest.mark.parametrize("theta", [0, -1, math.nan, math.inf, "1", None])
def test_grad_clipping_refuses_a_threshold_that_is_not_a_positive_number(theta):
    # clip -1 used to flip every gradient's sign (theta / max(norm, theta) = -1) and climb the loss
    with pytest.raises(d2l.ArgumentError, match="theta must be"):
        d2l.grad_clipping([ops.tensor([3.0, 4.0])], theta)


def test_sgd_builds_new_tensors():
    p = [ops.tensor([1.0, 2.0])]
    new = d2l.sgd(p, [ops.tensor([0.5, -1.0])], lr=0.2, batch_size=2)
    np.testing.assert_allclose(ops.to_numpy(new[0]), [0.95, 2.1], rtol=1e-6)  # by hand; float32 rounding
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
    # exp(log V) through a float32 log-softmax: ~1e-7 relative per token, 1e-5 for the mean
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


def test_a_nan_loss_stops_with_epoch_and_step_and_keeps_the_last_parameters_with_a_finite_loss():
    net = d2l.RNNModelScratch(12, 5)
    step = d2l.make_train_step(net, 0.5, 1.0)
    inputs, outputs = [], []

    def failing_step(params, X, Y, state):
        l, new_params, state = step(params, X, Y, state)
        inputs.append(params)
        outputs.append(new_params)
        return (l * math.nan if len(inputs) == 3 else l), new_params, state

    message = r"^loss became nan at epoch 4, step 3: the run diverged; lower the learning rate"
    with pytest.raises(d2l.TrainingError, match=message) as err:
        d2l.train_epoch_ch8(net, _batches(), None, None, None, False, step=failing_step, epoch=4)
    assert (err.value.epoch, err.value.step) == (4, 3)
    # The parameters that went into step 3 have a NaN loss; those of step 2 had a finite one.
    assert net.params is inputs[1] is outputs[0]


class _Recorder:
    """A train step that records what goes in and comes out, and changes nothing."""

    def __init__(self, step):
        self.step, self.calls = step, []

    def __call__(self, params, X, Y, state):
        l, new_params, new_state = self.step(params, X, Y, state)
        self.calls.append((params, float(ops.to_numpy(l)), new_params))
        return l, new_params, new_state


def _finite(params):
    return all(np.isfinite(ops.to_numpy(p)).all() for p in params)


@pytest.mark.parametrize("lr, fails_at, why", [
    (3e37, 3, "loss"),      # the updates stay finite but the logits overflow: the loss at step 3 is inf
    (1e300, 1, "update"),   # lr * gradient overflows float32 at once: the first update is inf
])
def test_a_real_divergence_keeps_the_last_finite_parameters_whose_loss_was_finite(lr, fails_at, why):
    net = d2l.RNNModelScratch(12, 8)
    record = _Recorder(d2l.make_train_step(net, lr, None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # overflow must be reported by the check, not as RuntimeWarnings
        with pytest.raises(d2l.TrainingError) as err:
            for epoch in (1, 2):
                d2l.train_epoch_ch8(net, _batches(), step=record, epoch=epoch)
    assert (err.value.epoch, err.value.step) == (1, fails_at) and len(record.calls) == fails_at
    params_in, loss, params_out = record.calls[-1]
    if why == "loss":
        assert not math.isfinite(loss) and _finite(params_in)
        assert net.params is record.calls[-2][0] and math.isfinite(record.calls[-2][1])
    else:
        assert math.isfinite(loss) and not _finite(params_out)
        assert net.params is params_in
        assert str(err.value).startswith(f"the update at epoch 1, step {fails_at} made parameters NaN or inf")
    assert _finite(net.params)


def test_the_book_call_with_a_huge_learning_rate_keeps_finite_parameters():
    # train_ch8(net, it, vocab, 1e300, 1) used to raise and leave net.params NaN
    d2l.manual_seed(0)
    train_iter, vocab = d2l.load_data_time_machine(4, 8, max_tokens=1000)
    net = d2l.RNNModelScratch(len(vocab), 16)
    initial = to_numpy_tree(net.params)
    with pytest.raises(d2l.TrainingError, match="the update at epoch 1, step 1 made parameters NaN or inf"):
        d2l.train_ch8(net, train_iter, vocab, 1e300, 1, progress=False, verbose=False)
    for kept, before in zip(to_numpy_tree(net.params), initial):
        np.testing.assert_array_equal(kept, before)


def test_a_perplexity_that_blows_up_stops_the_run_and_keeps_the_previous_epoch():
    # lr 10 with clipping at 1: every step is bounded, every loss finite, yet epoch 2 is far worse
    # than guessing. The rule: an epoch's training perplexity above DIVERGENCE_FACTOR * V.
    d2l.manual_seed(0)
    train_iter, _, vocab = d2l.load_data_lm("timemachine", 32, 35, max_tokens=20000, val_fraction=0, seed=0)
    net = d2l.RNNModelScratch(len(vocab), 16)
    after_epoch = {}
    message = (r"^training perplexity [0-9.e+]+ in epoch 2 is above 2 x the vocabulary size 28 .*"
               r"parameters from the end of epoch 1 are kept")

    def on_epoch(epoch, net, history):
        after_epoch[epoch] = (net.params, history["train_ppl"][-1])

    with pytest.raises(d2l.TrainingError, match=message) as err:
        d2l.train_ch8(net, train_iter, vocab, 10, 5, progress=False, verbose=False, on_epoch=on_epoch)
    assert (err.value.epoch, err.value.step) == (2, None)
    params, ppl = after_epoch[1]
    assert ppl <= d2l.train.DIVERGENCE_FACTOR * 28 and list(after_epoch) == [1]
    assert net.params is params


def test_a_slow_run_near_the_uniform_guess_is_not_divergence():
    net = d2l.RNNModelScratch(12, 5)
    history = d2l.train_ch8(net, _batches(), None, 1e-6, 2, progress=False, verbose=False)
    assert all(11.9 < p < 12.1 for p in history["train_ppl"])  # at V = 12, not flagged


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
    # Each backend's float32 kernels round differently (summation order), and 20 clipped steps
    # compound those ~1e-7 differences: 1e-4 relative (1e-5 absolute near zero) covers them.
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < losses[0]
    assert_close(params, ref_params, rtol=1e-4, atol=1e-5)


def test_perplexity_of_a_huge_finite_loss_is_inf_not_an_overflow():
    assert d2l.train.perplexity(np.log(28.0)) == pytest.approx(28.0)
    assert d2l.train.perplexity(1e6) == math.inf


BAD_PREDICT_ARGUMENTS = [
    (dict(temperature=-1), "temperature must be at least 0, got -1"),
    (dict(temperature=math.nan), "temperature must be a finite number, got nan"),
    (dict(temperature=math.inf), "temperature must be a finite number, got inf"),
    (dict(num_preds=2.5), "num_preds must be a whole number, got 2.5"),
    (dict(num_preds=-1), "num_preds must be at least 0, got -1"),
    (dict(prefix=""), "needs a non-empty prefix string"),
    (dict(prefix=None), "needs a non-empty prefix string"),
    (dict(seed=-1), "seed must be at least 0"),
    (dict(vocab=_CharVocab("ab")), "the vocabulary has 3 tokens but the model 5"),
]


@pytest.mark.parametrize("change, message", BAD_PREDICT_ARGUMENTS)
def test_predict_refuses_bad_arguments_in_one_line(change, message):
    net = d2l.RNNModelScratch(5, 4)
    args = dict(prefix="ab", num_preds=3, vocab=_CharVocab("abc "), temperature=0.5, seed=0) | change
    with pytest.raises(d2l.ArgumentError, match=message) as err:
        d2l.predict_ch8(args["prefix"], args["num_preds"], net, args["vocab"], None,
                        temperature=args["temperature"], seed=args["seed"])
    assert "\n" not in str(err.value)


BAD_TRAIN_ARGUMENTS = [
    (dict(lr=math.nan), "lr must be a finite number, got nan"),
    (dict(lr=0), "lr must be above 0, got 0"),
    (dict(lr=-1), "lr must be above 0, got -1"),
    (dict(lr="1"), "lr must be a number, got '1'"),
    (dict(num_epochs=0), "num_epochs must be at least 1, got 0"),
    (dict(num_epochs=2.5), "num_epochs must be a whole number, got 2.5"),
    (dict(clip=0), "clip must be above 0, got 0"),
    (dict(clip=-1), "clip must be above 0, got -1"),
    (dict(clip=math.nan), "clip must be a finite number, got nan"),
    (dict(history={"epoch": [1]}), "history must be the dict train_ch8 returned"),
]


@pytest.mark.parametrize("change, message", BAD_TRAIN_ARGUMENTS)
def test_train_refuses_bad_arguments_before_any_step(change, message):
    net = d2l.RNNModelScratch(12, 5)
    before = net.params
    args = dict(lr=1.0, num_epochs=1, clip=1.0, history=None) | change
    with pytest.raises(d2l.ArgumentError, match=message):
        d2l.train_ch8(net, _batches(), None, args["lr"], args["num_epochs"], clip=args["clip"],
                      history=args["history"], progress=False, verbose=False)
    assert net.params is before


def test_format_perplexity_is_compact_for_huge_values():
    fmt = d2l.train.format_perplexity
    assert [fmt(5.214), fmt(5.2, 1), fmt(1e84), fmt(math.inf), fmt(123456.7)] == [
        "5.21", "5.2", "1e+84", "inf", "123456.70"]


def test_continuing_a_history_gives_the_same_run_as_training_without_a_break():
    def run(split):
        d2l.manual_seed(0)
        train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 4, 8, max_tokens=1500, seed=3)
        net = d2l.RNNModelScratch(len(vocab), 8)
        kwargs = dict(val_iter=val_iter, progress=False, verbose=False)
        if split is None:
            return net, d2l.train_ch8(net, train_iter, vocab, 1.0, 4, **kwargs)
        history = d2l.train_ch8(net, train_iter, vocab, 1.0, split, **kwargs)
        return net, d2l.train_ch8(net, train_iter, vocab, 1.0, 4, history=history, **kwargs)

    (net, whole), (net2, parts) = run(None), run(2)
    assert parts["epoch"] == [1, 2, 3, 4]
    assert parts["train_ppl"] == whole["train_ppl"] and parts["val_ppl"] == whole["val_ppl"]
    for a, b in zip(to_numpy_tree(net.params), to_numpy_tree(net2.params)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(d2l.ArgumentError, match="already holds 4 epochs and num_epochs is 4"):
        d2l.train_ch8(net2, [], None, 1.0, 4, history=parts, progress=False, verbose=False)
