"""Optimizers, schedules and the Updater (d2lrnn/optim.py, d2lrnn/train.py), on the active backend."""

import math

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.training.optim import SGD, Adam, Schedule, get_optimizer


def _tensors(arrays):
    return [ops.from_numpy(a) for a in arrays]


def _numpy(tensors):
    return [ops.to_numpy(t).astype(np.float64) for t in tensors]


def _run(optimizer, params, grads_per_step, lrs):
    state = optimizer.init(params)
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), 1):
        scalars = ops.from_numpy(np.array(optimizer.scalars(t, lr), np.float32))
        params, state = optimizer.update(params, _tensors(grads), state, scalars)
    return params, state


def _adam_numpy(params, grads_per_step, lrs, b1, b2, eps, wd):
    """Adam with decoupled weight decay, in float64, as Kingma and Ba and Loshchilov and Hutter write it."""
    params = [p.astype(np.float64) for p in params]
    M = [np.zeros_like(p) for p in params]
    V = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), 1):
        for i, g in enumerate(grads):
            M[i] = b1 * M[i] + (1 - b1) * g
            V[i] = b2 * V[i] + (1 - b2) * g * g
            M_hat, V_hat = M[i] / (1 - b1 ** t), V[i] / (1 - b2 ** t)
            params[i] = params[i] - lr * (M_hat / (np.sqrt(V_hat) + eps) + wd * params[i])
    return params, M, V


def test_sgd_is_the_books_update_and_adds_l2_weight_decay(rng):
    p, g = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    (new,), state = _run(SGD(0.5), _tensors([p]), [[g]], [0.5])
    np.testing.assert_allclose(ops.to_numpy(new), p - 0.5 * g, rtol=1e-6, atol=1e-7)
    assert state == []
    (new,), _ = _run(SGD(0.5, weight_decay=0.1), _tensors([p]), [[g]], [0.5])
    np.testing.assert_allclose(ops.to_numpy(new), p - 0.5 * (g + 0.1 * p), rtol=1e-6, atol=1e-7)


def test_adam_first_step_moves_every_weight_by_lr_against_its_gradient_sign(rng):
    # at t = 1 the bias-corrected averages are g and g^2, so the step is lr * g / (|g| + eps)
    p = rng.standard_normal((4, 5)).astype(np.float32)
    g = (rng.standard_normal((4, 5)) * 10.0 ** rng.integers(-3, 3, (4, 5))).astype(np.float32)
    (new,), _ = _run(Adam(0.01), _tensors([p]), [[g]], [0.01])
    np.testing.assert_allclose(ops.to_numpy(new), p - 0.01 * np.sign(g), rtol=0, atol=2e-6)


def test_adamw_decays_weights_without_gradient_by_lr_times_wd_each_step(rng):
    p = rng.standard_normal((3, 3)).astype(np.float32)
    zero = np.zeros_like(p)
    (new,), _ = _run(Adam(0.1, weight_decay=0.5), _tensors([p]), [[zero]] * 3, [0.1] * 3)
    np.testing.assert_allclose(ops.to_numpy(new), p * (1 - 0.1 * 0.5) ** 3, rtol=1e-6)


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_matches_a_float64_numpy_adam_over_twenty_steps(rng, wd):
    params = [rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)]
    grads = [[rng.standard_normal(p.shape).astype(np.float32) * (1 + t % 3) for p in params]
             for t in range(20)]
    lrs = [0.01 * (1 + math.cos(math.pi * t / 20)) / 2 + 1e-4 for t in range(20)]  # a schedule
    opt = Adam(0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=wd)
    got, state = _run(opt, _tensors(params), grads, lrs)
    want, M, V = _adam_numpy(params, grads, lrs, 0.8, 0.99, 1e-6, wd)
    for a, b in zip(_numpy(got) + _numpy(state), want + M + V):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)  # float32 arithmetic over 20 steps


def test_schedule_warms_up_then_decays_to_its_floor():
    s = Schedule(2.0, total=110, warmup=10, decay="cosine", floor=0.1)
    assert s(5) == pytest.approx(1.0)  # half-way through the warm-up
    assert s(10) == pytest.approx(2.0)
    assert s(60) == pytest.approx(2.0 * (0.1 + 0.9 * 0.5))  # cosine at its midpoint
    assert s(110) == pytest.approx(0.2) and s(500) == pytest.approx(0.2)
    lin = Schedule(1.0, total=100, decay="linear")
    assert [lin(x) for x in (0, 25, 100)] == pytest.approx([1.0, 0.75, 0.0])
    assert Schedule(3.0, total=10, warmup=4, decay="constant")(7) == 3.0


@pytest.mark.parametrize("make, message", [
    (lambda: Schedule(1.0, total=10, warmup=10), r"the warm-up \(10\) is as long as training \(10\)"),
    (lambda: Schedule(1.0, total=10, decay="step"), "unknown decay 'step'"),
    (lambda: Schedule(1.0, total=10, floor=2), "floor is 2"),
    (lambda: Adam(0.1, beta1=1.0), r"beta1 is 1.0: use a decay rate in \[0, 1\)"),
    (lambda: Adam(-1), "lr must be above 0, got -1"),
    (lambda: SGD(1.0, weight_decay=-0.1), "weight_decay"),
    (lambda: get_optimizer("rmsprop"), "unknown optimizer 'rmsprop': use one of sgd, adam"),
    (lambda: get_optimizer(object()), "optimizer must be 'sgd', 'adam' or an object"),
])
def test_bad_settings_are_one_line_errors(make, message):
    with pytest.raises(d2l.ArgumentError, match=message):
        make()


@pytest.fixture
def tiny():
    d2l.manual_seed(0)
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 8, 10, max_tokens=3000, val_fraction=0.2)
    return train_iter, val_iter, vocab


def _batches(train_iter, n):
    return [b for _, b in zip(range(n), train_iter)]


def test_updater_state_round_trip_continues_exactly(tiny):
    """Saving the optimizer state after 3 steps and loading it into a fresh updater gives the same
    4th step as continuing: the step count and both running averages travel."""
    train_iter, _, vocab = tiny
    batches = _batches(train_iter, 4)
    net = d2l.make_model("scratch", len(vocab), 16, cell="gru")
    start = list(net.params)
    updater = d2l.make_train_step(net, 0.01, optimizer="adam", schedule=Schedule(0.01, 10, warmup=2))
    params, state = net.params, net.begin_state(8)
    for X, Y in batches[:3]:
        _, params, state = updater(params, X, Y, state)
    saved = updater.state_dict()
    assert saved["optimizer"] == "adam" and saved["t"] == 3 and len(saved["arrays"]) == 2 * len(start)
    _, want, _ = updater(params, *batches[3], state)
    again = d2l.make_train_step(net, 0.01, optimizer="adam", schedule=Schedule(0.01, 10, warmup=2))
    again.load_state_dict(saved)
    assert again.lr() == updater.lr(4)
    _, got, _ = again(params, *batches[3], state)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(ops.to_numpy(a), ops.to_numpy(b))
    with pytest.raises(d2l.ArgumentError, match="the saved optimizer state is for 'adam'"):
        d2l.make_train_step(net, 1.0).load_state_dict(saved)


def test_sgd_updater_is_the_books_step(tiny):
    """make_train_step's default (SGD, lr 1, clip 1) equals clipping and sgd applied by hand."""
    train_iter, _, vocab = tiny
    X, Y = _batches(train_iter, 1)[0]
    net = d2l.make_model("scratch", len(vocab), 16)
    state = net.begin_state(8)
    value_and_grad = ops.value_and_grad(
        lambda params: d2lrnn.lm.loss.lm_loss(net.forward(params, X, state, training=True)[0], Y))
    _, grads = value_and_grad(net.params)
    want = d2l.sgd(net.params, d2l.grad_clipping(grads, 1.0), 1.0)
    _, got, _ = d2l.make_train_step(net, 1.0)(net.params, X, Y, state)
    for a, b in zip(got, want):
        np.testing.assert_allclose(ops.to_numpy(a), ops.to_numpy(b), rtol=1e-5, atol=1e-6)


def test_train_ch8_with_adam_and_a_schedule_learns(tiny):
    train_iter, val_iter, vocab = tiny
    net = d2l.make_model("scratch", len(vocab), 32, cell="lstm", output_dropout=0.1)
    history = d2l.train_ch8(net, train_iter, vocab, 0.03, 5, optimizer="adam", schedule="cosine", warmup=3,
                            weight_decay=0.01, val_iter=val_iter, progress=False, verbose=False,
                            return_history=True)
    assert history["train_ppl"][-1] < 0.75 * history["train_ppl"][0]
    assert history["val_ppl"][-1] < len(vocab)


def test_early_stopping_keeps_the_best_epoch(tiny, monkeypatch):
    """Scripted validation perplexities 9, 7, 8, 8.5: with patience 2 training stops after epoch 4
    and net.params holds the parameters epoch 2 ended with."""
    train_iter, val_iter, vocab = tiny
    scripted = iter([9.0, 7.0, 8.0, 8.5, 6.0])
    monkeypatch.setattr(d2lrnn.lm.train, "evaluate_perplexity", lambda *a, **k: next(scripted))
    net = d2l.make_model("scratch", len(vocab), 16)
    ends = {}
    history = d2l.train_ch8(net, train_iter, vocab, 0.5, 10, val_iter=val_iter, progress=False, verbose=False,
                            patience=2, on_epoch=lambda epoch, n, h: ends.setdefault(epoch, n.params),
                            return_history=True)
    assert history["epoch"] == [1, 2, 3, 4]
    assert net.params is ends[2]
    with pytest.raises(d2l.ArgumentError, match="patience stops on the validation perplexity"):
        d2l.train_ch8(net, train_iter, vocab, 0.5, 2, patience=2, progress=False, verbose=False)
