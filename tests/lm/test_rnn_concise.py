"""The concise model: the framework's own RNN layer computes what the scratch model computes."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import RNNModel, ops, rnn_layer
from tests.parity import assert_close, assert_parity


def _pair(V=28, h=32, seed=0):
    scratch = d2l.RNNModelScratch(V, h)
    concise = RNNModel(rnn_layer(V, h), V)
    r = np.random.default_rng(seed)
    params = [ops.from_numpy(r.standard_normal(ops.shape(p)).astype(np.float32) * 0.3)
              for p in scratch.params]
    scratch.load_scratch_params(params)
    concise.load_scratch_params(params)
    return scratch, concise, params


def test_concise_equals_scratch_given_the_same_weights():
    scratch, concise, _ = _pair()
    r = np.random.default_rng(5)
    X = ops.from_numpy(r.integers(0, 28, (4, 9)))
    H0 = ops.from_numpy(r.standard_normal((4, 32)).astype(np.float32))
    Y1, (H1,) = scratch(X, (H0,))
    Y2, (H2,) = concise(X, (H0,))
    # the framework's fused kernel sums in its own order; 9 steps of float32 recurrence: 1e-5, and
    # absolute 1e-5 for logits near zero
    assert_close(ops.to_numpy(Y2), ops.to_numpy(Y1), rtol=1e-5, atol=1e-5)
    assert_close(ops.to_numpy(H2), ops.to_numpy(H1), rtol=1e-5, atol=1e-5)


def test_concise_training_step_equals_scratch_training_step():
    # Both keep [W_xh, W_hh, b_h, W_hq, b_q]: one SGD step with clipping gives the same tensors.
    scratch, concise, params = _pair(V=10, h=8)
    r = np.random.default_rng(6)
    X = ops.from_numpy(r.integers(0, 10, (3, 5)))
    Y = ops.from_numpy(r.integers(0, 10, (3, 5)))
    l1, p1, _ = d2l.make_train_step(scratch, 1.0, 1.0)(scratch.params, X, Y, scratch.begin_state(3))
    l2, p2, _ = d2l.make_train_step(concise, 1.0, 1.0)(concise.params, X, Y, concise.begin_state(3))
    # a mean of 15 losses: rounding ~1e-7; the updates: float32 kernels in another order (RTOL, ATOL)
    np.testing.assert_allclose(float(ops.to_numpy(l2)), float(ops.to_numpy(l1)), rtol=1e-6)
    for a, b in zip(p2, p1):
        assert_close(ops.to_numpy(a), ops.to_numpy(b), rtol=1e-5, atol=1e-6)


def test_layer_params_put_the_book_weights_where_the_framework_reads_them():
    _, concise, params = _pair()
    (slot,) = concise.layer_params()
    W_xh, W_hh, b_h = (ops.to_numpy(p) for p in params[:3])
    if concise.rnn.declaration is None:  # NumPy: no framework layout, the book's parameters as they are
        expected = [W_xh, W_hh, b_h]
    elif concise.rnn.declaration.transposed:  # torch, MXNet, Paddle: (hiddens, inputs) weights, two biases
        expected = [W_xh.T, W_hh.T, b_h, np.zeros_like(b_h)]
    else:  # Keras: the book's orientation
        expected = [W_xh, W_hh, b_h, np.zeros_like(b_h)]
    for got, want in zip(slot, expected, strict=True):
        np.testing.assert_array_equal(ops.to_numpy(got), want)


def test_scratch_layout_round_trip_is_exact():
    _, concise, params = _pair()
    for a, b in zip(concise.scratch_params(), params):
        np.testing.assert_array_equal(ops.to_numpy(a), ops.to_numpy(b))


def test_a_layer_the_reader_built_is_wrapped(backend):
    native = rnn_layer(5, 3).native
    if native is None:  # numpy has no framework layer: the scratch recurrence serves
        assert backend == "numpy"
        return
    net = RNNModel(native, vocab_size=5)
    assert net.num_hiddens == 3 and net.rnn.native is not None
    Y, (H,) = net(ops.tensor([[1, 2, 3]]), net.begin_state(1))
    assert ops.shape(Y) == (3, 5) and ops.shape(H) == (1, 3)


def test_concise_model_matches_numpy():
    def run_concise(X):
        d2l.manual_seed(4)
        net = RNNModel(rnn_layer(6, 5), 6)
        net.params = [p + 0.1 for p in net.params]
        Y, (H,) = net(X, net.begin_state(2))
        return Y, H

    assert_parity(run_concise, [np.random.default_rng(0).integers(0, 6, (2, 4)).astype(np.int64)])


def _readers_layer(backend, cell, num_layers, bidirectional, V, h):
    """The framework layer a reader would build for this model, or None on numpy."""
    if backend == "torch":
        import torch

        cls = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell]
        return cls(V, h, num_layers=num_layers, bidirectional=bidirectional,
                   dropout=0.3 if num_layers > 1 else 0)
    if backend == "tensorflow":
        import tensorflow as tf

        keras = tf.keras.layers
        cls = {"rnn": keras.SimpleRNN, "gru": keras.GRU, "lstm": keras.LSTM}[cell]
        layers = [cls(h) for _ in range(num_layers)]
        layers = [tf.keras.layers.Bidirectional(one) for one in layers] if bidirectional else layers
        return tf.keras.Sequential(layers) if num_layers > 1 else layers[0]
    if backend == "jax":
        import flax.linen as nn

        cls = {"rnn": nn.SimpleCell, "gru": nn.GRUCell, "lstm": nn.OptimizedLSTMCell}[cell]

        def one():
            return nn.Bidirectional(nn.RNN(cls(h)), nn.RNN(cls(h))) if bidirectional else nn.RNN(cls(h))

        return [one() for _ in range(num_layers)] if num_layers > 1 else one()
    if backend == "mxnet":
        import mxnet as mx

        gluon = mx.gluon.rnn
        kwargs = {"activation": "tanh"} if cell == "rnn" else {}  # gluon's RNN is a ReLU RNN by default
        cls = {"rnn": gluon.RNN, "gru": gluon.GRU, "lstm": gluon.LSTM}[cell]
        return cls(h, num_layers, bidirectional=bidirectional, dropout=0.3 if num_layers > 1 else 0,
                   input_size=V, **kwargs)
    if backend == "paddle":
        import paddle

        cls = {"rnn": paddle.nn.SimpleRNN, "gru": paddle.nn.GRU, "lstm": paddle.nn.LSTM}[cell]
        return cls(V, h, num_layers, direction="bidirect" if bidirectional else "forward", time_major=True,
                   dropout=0.3 if num_layers > 1 else 0)
    return None


@pytest.mark.parametrize("cell, num_layers, bidirectional", [("gru", 2, True), ("lstm", 2, False),
                                                             ("rnn", 1, True), ("lstm", 1, True)])
def test_a_layer_the_reader_built_computes_the_scratch_stack(backend, cell, num_layers, bidirectional):
    """torch.nn.GRU(V, h, num_layers=2, bidirectional=True), keras Bidirectional GRUs in a Sequential,
    gluon's LSTM, paddle.nn.GRU(V, h, 2, direction='bidirect')...: RNNModel reads their settings and
    computes the scratch stack from the same weights (the frameworks' GRU is the reset-after form)."""
    V, h = 7, 5
    native = _readers_layer(backend, cell, num_layers, bidirectional, V, h)
    if native is None:  # numpy: no framework layer to build; refused in one line (test_bad_input.py)
        assert backend == "numpy"
        return
    net = RNNModel(native, V)
    config = net.config()
    assert (config["cell"], config["num_layers"], config["bidirectional"]) == \
        (cell, num_layers, bidirectional)
    assert config["reset_after"] == (cell == "gru")
    assert config["dropout"] == (0.3 if num_layers > 1 and backend not in ("tensorflow", "jax") else 0.0)
    scratch = d2l.StackedRNNModelScratch(V, h, cell, num_layers, bidirectional, reset_after=cell == "gru")
    assert scratch.param_names == net.param_names
    r = np.random.default_rng(3)
    params = [ops.from_numpy((r.standard_normal(ops.shape(p)) * 0.5).astype(np.float32))
              for p in scratch.params]
    X = ops.from_numpy(r.integers(0, V, (3, 4)))
    Y1, s1 = scratch.forward(params, X, scratch.begin_state(3))
    Y2, s2 = net.forward(params, X, net.begin_state(3))
    # the framework's fused kernel sums in its own order: float32 rounding over 4 steps, 2 layers
    for got, want in zip((Y2, *s2), (Y1, *s1), strict=True):
        np.testing.assert_allclose(ops.to_numpy(got), ops.to_numpy(want), rtol=1e-5, atol=1e-5)
