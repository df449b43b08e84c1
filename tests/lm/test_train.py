"""Training: clipping, SGD, perplexity, state handling, divergence, prediction, backend parity."""

import contextlib
import math
import warnings

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.lm.train import LanguageModelTask
from tests.conftest import as_time_module, ticking_clock
from tests.parity import assert_close, to_numpy_tree


def test_grad_clipping_by_global_norm():
    # ||(3, 4)|| = 5: clipped to norm 1 gives (0.6, 0.8); a threshold above the norm changes nothing.
    # rtol 1e-6: one float32 rounding of the scale (float32 has ~6e-8 relative precision).
    grads = [ops.tensor([3.0]), ops.tensor([[4.0]])]
    clipped = d2l.grad_clipping(grads, 1.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in clipped], [0.6, 0.8], rtol=1e-6)
    same = d2l.grad_clipping(grads, 10.0)
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in same], [3.0, 4.0], rtol=1e-6)


def test_grad_clipping_of_a_net_without_attached_gradients_names_the_form_to_use():
    net = d2l.RNNModelScratch(4, 3)  # d2lrnn's parameters: plain tensors, no backward pass has run
    with pytest.raises(d2l.ArgumentError, match=r"grad_clipping\(net, theta\)"):
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
    assert ppl <= d2lrnn.lm.train.DIVERGENCE_FACTOR * 28 and list(after_epoch) == [1]
    assert net.params is params


def test_a_slow_run_near_the_uniform_guess_is_not_divergence():
    net = d2l.RNNModelScratch(12, 5)
    history = d2l.train_ch8(net, _batches(), None, 1e-6, 2, progress=False, verbose=False,
                            return_history=True)
    assert all(11.9 < p < 12.1 for p in history["train_ppl"])  # at V = 12, not flagged


def test_training_lowers_perplexity_and_returns_history():
    d2l.manual_seed(0)
    net = d2l.RNNModelScratch(12, 16)
    batches = _batches(n=4)
    history = d2l.train_ch8(net, batches, None, 1.0, 8, val_iter=batches[:2], progress=False,
                            verbose=False, return_history=True)
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


def _run_twenty(net, step):
    """20 steps of ``step`` on batches of 8 x 7 of a repeating random "text" (learnable within 20
    steps); the losses and the final parameters."""
    r = np.random.default_rng(0)
    stream = np.tile(r.integers(0, 28, 23), 8 * 7).reshape(8, -1)
    state, losses = net.begin_state(8), []
    for i in range(0, 7 * 20, 7):
        X, Y = ops.from_numpy(stream[:, i:i + 7]), ops.from_numpy(stream[:, i + 1:i + 8])
        l, net.params, state = step(net.params, X, Y, state)
        losses.append(float(ops.to_numpy(l)))
    return losses, to_numpy_tree(net.scratch_params())


def _twenty_steps(kind, cell="rnn", num_layers=1, bidirectional=False):
    """20 SGD steps with clipping from the same parameters and batches; losses and final params."""
    d2l.manual_seed(0)
    net = d2l.make_model(kind, 28, 32, cell=cell, num_layers=num_layers, bidirectional=bidirectional)
    step = d2l.make_train_step(net, 1.0, 1.0)
    return _run_twenty(net, step)


# (cell, layers, bidirectional): the plain RNN, both gated cells, a 2-layer and a bidirectional model.
# The concise GRU is the frameworks' reset-after form, the scratch one the book's: each is compared
# with the same model on numpy (where the concise model runs the stack's own recurrence).
MODELS = [("rnn", 1, False), ("gru", 1, False), ("lstm", 1, False), ("lstm", 2, False), ("gru", 2, False),
          ("gru", 1, True), ("lstm", 2, True)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m[0]}-{m[1]}layer{'-bidi' * m[2]}")
@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_twenty_sgd_steps_follow_numpy(kind, model):
    losses, params = _twenty_steps(kind, *model)
    with d2l.use_backend("numpy"):
        ref_losses, ref_params = _twenty_steps(kind, *model)
    # Each backend's float32 kernels round differently (summation order), and 20 clipped steps
    # compound those ~1e-7 differences: 1e-4 relative (1e-5 absolute near zero) covers them.
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < losses[0]
    assert_close(params, ref_params, rtol=1e-4, atol=1e-5)


def _seeded_dropout(x, p):
    """Dropout whose mask is drawn from NumPy, keyed by the tensor's shape: every backend (and every
    trace of a compiled step) then drops the same units, so training with dropout can be compared."""
    shape = tuple(int(d) for d in ops.shape(x))
    keep = np.random.default_rng(sum(shape) + 1000 * len(shape)).random(shape) >= p
    return x * ops.from_numpy((keep / (1 - p)).astype(np.float32))


def _twenty_adam_steps(kind, cell, num_layers):
    """20 steps of Adam (decoupled weight decay) under a warm-up and cosine schedule, with dropout on
    the input tokens, between the layers and before the output layer; losses and final params."""
    d2l.manual_seed(0)
    between = 0.3 if kind == "scratch" else 0.0  # a framework's fused layer draws its own masks
    net = d2l.make_model(kind, 28, 32, cell=cell, num_layers=num_layers, dropout=between,
                                input_dropout=0.1, output_dropout=0.2)
    schedule = d2l.Schedule(0.01, total=20, warmup=5, decay="cosine", floor=0.1)
    # From the book's 0.01-scale initialization a 2-layer LSTM's first gradients are partly 1e-9 to
    # 1e-11, below Adam's eps, where float32 results differ between frameworks in the third digit and
    # Adam turns them into steps of about lr. Weights 10x larger (0.1-scale, as after some training)
    # keep every gradient well above eps, so the comparison measures the update, not that rounding.
    net.params = [p * 10 for p in net.params]
    step = d2l.make_train_step(net, 0.01, 1.0, optimizer=d2l.Adam(0.01, weight_decay=0.01), schedule=schedule)
    return _run_twenty(net, step)


@pytest.mark.parametrize("kind, cell, num_layers", [("scratch", "lstm", 2), ("scratch", "gru", 2),
                                                    ("concise", "lstm", 1), ("concise", "gru", 1)])
def test_twenty_adam_steps_with_dropout_and_a_schedule_follow_numpy(kind, cell, num_layers, monkeypatch):
    with d2l.use_backend("numpy"):
        ref_losses, ref_params = _twenty_adam_steps(kind, cell, num_layers)
    monkeypatch.setattr(d2l.backends.get_backend(), "dropout", _seeded_dropout)
    losses, params = _twenty_adam_steps(kind, cell, num_layers)
    with d2l.use_backend("numpy"):
        monkeypatch.setattr(d2l.backends.get_backend(), "dropout", _seeded_dropout)
        seeded_losses, seeded_params = _twenty_adam_steps(kind, cell, num_layers)
    assert seeded_losses != ref_losses  # the seeded masks replaced numpy's own: dropout is on
    # the same 1e-4 as the SGD steps above: float32 rounding per framework, compounded over 20 steps
    np.testing.assert_allclose(losses, seeded_losses, rtol=1e-4)
    assert losses[-1] < losses[0]
    assert_close(params, seeded_params, rtol=1e-4, atol=1e-5)


def test_perplexity_of_a_huge_finite_loss_is_inf_not_an_overflow():
    assert d2lrnn.training.metrics.perplexity(np.log(28.0)) == pytest.approx(28.0)
    assert d2lrnn.training.metrics.perplexity(1e6) == math.inf


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
    fmt = d2lrnn.training.metrics.format_perplexity
    assert [fmt(5.214), fmt(5.2, 1), fmt(1e84), fmt(math.inf), fmt(123456.7)] == [
        "5.21", "5.2", "1e+84", "inf", "123456.70"]


def test_continuing_a_history_gives_the_same_run_as_training_without_a_break():
    def run(split):
        d2l.manual_seed(0)
        train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 4, 8, max_tokens=1500, seed=3)
        net = d2l.RNNModelScratch(len(vocab), 8)
        kwargs = dict(val_iter=val_iter, progress=False, verbose=False, return_history=True)
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


# -- the exact words of each error: a hint that names the fix is part of the function's contract ------

_NO_GRADS = ("d2l.grad_clipping(net, theta) works on the gradients a backward pass attaches to parameters "
             "(PyTorch, MXNet, Paddle), but {}: use grads = d2l.grad_clipping(grads, theta)")
_NOT_YET = ("d2l.grad_clipping(net, theta): a parameter has no gradient attached; call l.backward() first "
            "(PyTorch: requires_grad_(True) on the parameters, MXNet: attach_grad() and autograd.record(), "
            "Paddle: stop_gradient = False)")
#: The book's grad_clipping(net, theta) on d2lrnn's own model, whose parameters no backward pass has reached.
NO_ATTACHED_GRADIENTS = {
    "numpy": _NO_GRADS.format("tensors on the numpy backend carry no gradients"),
    "jax": _NO_GRADS.format("tensors on the jax backend carry no gradients"),
    "tensorflow": _NO_GRADS.format("TensorFlow attaches no gradients to variables "
                                   "(tape.gradient returns them)"),
    "torch": _NOT_YET,
    "mxnet": _NOT_YET,
    "paddle": _NOT_YET,
}

EXACT_MESSAGES = [
    (lambda: d2l.grad_clipping(d2l.RNNModelScratch(4, 3), 1), NO_ATTACHED_GRADIENTS[d2l.backend_name()]),
    (lambda: d2l.grad_clipping([ops.tensor([1.0])], -1),
     "theta must be above 0, got -1 (the largest gradient norm, e.g. 1)"),
    (lambda: d2l.make_train_step(d2l.RNNModelScratch(4, 3), 0),
     "lr must be above 0, got 0 (the learning rate, e.g. 1)"),
    (lambda: d2l.make_train_step(d2l.RNNModelScratch(4, 3), 1.0, -1),
     "clip must be above 0, got -1 (the largest gradient norm, e.g. 1; None: no clipping)"),
    (lambda: d2l.train_ch8(d2l.RNNModelScratch(4, 3), [], None, math.nan, 1),
     "lr must be a finite number, got nan (the learning rate, e.g. 1)"),
    (lambda: d2l.predict_ch8("ab", 3, d2l.RNNModelScratch(5, 3), _CharVocab("abc "), temperature=-1),
     "temperature must be at least 0, got -1 (0: greedy; e.g. 0.8 to sample)"),
    (lambda: d2l.predict_ch8("ab", 3, d2l.RNNModelScratch(6, 3), _CharVocab("abc ")),
     "the vocabulary has 5 tokens but the model 6: pass the vocabulary the model was trained with"),
    (lambda: d2l.train_epoch_ch8(d2l.RNNModelScratch(4, 3), [], None, 1.0),
     "the training iterator produced no minibatch: use a smaller batch size or number of steps, or a "
     "longer corpus"),
    (lambda: d2l.evaluate_perplexity(d2l.RNNModelScratch(4, 3), []),
     "the evaluation iterator produced no minibatch: hold out more text"),
    (lambda: d2l.RNNModelScratch(0, 5), "vocab_size must be at least 1, got 0 (len(vocab))"),
    (lambda: d2l.RNNModelScratch(5, 0), "num_hiddens must be at least 1, got 0 (hidden units, e.g. 512)"),
    (lambda: d2l.make_model("scratch", 0, 5), "vocab_size must be at least 1, got 0 (len(vocab))"),
    (lambda: d2l.make_model("concise", 5, 0),
     "num_hiddens must be at least 1, got 0 (hidden units, e.g. 512)"),
    (lambda: d2l.RNNModel(d2l.rnn_layer(5, 3), 0), "vocab_size must be at least 1, got 0 (len(vocab))"),
]


@pytest.mark.parametrize("call, message", EXACT_MESSAGES)
def test_errors_say_what_is_wrong_and_how_to_fix_it_word_for_word(call, message):
    with pytest.raises(d2l.D2LRNNError) as err:
        call()
    assert str(err.value) == message


def _failing_at(monkeypatch, calls, value=math.nan):
    """Make every train step built from now on return a loss of ``value`` at the given call numbers
    (counted over the run), recording the parameters that go into each call."""
    from d2lrnn.lm import train

    real, inputs = train.make_updater, []

    def make_updater(*args, **kwargs):
        step = real(*args, **kwargs)

        def failing(params, X, Y, state):
            inputs.append(params)
            l, new_params, new_state = step(params, X, Y, state)
            return (l * value if len(inputs) in calls else l), new_params, new_state

        return failing

    monkeypatch.setattr(train, "make_updater", make_updater)
    return inputs


def test_a_nan_loss_at_the_very_first_step_keeps_the_initial_parameters(monkeypatch):
    net = d2l.RNNModelScratch(12, 5)
    initial = net.params
    _failing_at(monkeypatch, {1})
    with pytest.raises(d2l.TrainingError) as err:
        d2l.train_ch8(net, _batches(), None, 0.5, 2, progress=False, verbose=False)
    assert str(err.value) == ("loss became nan at epoch 1, step 1: the run diverged; lower the learning rate "
                              "(--lr) or clip gradients harder (--clip); the last parameters whose loss was "
                              "finite are kept")
    assert err.value.cause == ("loss became nan at epoch 1, step 1: the run diverged; lower the learning "
                               "rate (--lr) or clip gradients harder (--clip)")
    assert net.params is initial


def test_a_nan_loss_first_in_epoch_2_keeps_the_parameters_of_the_last_step_of_epoch_1(monkeypatch):
    net = d2l.RNNModelScratch(12, 5)
    inputs = _failing_at(monkeypatch, {len(_batches()) + 1})  # the first step of epoch 2
    with pytest.raises(d2l.TrainingError, match="^loss became nan at epoch 2, step 1: ") as err:
        d2l.train_ch8(net, _batches(), None, 0.5, 3, progress=False, verbose=False)
    assert (err.value.epoch, err.value.step) == (2, 1)
    assert net.params is inputs[-2]  # what went into epoch 1's last step: its loss was finite


def test_an_update_that_overflows_names_its_step_and_keeps_what_went_in():
    net = d2l.RNNModelScratch(12, 5)
    initial = net.params
    with pytest.raises(d2l.TrainingError) as err:
        d2l.train_epoch_ch8(net, _batches(), None, 1e300)  # no epoch given: epoch 1
    loss = str(err.value).split("(loss ")[1].split(")")[0]
    assert str(err.value) == (f"the update at epoch 1, step 1 made parameters NaN or inf (loss {loss}): "
                              "the run diverged; lower the learning rate (--lr) or clip gradients harder "
                              "(--clip); the parameters before that update are kept")
    assert float(loss) == pytest.approx(math.log(12), abs=0.01)  # log V (untrained), printed to 3 digits
    assert net.params is initial


def test_the_divergence_rule_is_above_twice_the_vocabulary_size_not_at_it():
    net = d2l.RNNModelScratch(12, 5)
    start = net.params
    guard = d2lrnn.training.guard.DivergenceGuard(start)
    _check_epoch(guard, net, 24.0, 1)  # exactly 2 x V: still a run
    net.params = [p + 1.0 for p in net.params]
    with pytest.raises(d2l.TrainingError) as err:
        _check_epoch(guard, net, 24.001, 2)
    assert str(err.value) == ("training perplexity 24.00 in epoch 2 is above 2 x the vocabulary size 12 (a "
                              "uniform guess scores 12): the run diverged; lower the learning rate (--lr) or "
                              "clip gradients harder (--clip); the parameters from the end of epoch 1 are "
                              "kept")
    assert (err.value.epoch, err.value.step) == (2, None)
    assert net.params is start  # what epoch 2 started from
    with pytest.raises(d2l.TrainingError, match="the parameters from before training are kept$"):
        _check_epoch(d2lrnn.training.guard.DivergenceGuard(start), net, math.inf, 1)


def _check_epoch(guard, net, ppl, epoch):
    """The guard's end-of-epoch check of a language model whose epoch scored perplexity ``ppl``."""
    guard.check_epoch(net, epoch, LanguageModelTask(net).blown_up(net, ppl, epoch))


# -- the defaults of train_epoch_ch8 and what it reports ------------------------------------------------


def _scaled_net(V=12, h=5, scale=2.0, seed=3):
    net = d2l.RNNModelScratch(V, h)
    r = np.random.default_rng(seed)
    net.params = [ops.from_numpy((scale * r.standard_normal(ops.shape(p))).astype(np.float32))
                  for p in net.params]
    return net


def test_the_default_step_is_sgd_at_rate_1_clipped_at_norm_1():
    from tests import reference

    net = _scaled_net()
    params = to_numpy_tree(net.params)
    X, Y = _batches(n=1)[0]
    X, Y = ops.to_numpy(X), ops.to_numpy(Y)
    _, grads, _ = reference.loss_and_grads(params, X, Y, np.zeros((4, 5)))
    assert np.sqrt(sum((g * g).sum() for g in grads)) > 1  # so that the clipping binds
    d2l.train_epoch_ch8(net, [(ops.from_numpy(X), ops.from_numpy(Y))])
    _, _, expected, _ = reference.sgd_step(params, X, Y, np.zeros((4, 5)), 1.0, 1.0)
    for got, want in zip(to_numpy_tree(net.params), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32 against float64


def test_a_train_step_clips_at_norm_1_unless_told_otherwise():
    from tests import reference

    net = _scaled_net()
    params = to_numpy_tree(net.params)
    X, Y = (ops.to_numpy(t) for t in _batches(n=1)[0])
    _, new_params, _ = d2l.make_train_step(net, 0.5)(net.params, ops.from_numpy(X), ops.from_numpy(Y),
                                                      net.begin_state(4))
    _, _, expected, _ = reference.sgd_step(params, X, Y, np.zeros((4, 5)), 0.5, 1.0)
    for got, want in zip(to_numpy_tree(new_params), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32 against float64


def test_a_loss_given_to_train_epoch_ch8_is_the_one_minimised():
    doubled = _scaled_net(scale=0.1)
    plain = _scaled_net(scale=0.1)
    d2l.train_epoch_ch8(doubled, _batches(n=1), lambda Y_hat, Y: 2.0 * d2lrnn.lm.loss.lm_loss(Y_hat, Y), 0.1)
    d2l.train_epoch_ch8(plain, _batches(n=1), None, 0.2)  # twice the loss at lr 0.1 = the loss at lr 0.2
    for a, b in zip(to_numpy_tree(doubled.params), to_numpy_tree(plain.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_perplexity_weighs_each_minibatch_by_its_tokens():
    # Two minibatches of 3 x 4 and 1 x 4 tokens: the perplexity is exp of the mean over all 16 tokens,
    # not of the mean of the two minibatch means.
    from tests import reference

    net = _scaled_net(V=7, h=5, scale=0.7)
    params = to_numpy_tree(net.params)
    r = np.random.default_rng(8)
    batches = [(r.integers(0, 7, (3, 4)), r.integers(0, 7, (3, 4))), (r.integers(0, 7, (1, 4)),
                                                                       r.integers(0, 7, (1, 4)))]
    tensors = [(ops.from_numpy(X), ops.from_numpy(Y)) for X, Y in batches]
    losses = [reference.loss(params, X, Y, np.zeros((len(X), 5))) for X, Y in batches]  # a new state each
    expected = math.exp((12 * losses[0] + 4 * losses[1]) / 16)
    assert d2l.evaluate_perplexity(net, tensors) == pytest.approx(expected, rel=1e-5)
    step = d2l.make_train_step(net, 1e-30, None)  # no visible update: the losses are those above
    ppl, speed = d2l.train_epoch_ch8(net, tensors, step=step)
    assert ppl == pytest.approx(expected, rel=1e-5)


def test_speed_is_tokens_per_second_of_the_epoch(monkeypatch):
    monkeypatch.setattr(d2lrnn.training.metrics, "time", as_time_module(ticking_clock(0.25)))
    net = d2l.RNNModelScratch(12, 5)
    _, speed = d2l.train_epoch_ch8(net, _batches(), None, 1.0)
    tokens = 5 * 4 * 6
    assert speed == tokens / 0.25  # the epoch's timer read the clock twice: at its start and at its end


def test_timer_measures_elapsed_seconds(monkeypatch):
    readings = iter([10.0, 10.5, 11.0, 11.25])
    monkeypatch.setattr(d2lrnn.training.metrics, "time", as_time_module(lambda: next(readings)))
    timer = d2l.Timer()  # starts at 10.0
    assert timer.stop() == 0.5
    timer.start()
    assert timer.stop() == 0.25
    assert timer.times == [0.5, 0.25] and timer.sum() == 0.75 and timer.avg() == 0.375


def test_perplexity_overflows_to_inf_only_past_the_largest_float():
    perplexity = d2lrnn.training.metrics.perplexity
    assert perplexity(709.0) == pytest.approx(math.exp(709.0))  # 8.2e307: still a number
    assert perplexity(710.0) == math.inf
    fmt = d2lrnn.training.metrics.format_perplexity
    assert (fmt(999999.994), fmt(1e6)) == ("999999.99", "1e+06")  # compact from a million on


def test_clipping_threshold_may_be_a_tensor():
    clipped = d2l.grad_clipping([ops.tensor([3.0]), ops.tensor([[4.0]])], ops.tensor(1.0))
    np.testing.assert_allclose([float(ops.to_numpy(g).sum()) for g in clipped], [0.6, 0.8], rtol=1e-6)


# -- what train_ch8 shows ---------------------------------------------------------------------------------


class _FakeAnimator:
    made = []

    def __init__(self, **kwargs):
        self.kwargs, self.points, self.closed = kwargs, [], False
        _FakeAnimator.made.append(self)

    def add(self, x, y):
        self.points.append((x, list(y)))

    def close(self):
        self.closed = True


class _FakeBar:
    def __init__(self, **kwargs):
        self.kwargs, self.n, self.postfix = kwargs, 0, []

    def update(self, n=1):
        self.n += n

    def set_postfix(self, info, refresh=True):
        self.postfix.append((dict(info), refresh))


@pytest.fixture
def bars(monkeypatch):
    """The progress bars the training loop opens, as :class:`_FakeBar` s, in order."""
    from d2lrnn.training import loop

    opened = []

    @contextlib.contextmanager
    def progress_bar(**kwargs):
        opened.append(_FakeBar(**kwargs))
        yield opened[-1]

    monkeypatch.setattr(loop, "progress_bar", progress_bar)
    return opened


def test_train_ch8_feeds_the_live_plot_and_the_progress_bar(monkeypatch, bars):
    _FakeAnimator.made = []
    monkeypatch.setattr(d2lrnn.training.loop, "Animator", _FakeAnimator)
    net = d2l.RNNModelScratch(12, 5)
    batches = _batches(n=4)
    history = d2l.train_ch8(net, batches, None, 1.0, 3, val_iter=batches[:2], plot=True, verbose=False,
                            return_history=True)
    (animator,), (bar,) = _FakeAnimator.made, bars
    assert animator.kwargs == {"xlabel": "epoch", "ylabel": "perplexity", "legend": ["train", "validation"],
                               "xlim": [1, 3], "enabled": True,
                               "title": f"RNNModelScratch, 5 hidden units, {d2l.backend_name()}"}
    assert animator.points == [(e, [t, v]) for e, t, v in
                               zip(history["epoch"], history["train_ppl"], history["val_ppl"])]
    assert animator.closed
    assert bar.kwargs == {"total": 3 * 4, "unit": "batch", "disable": False, "desc": "train"} and bar.n == 12
    assert [refresh for _, refresh in bar.postfix] == [False] * 3
    assert [info["ppl"] for info, _ in bar.postfix] == [f"{p:.2f}" for p in history["train_ppl"]]
    assert [info["val_ppl"] for info, _ in bar.postfix] == [f"{p:.2f}" for p in history["val_ppl"]]
    assert [info["tok/s"] for info, _ in bar.postfix] == [f"{s:,.0f}" for s in history["tokens_per_sec"]]
    # without validation: one line, and no progress bar when asked
    _FakeAnimator.made = []
    d2l.train_ch8(net, batches, None, 1.0, 1, progress=False, plot=False, verbose=False)
    plot = _FakeAnimator.made[0].kwargs
    assert plot["legend"] == ["train"] and plot["xlim"] == [1, 2]
    assert bars[-1].kwargs["disable"] is True


def test_continuing_a_run_redraws_its_history_and_counts_only_the_new_batches(monkeypatch, bars):
    net = d2l.RNNModelScratch(12, 5)
    batches = _batches(n=4)
    monkeypatch.setattr(d2lrnn.training.metrics, "time", as_time_module(ticking_clock(1.0)))
    first = d2l.train_ch8(net, batches, None, 1.0, 3, val_iter=batches[:1], verbose=False,
                          return_history=True)
    # counted from the start of the run (reading 0), which each epoch's timer reads twice after
    assert first["seconds"] == [3.0, 6.0, 9.0]
    first["seconds"] = [100.0, 200.0, 300.0]  # as if the first run had taken longer
    _FakeAnimator.made = []
    monkeypatch.setattr(d2lrnn.training.loop, "Animator", _FakeAnimator)
    history = d2l.train_ch8(net, batches, None, 1.0, 4, val_iter=batches[:1], verbose=False, history=first,
                            return_history=True)
    assert _FakeAnimator.made[0].points[:3] == [(e, [first["train_ppl"][e - 1], first["val_ppl"][e - 1]])
                                                for e in (1, 2, 3)]
    assert bars[-1].kwargs["total"] == 4  # one epoch of 4 batches left
    # seconds go on from where the first run stopped
    assert 300 < history["seconds"][3] < 360


def test_verbose_training_prints_perplexities_speed_and_two_samples(capsys):
    vocab = _CharVocab("abc ")
    net = d2l.RNNModelScratch(len(vocab), 8)
    r = np.random.default_rng(0)
    stream = r.integers(1, len(vocab), (4, 31))
    batches = [(ops.from_numpy(stream[:, i:i + 6]), ops.from_numpy(stream[:, i + 1:i + 7]))
               for i in (0, 6, 12)]
    history = d2l.train_ch8(net, batches, vocab, 1.0, 3, val_iter=batches[:1], progress=False,
                            prefixes=("ab", "c"), return_history=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"perplexity {history['train_ppl'][-1]:.1f}, validation perplexity "
                        f"{history['val_ppl'][-1]:.1f}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on "
                        f"{ops.cpu()}")
    assert lines[1:] == [d2l.predict_ch8("ab", 50, net, vocab), d2l.predict_ch8("c", 50, net, vocab)]


def test_train_ch8_resets_the_state_per_minibatch_with_random_sampling():
    from tests import reference

    net = _scaled_net(V=12, h=5, scale=0.3)
    params = to_numpy_tree(net.params)
    batches = _batches(n=3)
    for use_random_iter in (True, False, None):  # None: the default, sequential
        net.params = [ops.from_numpy(p) for p in params]
        kwargs = {} if use_random_iter is None else {"use_random_iter": use_random_iter}
        d2l.train_ch8(net, batches, None, 0.5, 1, progress=False, verbose=False, **kwargs)
        ref, H = params, np.zeros((4, 5))
        for X, Y in batches:
            H = np.zeros((4, 5)) if use_random_iter else H
            _, _, ref, H = reference.sgd_step(ref, ops.to_numpy(X), ops.to_numpy(Y), H, 0.5, 1.0)
        for got, want in zip(to_numpy_tree(net.params), ref):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # 3 float32 steps vs float64


def test_train_epoch_ch8_carries_the_state_by_default():
    from tests import reference

    net = _scaled_net(V=12, h=5, scale=0.3)
    params = to_numpy_tree(net.params)
    batches = _batches(n=3)
    d2l.train_epoch_ch8(net, batches, None, None, None, step=d2l.make_train_step(net, 0.5))
    ref, H = params, np.zeros((4, 5))
    for X, Y in batches:  # the book's default is sequential sampling: the state is carried
        _, _, ref, H = reference.sgd_step(ref, ops.to_numpy(X), ops.to_numpy(Y), H, 0.5, 1.0)
    for got, want in zip(to_numpy_tree(net.params), ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # 3 float32 steps vs float64


# -- generation details -------------------------------------------------------------------------------------


class _VocabUnk3(_CharVocab):
    """A vocabulary whose unknown token is not index 0 (a reader's own class may do that)."""

    unk = 3

    def __getitem__(self, token):
        return self.idx_to_token.index(token) if token in self.idx_to_token else 3


@pytest.mark.parametrize("prefix", ["a", "ab", "abcab"])
def test_generation_from_prefixes_of_any_length_follows_the_reference(prefix):
    from tests import reference

    vocab = _CharVocab("abcdef")
    net = _scaled_net(V=len(vocab), h=6, scale=1.5, seed=11)
    ids = reference.decode(to_numpy_tree(net.params), [vocab[c] for c in prefix], 20)
    assert d2l.predict_ch8(prefix, 20, net, vocab) == prefix + "".join(vocab.to_tokens(ids))


def test_the_vocabularys_own_unknown_token_is_never_generated():
    from tests import reference

    vocab = _VocabUnk3("abcdef")
    net = _scaled_net(V=len(vocab), h=6, scale=1.5, seed=12)
    params = to_numpy_tree(net.params)
    params[4][3] += 50.0  # make 'c' (index 3, the unknown token here) the model's favourite
    net.params = [ops.from_numpy(p) for p in params]
    text = d2l.predict_ch8("ab", 30, net, vocab)
    assert "c" not in text[2:]
    assert text == "ab" + "".join(vocab.to_tokens(reference.decode(params, [1, 2], 30, forbidden=3)))


def test_sampling_at_a_low_temperature_does_not_overflow():
    rng = np.random.default_rng(0)
    logits = np.array([0.0, 1000.0, 999.0, -5.0])
    draws = [d2lrnn.lm.generate.next_token(logits, 0.5, rng) for _ in range(2000)]
    # softmax([1000, 999] / 0.5) = (0.881, 0.119): both finite, <unk> (index 0) never
    share = draws.count(1) / len(draws)
    assert set(draws) == {1, 2} and 0.85 < share < 0.91


def test_accumulator_sums_and_resets():
    metric = d2l.Accumulator(2)
    metric.add(1, 2.5)
    metric.add(ops.tensor(3.0), 0.5)  # a tensor counts as its value (the book's cells add tensors)
    assert metric.data == [4.0, 3.0] and metric[1] == 3.0
    metric.reset()
    assert metric.data == [0.0, 0.0]


def test_huge_but_finite_parameters_are_not_divergence_by_themselves():
    # 8 entries of 1e38: their sum overflows float32, yet each is finite; only their loss decides.
    net = d2l.RNNModelScratch(2, 2)
    huge = [ops.from_numpy(np.full(ops.shape(p), 1e38, np.float32)) for p in net.params]
    guard = d2lrnn.training.guard.DivergenceGuard(net.params)
    assert guard.check_step(net, net.params, ops.tensor(1.5), huge, 1, 1) == 1.5
    assert net.params is huge


def test_an_epoch_run_on_its_own_keeps_its_starting_parameters_on_a_nan_at_step_1():
    net = d2l.RNNModelScratch(12, 5)
    initial = net.params
    step = d2l.make_train_step(net, 0.5)
    with pytest.raises(d2l.TrainingError, match="^loss became nan at epoch 1, step 1"):
        d2l.train_epoch_ch8(net, _batches(), step=lambda *a: (step(*a)[0] * math.nan, *step(*a)[1:]))
    assert net.params is initial


def test_on_batch_hears_the_tokens_of_each_minibatch():
    seen = []
    d2l.train_epoch_ch8(d2l.RNNModelScratch(12, 5), _batches(n=3), None, 0.1, on_batch=seen.append)
    assert seen == [4 * 6] * 3


def test_a_history_that_is_not_train_ch8s_is_refused_word_for_word():
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.train_ch8(d2l.RNNModelScratch(12, 5), _batches(), None, 1.0, 2, history=[1, 2])
    assert str(err.value) == ("history must be the dict train_ch8 returned (lists epoch, train_ppl, val_ppl, "
                              "tokens_per_sec, seconds), got list")


def test_training_data_without_a_length_trains_with_an_open_progress_bar(monkeypatch, bars):

    class Stream:  # an iterable without __len__, as a generator of minibatches is
        def __iter__(self):
            return iter(_batches(n=2))

    history = d2l.train_ch8(d2l.RNNModelScratch(12, 5), Stream(), None, 1.0, 2, verbose=False,
                            return_history=True)
    assert bars[0].kwargs["total"] is None and bars[0].n == 4 and len(history["train_ppl"]) == 2


def test_train_ch8_passes_its_device_to_every_state_and_sample(monkeypatch):
    vocab = _CharVocab("abc ")
    net = d2l.RNNModelScratch(len(vocab), 4)
    module, seen = d2l.get_backend(), []
    for name in ("zeros", "tensor"):
        real = getattr(module, name)

        def spy(*args, _real=real, device=None, **kwargs):
            seen.append(device)
            return _real(*args, device=device, **kwargs)

        monkeypatch.setattr(module, name, spy)
    r = np.random.default_rng(1)
    stream = r.integers(1, len(vocab), (2, 13))
    batches = [(ops.from_numpy(stream[:, i:i + 4]), ops.from_numpy(stream[:, i + 1:i + 5])) for i in (0, 4)]
    d2l.train_ch8(net, batches, vocab, 1.0, 1, ops.cpu(), val_iter=batches[:1], progress=False,
                  prefixes=("ab",))
    assert len(seen) >= 3 and all(d == ops.cpu() for d in seen), seen


def test_train_epoch_ch8_reads_a_numpy_scalar_as_the_learning_rate():
    """A learning rate is any real number (np.float32 included); only an optimizer object or a function
    of the batch size is the book's framework updater."""
    results = []
    for lr in (0.5, np.float32(0.5)):
        d2l.manual_seed(0)
        net = d2l.RNNModelScratch(12, 5)
        results.append(d2l.train_epoch_ch8(net, _batches(), None, lr)[0])
    assert results[0] == results[1]


def test_the_books_train_epoch_form_says_what_it_needs_in_one_line(backend):
    """The book's form passes the framework's loss and an updater; without a framework, or without the
    loss, one line says what to pass instead."""
    net = d2l.RNNModelScratch(12, 5)
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.train_epoch_ch8(net, _batches(), None, lambda batch_size: None)
    if backend in ("numpy", "jax"):
        assert str(err.value) == (f"d2l.train_epoch_ch8 takes a learning rate as updater on the {backend} "
                                  "backend: a framework's optimizer or update function needs that "
                                  "framework's backend")
    else:
        assert str(err.value) == ("d2l.train_epoch_ch8 got the book's updater but no loss: pass the "
                                  "framework's loss too (the book passes e.g. nn.CrossEntropyLoss()), or a "
                                  "learning rate as updater")


@pytest.mark.parametrize("model", ["concise", "scratch"])
def test_a_bfloat16_step_is_the_float32_step_to_bfloat16s_precision_on_torch_and_refused_elsewhere(model):
    d2l.manual_seed(0)
    net = d2l.make_model(model, 12, 16, cell="lstm", init="uniform")
    if d2l.backend_name() != "torch":
        with pytest.raises(d2l.ArgumentError, match=f"torch backend only, not on {d2l.backend_name()}: use "):
            d2l.make_train_step(net, 0.1, precision="bfloat16")
        return
    with pytest.raises(d2l.ArgumentError, match="precision is 'float16': choose 'float32' or 'bfloat16'"):
        d2l.make_train_step(net, 0.1, precision="float16")
    r = np.random.default_rng(0)
    X, Y = (ops.tensor(r.integers(0, 12, (4, 6)), dtype="int64") for _ in range(2))
    state, params = net.begin_state(4), list(net.params)
    l32, p32, s32 = d2l.make_train_step(net, 0.1)(params, X, Y, state)
    l16, p16, s16 = d2l.make_train_step(net, 0.1, precision="bfloat16")(params, X, Y, state)
    # bfloat16 keeps 8 significant bits: the products' inputs are rounded by up to 2^-9 relative, so the
    # loss moves by a few 2^-9 relative, and the step (lr 0.1 times a gradient clipped to norm 1) by a few
    # 2^-9 of 0.1; the same call in float32 gives other bits, so the products did run in bfloat16
    l32, l16 = float(ops.to_numpy(l32)), float(ops.to_numpy(l16))
    assert l16 != l32 and abs(l16 - l32) <= 2 ** -6 * l32
    for new, old in zip(p16, p32):  # the weights stay float32 (to_numpy would refuse bfloat16)
        assert ops.to_numpy(new).dtype == np.float32
        np.testing.assert_allclose(ops.to_numpy(new), ops.to_numpy(old), rtol=0, atol=0.1 * 2 ** -5)
    for new, old in zip(s16, s32):  # the carried state comes back float32 too
        assert ops.to_numpy(new).dtype == np.float32
        np.testing.assert_allclose(ops.to_numpy(new), ops.to_numpy(old), rtol=0, atol=2 ** -6)
