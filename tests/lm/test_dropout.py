"""Dropout on the inputs and before the output layer of the language models (issue 13)."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops

V, H, P = 6, 5, 0.4


def _model(kind, cell, **dropout):
    d2l.manual_seed(0)
    net = d2l.make_model(kind, V, H, cell=cell, **dropout)
    net.params = [p * 30 if len(ops.shape(p)) == 2 else p for p in net.params]  # O(1) activations
    return net


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_output_dropout_zeroes_or_scales_each_hidden_unit(kind, cell):
    """In training, the logits are (H * m) W_hq + b_q with each m either 0 or 1 / (1 - p): solving for
    H * m from the logits (W_hq has full row rank) gives exactly those two values per unit."""
    net = _model(kind, cell, output_dropout=P)
    X = ops.from_numpy(np.random.default_rng(1).integers(0, V, (40, 3)))
    state = net.begin_state(40)
    evaluation = ops.to_numpy(net.forward(net.params, X, state, training=False)[0])
    np.testing.assert_array_equal(ops.to_numpy(net(X, state)[0]), evaluation)
    Hs, _ = net.layer.forward(net.params[:-2], ops.transpose(X), state, False)
    Hs = ops.to_numpy(Hs).reshape(-1, H).astype(np.float64)
    W_hq, b_q = (ops.to_numpy(p).astype(np.float64) for p in net.params[-2:])
    logits = ops.to_numpy(net.forward(net.params, X, state, training=True)[0]).astype(np.float64)
    dropped = (logits - b_q) @ np.linalg.pinv(W_hq)  # H * m, row by row
    kept = np.abs(dropped - Hs / (1 - P)) < 1e-3 * (1 + np.abs(Hs))
    zero = np.abs(dropped) < 1e-3
    assert np.all(kept | zero), "every unit is either dropped or scaled by 1 / (1 - p)"
    assert 0.25 < zero.mean() < 0.55, f"about p = {P} of the units dropped, got {zero.mean():.2f}"


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_input_dropout_drops_whole_tokens(kind, cell):
    """One step from a zero state: each row's training output is the layer run on its token's one-hot
    vector either zeroed or scaled by 1 / (1 - p), and both happen."""
    net = _model(kind, cell, input_dropout=P)
    tokens = np.random.default_rng(2).integers(0, V, (60, 1))
    X, state = ops.from_numpy(tokens), net.begin_state(60)
    out = ops.to_numpy(net.forward(net.params, X, state, training=True)[0])

    def run(scale):
        inputs = np.eye(V, dtype=np.float32)[tokens.T] * np.float32(scale)  # (1, 60, V)
        Hs, _ = net.layer.forward(net.params[:-2], ops.from_numpy(inputs), state, False)
        W_hq, b_q = net.params[-2:]
        return ops.to_numpy(ops.matmul(ops.reshape(Hs, (-1, H)), W_hq) + b_q)

    kept, zero = run(1 / (1 - P)), run(0.0)
    is_kept = np.all(np.abs(out - kept) < 1e-4, axis=1)
    is_zero = np.all(np.abs(out - zero) < 1e-4, axis=1)
    assert np.all(is_kept ^ is_zero), "each token is dropped or kept whole"
    assert 10 < is_zero.sum() < 40, f"about p = {P} of 60 tokens dropped, got {is_zero.sum()}"
    np.testing.assert_allclose(ops.to_numpy(net(X, state)[0]), run(1.0), rtol=1e-5, atol=1e-6)


def test_dropout_settings_are_checked_and_saved(tmp_path):
    with pytest.raises(d2l.ArgumentError, match=r"input_dropout is 1: use a probability in \[0, 1\)"):
        d2l.make_model("scratch", V, H, input_dropout=1)
    with pytest.raises(d2l.ArgumentError, match="output_dropout is -0.5"):
        d2l.make_model("scratch", V, H, output_dropout=-0.5)
    net = d2l.make_model("scratch", V, H, cell="gru", input_dropout=0.1, output_dropout=0.3)
    vocab = d2l.Vocab(list("abcde"))
    assert len(vocab) == V
    d2l.save_checkpoint(tmp_path / "m.npz", net, vocab)
    loaded, _, info = d2l.load_checkpoint(tmp_path / "m.npz")
    assert (info["input_dropout"], info["output_dropout"]) == (0.1, 0.3)
    assert (loaded.input_dropout, loaded.output_dropout) == (0.1, 0.3)
