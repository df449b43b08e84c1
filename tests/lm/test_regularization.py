"""AWD-LSTM's regularization (issue 34): locked dropout, weight drop on the recurrent weights, averaged
weights. Masks are inputs of the model, drawn outside the compiled step from a NumPy generator, so a
seeded run drops the same numbers on every backend."""

import json

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.lm import checkpoint as lm_checkpoint
from d2lrnn.lm import train as lm_train
from d2lrnn.lm.loss import lm_loss
from d2lrnn.training import checkpoint as d2lrnn_checkpoint
from tests.parity import assert_close, to_numpy_tree

V, H, B, T = 6, 5, 4, 7


def _f64(t):
    return ops.to_numpy(t).astype(np.float64)


def test_masks_are_zero_or_one_over_keep_drawn_from_the_given_generator_in_order():
    d2l.manual_seed(0)
    net = d2l.make_model("scratch", V, H, cell="gru", num_layers=2, dropout=0.3, input_dropout=0.1,
                         output_dropout=0.2, locked_dropout=True, weight_drop=0.5)
    shapes = net.mask_shapes(B)
    assert list(shapes) == ["input", "l1", "output", "W_hz", "W_hr", "W_hh", "l1.W_hz", "l1.W_hr",
                            "l1.W_hh"]
    assert shapes["input"] == ((B, V), 0.1) and shapes["l1"] == ((B, H), 0.3)
    assert shapes["W_hh"] == ((H, H), 0.5)
    masks = [ops.to_numpy(m) for m in net.draw_masks(B, np.random.default_rng(7))]
    rng = np.random.default_rng(7)  # the same draws, by hand: keep where U >= p, scaled by 1 / (1 - p)
    for mask, (shape, p) in zip(masks, shapes.values(), strict=True):
        expected = (rng.random(shape) >= p) / (1 - p)
        assert mask.dtype == np.float32 and mask.shape == shape
        np.testing.assert_array_equal(mask, expected.astype(np.float32))
    assert not d2l.make_model("scratch", V, H, input_dropout=0.1).regularized  # per-element dropout: no masks


def _rnn_by_hand(params, tokens, masks):
    """The tanh RNN with every mask, in float64 NumPy: x_t = onehot(tokens_t) * M_in (one mask per
    sequence, every step), H_t = tanh(x_t W_xh + H_{t-1} (W_hh * M_hh) + b_h), O_t = (H_t * M_out) W_hq
    + b_q."""
    W_xh, W_hh, b_h, W_hq, b_q = params
    M_in, M_out, M_hh = masks
    Hs, state = [], np.zeros((tokens.shape[0], W_hh.shape[0]))
    for t in range(tokens.shape[1]):
        x = np.eye(W_xh.shape[0])[tokens[:, t]] * M_in
        state = np.tanh(x @ W_xh + state @ (W_hh * M_hh) + b_h)
        Hs.append(state * M_out)
    return np.concatenate([h @ W_hq + b_q for h in Hs], 0)


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_locked_dropout_and_weight_drop_are_one_mask_for_every_step(kind):
    """Against the equations by hand: the same input, output and W_hh masks at every step."""
    d2l.manual_seed(0)
    net = d2l.make_model(kind, V, H, input_dropout=0.4, output_dropout=0.4, locked_dropout=True,
                         weight_drop=0.5)
    net.params = [p * 30 if len(ops.shape(p)) == 2 else p for p in net.params]  # O(1) activations
    tokens = np.random.default_rng(1).integers(0, V, (B, T))
    masks = net.draw_masks(B, np.random.default_rng(3))
    out = net.forward(net.params, ops.from_numpy(tokens), net.begin_state(B), training=True, masks=masks)[0]
    expected = _rnn_by_hand([_f64(p) for p in net.params], tokens, [_f64(m) for m in masks])
    np.testing.assert_allclose(_f64(out), expected, rtol=1e-4, atol=1e-5)  # float32 against float64
    M_in, M_out, M_hh = (ops.to_numpy(m) for m in masks)
    assert 0 < (M_in == 0).mean() < 1 and 0 < (M_out == 0).mean() < 1 and 0 < (M_hh == 0).mean() < 1


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_a_dropped_recurrent_weight_gets_exactly_zero_gradient_through_the_fused_lstm(kind):
    """The cell sees W_h* * M: the gradient by W is M times the gradient by the weight the cell saw
    (checked against an unmasked model run with the masked weights), so exactly 0 where M is."""
    d2l.manual_seed(0)
    net = d2l.make_model(kind, V, H, cell="lstm", weight_drop=0.5)
    plain = d2l.make_model(kind, V, H, cell="lstm")
    net.params = [p * 30 if len(ops.shape(p)) == 2 else p for p in net.params]
    X = ops.from_numpy(np.random.default_rng(1).integers(0, V, (B, T)))
    Y = ops.from_numpy(np.random.default_rng(2).integers(0, V, (B, T)))
    masks = net.draw_masks(B, np.random.default_rng(3))
    state = net.begin_state(B)

    def loss(model, *masks):
        def value(params):
            out, _ = model.forward(params, X, state, training=True, **({"masks": masks} if masks else {}))
            return lm_loss(out, Y)
        return value

    _, grads = ops.value_and_grad(loss(net, *masks))(net.params)
    by_name = dict(zip(net.mask_shapes(B), masks))
    seen = [p * by_name[n] if n in by_name else p for n, p in zip(net.param_names, net.params)]
    _, seen_grads = ops.value_and_grad(loss(plain))(seen)
    assert list(by_name) == ["W_hi", "W_hf", "W_ho", "W_hc"]
    for name, g, g_seen in zip(net.param_names, grads, seen_grads, strict=True):
        g, g_seen = ops.to_numpy(g), ops.to_numpy(g_seen)
        if name in by_name:
            M = ops.to_numpy(by_name[name])
            assert np.all(g[M == 0] == 0) and np.abs(g[M != 0]).max() > 0, name
            g_seen = g_seen * M
        np.testing.assert_allclose(g, g_seen, rtol=1e-5, atol=1e-7, err_msg=name)


def test_the_averaged_weights_after_k_steps_are_the_formula():
    """A_0 = P_0, A_t = d A_{t-1} + (1 - d) P_t, kept inside the compiled step."""
    d2l.manual_seed(0)
    net = d2l.make_model("scratch", V, H, cell="gru")
    step = lm_train.Updater(net, d2l.Adam(0.01), 1.0, average=0.9)
    history = [[ops.to_numpy(p).astype(np.float64) for p in net.params]]
    state = net.begin_state(B)
    for k in range(3):
        X = ops.from_numpy(np.random.default_rng(k).integers(0, V, (B, T)))
        _, net.params, state = step(net.params, X, X, state)
        history.append([ops.to_numpy(p).astype(np.float64) for p in net.params])
    for i, averaged in enumerate(step.averaged_params()):
        P = [h[i] for h in history]
        expected = 0.9 ** 3 * P[0] + 0.1 * (0.9 ** 2 * P[1] + 0.9 * P[2] + P[3])
        np.testing.assert_allclose(ops.to_numpy(averaged), expected, rtol=1e-5, atol=1e-7)
    assert not np.allclose(ops.to_numpy(step.averaged_params()[0]), history[-1][0])
    saved = step.state_dict()
    assert saved["averaged"] is True and len(saved["arrays"]) == 3 * len(net.params)  # Adam's 2 + the average


@pytest.mark.parametrize("truncation", [None, d2l.RandomizedTruncation(0.5)], ids=["full", "randomized"])
def test_a_step_called_without_masks_draws_them_from_d2lrnns_generator_outside_the_step(truncation):
    d2l.manual_seed(0)
    net = d2l.make_model("scratch", V, H, cell="lstm", output_dropout=0.3, locked_dropout=True,
                         weight_drop=0.3)
    X = ops.from_numpy(np.random.default_rng(1).integers(0, V, (B, T)))
    state, params = net.begin_state(B), net.params

    def loss(*masks):
        step = lm_train.Updater(net, truncation=truncation)
        factors = truncation.factors(T) if truncation is not None else ()
        return float(ops.to_numpy(step(params, X, X, state, *factors, *masks)[0]))

    saved = d2l.backends.generator_state()
    drawn_by_the_step = loss()
    d2l.backends.set_generator_state(saved)
    if truncation is not None:
        truncation.factors(T)  # drawn first, by step_inputs' order
    masks = net.draw_masks(B, d2l.backends.generator())
    d2l.backends.set_generator_state(saved)
    assert loss(masks) == drawn_by_the_step
    assert loss(net.draw_masks(B, np.random.default_rng(9))) != drawn_by_the_step


def _twenty_regularized_steps(kind, cell, num_layers):
    """20 Adam steps with locked dropout (inputs, between the layers, outputs) and weight drop, masks
    from a seeded NumPy generator, averaged weights kept; losses, final and averaged parameters."""
    d2l.manual_seed(0)
    between = 0.3 if num_layers > 1 else 0.0
    net = d2l.make_model(kind, 28, 32, cell=cell, num_layers=num_layers, dropout=between, input_dropout=0.1,
                         output_dropout=0.2, locked_dropout=True, weight_drop=0.3)
    net.params = [p * 10 for p in net.params]  # as in test_train.py's Adam steps: gradients above eps
    step = lm_train.Updater(net, d2l.Adam(0.01), 1.0, average=0.9)
    rng, stream = np.random.default_rng(5), np.tile(np.random.default_rng(0).integers(0, 28, 23), 56)
    stream = stream.reshape(8, -1)
    state, losses = net.begin_state(8), []
    for i in range(0, 7 * 20, 7):
        X, Y = ops.from_numpy(stream[:, i:i + 7]), ops.from_numpy(stream[:, i + 1:i + 8])
        l, net.params, state = step(net.params, X, Y, state, net.draw_masks(8, rng))
        losses.append(float(ops.to_numpy(l)))
    return losses, to_numpy_tree(net.scratch_params()), to_numpy_tree(step.averaged_params())


@pytest.mark.parametrize("kind, cell, num_layers", [("scratch", "lstm", 2), ("concise", "gru", 1)])
def test_twenty_steps_with_locked_dropout_weight_drop_and_averaging_follow_numpy(kind, cell, num_layers):
    losses, params, averaged = _twenty_regularized_steps(kind, cell, num_layers)
    with d2l.use_backend("numpy"):
        ref_losses, ref_params, ref_averaged = _twenty_regularized_steps(kind, cell, num_layers)
    # the tolerances of tests/lm/test_train.py's 20-step runs: float32 rounding per framework, compounded
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < losses[0]
    assert_close(params, ref_params, rtol=1e-4, atol=1e-5)
    assert_close(averaged, ref_averaged, rtol=1e-4, atol=1e-5)


def test_train_lm_validates_with_the_averaged_weights_and_ends_holding_them(monkeypatch):
    d2l.manual_seed(0)
    train_iter, vocab = d2l.load_data_time_machine(4, 8, max_tokens=400)
    net = d2l.make_model("scratch", len(vocab), 8, cell="lstm", output_dropout=0.2, locked_dropout=True,
                         weight_drop=0.2)
    seen = []
    original = lm_train.evaluate_perplexity

    def evaluate(model, *args):
        seen.append([ops.to_numpy(p) for p in model.params])
        return original(model, *args)

    updater = lm_train.Updater(net, d2l.Adam(0.01), 1.0, average=0.5)
    monkeypatch.setattr(lm_train, "evaluate_perplexity", evaluate)
    lm_train.train_lm(net, train_iter, 0.01, 2, val_iter=train_iter, progress=False, plot=False,
                      updater=updater, verbose=False)
    assert len(seen) == 2
    averaged = [ops.to_numpy(p) for p in updater.averaged_params()]
    for a, b, c in zip(seen[-1], averaged, (ops.to_numpy(p) for p in net.params), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, b)


@pytest.mark.parametrize("call, message", [
    (lambda: d2l.make_model("scratch", V, H, weight_drop=1),
     r"weight_drop is 1: use a probability in \[0, 1\)"),
    (lambda: d2l.make_model("scratch", V, H, locked_dropout="yes"), "locked_dropout is 'yes': use True"),
    (lambda: d2l.make_model("concise", V, H, num_layers=2, dropout=0.2, locked_dropout=True),
     "locked dropout between layers needs the scratch model"),
    (lambda: lm_train.Updater(d2l.make_model("scratch", V, H), average=1.0),
     r"average is 1.0: use a decay in \[0, 1\)"),
    (lambda: lm_train.train_lm(d2l.make_model("scratch", V, H), [], 1.0, 1, mask_rng=7),
     r"mask_rng must be a NumPy Generator \(np.random.default_rng\(seed\)\) or None .*, got int"),
])
def test_bad_settings_are_one_line(call, message):
    with pytest.raises(d2l.ArgumentError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_the_settings_are_saved_and_a_checkpoint_without_them_loads_with_them_off(tmp_path):
    d2l.manual_seed(0)
    net = d2l.make_model("scratch", V, H, cell="gru", input_dropout=0.1, locked_dropout=True,
                         weight_drop=0.25)
    vocab = d2l.Vocab(list("abcde"))
    path = d2l.save_checkpoint(tmp_path / "m.npz", net, vocab)
    loaded, _, info = d2l.load_checkpoint(path)
    assert (info["locked_dropout"], info["weight_drop"]) == (True, 0.25)
    assert (loaded.locked_dropout, loaded.weight_drop) == (True, 0.25)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    del meta["locked_dropout"], meta["weight_drop"]  # as saved before these settings
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    loaded, _, info = d2l.load_checkpoint(path)
    assert (loaded.locked_dropout, loaded.weight_drop, loaded.regularized) == (False, 0.0, False)
    meta["weight_drop"] = "much"
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    with pytest.raises(d2l.CheckpointError, match="weight_drop"):
        d2l.load_checkpoint(path)


def test_train_lm_draws_the_masks_from_the_generator_it_is_given():
    def trained(seed):
        d2l.manual_seed(0)
        train_iter, vocab = d2l.load_data_time_machine(4, 8, max_tokens=300)
        net = d2l.make_model("scratch", len(vocab), 8, cell="gru", weight_drop=0.5)
        lm_train.train_lm(net, train_iter, 1.0, 1, progress=False, plot=False, verbose=False,
                          mask_rng=np.random.default_rng(seed))
        return [ops.to_numpy(p) for p in net.params]

    first, again, other = trained(1), trained(1), trained(2)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[1], other[1])  # W_hz: trained under other masks


def test_the_averaged_weights_in_a_checkpoint_are_read_back_and_a_crafted_flag_is_refused(tmp_path):
    d2l.manual_seed(0)
    net, vocab = d2l.make_model("scratch", V, H), d2l.Vocab(list("abcde"))
    step = lm_train.Updater(net, d2l.Adam(0.01), average=0.99)
    path = tmp_path / "last.npz"
    write = lm_checkpoint.checkpoint_writer(net, vocab, optimizer_state=step.state_dict())
    d2lrnn_checkpoint.write_checkpoint(path, write)
    saved = d2lrnn_checkpoint.load_optimizer_state(path)
    assert saved["averaged"] is True and len(saved["arrays"]) == 3 * len(net.params)
    fresh = lm_train.Updater(net, d2l.Adam(0.01), average=0.99)
    fresh.load_state_dict(saved)
    with pytest.raises(d2l.ArgumentError, match=r"\(averaged weights\); this run uses 'adam' with 10:"):
        lm_train.Updater(net, d2l.Adam(0.01)).load_state_dict(saved)
    crafted = (("yes", "averaged is yes, not true or false"), (False, "15 arrays where adam keeps 10"))
    for value, why in crafted:
        with np.load(path) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(str(arrays["meta"]))
        meta["optimizer"]["averaged"] = value
        arrays["meta"] = np.array(json.dumps(meta))
        np.savez(path, **arrays)
        with pytest.raises(d2l.CheckpointError, match=why) as err:
            d2lrnn_checkpoint.load_optimizer_state(path)
        assert "\n" not in str(err.value)
