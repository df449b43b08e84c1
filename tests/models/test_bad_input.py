"""Bad model settings and framework layers the adapter cannot run: one d2lrnn line each, nothing changed.

Every error is an :class:`d2lrnn.ArgumentError` (a :class:`d2lrnn.D2LRNNError`), one line, naming the
setting and the fix; a refused training run leaves the parameters as they were.
"""

import importlib

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.lm.train import train_lm

V, H = 28, 8


def _one_line(err):
    text = str(err.value)
    assert "\n" not in text and isinstance(err.value, d2l.D2LRNNError), text
    return text


BAD_SETTINGS = [
    (lambda: d2l.make_model("scratch", V, H, cell="transformer"),
     "unknown cell 'transformer': choose one of rnn, gru, lstm (--cell)"),
    (lambda: d2l.make_model("concise", V, H, cell="transformer"), "unknown cell 'transformer'"),
    (lambda: d2l.StackedRNNModelScratch(V, H, cell=3), "unknown cell 3"),
    (lambda: d2l.StackedRNNModelScratch(V, H, num_layers=0), "num_layers must be"),
    (lambda: d2l.rnn_layer(V, H, num_layers=-1), "num_layers must be"),
    (lambda: d2l.make_model("scratch", V, H, num_layers=1.5), "num_layers must be"),
    (lambda: d2l.make_model("scratch", V, H, dropout=1.0), "dropout is 1.0: use a probability in [0, 1)"),
    (lambda: d2l.make_model("concise", V, H, num_layers=2, dropout=-0.1), "dropout is -0.1"),
    (lambda: d2l.StackedRNNModelScratch(V, H, dropout=float("nan")), "dropout"),
    (lambda: d2l.StackedRNNModelScratch(V, H, dropout="0.2"), "dropout"),
    (lambda: d2l.StackedRNNModelScratch(V, H, bidirectional="yes"),
     "bidirectional is 'yes': use True or False"),
    (lambda: d2l.make_model("scratch", V, H, cell="lstm", reset_after=True),
     "reset_after applies to the GRU only, not to 'lstm'"),
    (lambda: d2l.make_model("recurrent", V, H), "unknown model 'recurrent': choose 'scratch' or 'concise'"),
    (lambda: d2l.make_model("scratch", V, H, init="xavier"),
     "init is 'xavier': choose 'normal' (the book's N(0, 0.01^2) weights, zero biases) or 'uniform'"),
    (lambda: d2l.make_model("concise", V, H, cell="gru", init=None), "init is None: choose 'normal'"),
]


@pytest.mark.parametrize("make, message", BAD_SETTINGS)
def test_bad_model_settings_are_one_line_errors(make, message):
    with pytest.raises(d2l.ArgumentError) as err:
        make()
    assert message in _one_line(err)


def _lm_data():
    train_iter, _, vocab = d2l.load_data_lm(batch_size=4, num_steps=6, max_tokens=500)
    return train_iter, vocab


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_a_bidirectional_language_model_is_refused_unless_asked_for(kind):
    train_iter, vocab = _lm_data()
    net = d2l.make_model(kind, len(vocab), H, bidirectional=True)
    before = [ops.to_numpy(p).copy() for p in net.params]
    for train in (lambda: train_lm(net, train_iter, 1, 1, progress=False, verbose=False),
                  lambda: d2l.train_epoch_ch8(net, train_iter, None, 1.0)):
        with pytest.raises(d2l.ArgumentError) as err:
            train()
        text = _one_line(err)
        assert text.startswith("a bidirectional model reads each sequence from both ends")
        assert "pass allow_bidirectional=True" in text
        for a, b in zip(net.params, before):
            np.testing.assert_array_equal(ops.to_numpy(a), b)  # nothing trained
    history = d2l.train_ch8(net, train_iter, vocab, 1, 2, progress=False, verbose=False,
                            allow_bidirectional=True, return_history=True)
    assert len(history["train_ppl"]) == 2


def test_the_books_train_ch8_trains_a_bidirectional_model_and_says_why_its_numbers_mean_nothing():
    train_iter, vocab = _lm_data()
    net = d2l.make_model("scratch", len(vocab), H, bidirectional=True)
    before = [ops.to_numpy(p).copy() for p in net.params]
    with pytest.warns(UserWarning) as caught:
        history = d2l.train_ch8(net, train_iter, vocab, 1, 2, progress=False, verbose=False,
                                return_history=True)
    (warning,) = [w for w in caught if "bidirectional" in str(w.message)]
    assert "learns to copy, not to predict" in str(warning.message)
    assert "its perplexity and predictions mean nothing" in str(warning.message)
    assert len(history["train_ppl"]) == 2
    assert any(not np.array_equal(ops.to_numpy(a), b) for a, b in zip(net.params, before))


def _framework_layers(backend):
    """(layer the reader built, what the error must name) on the active backend."""
    if backend == "torch":
        nn = importlib.import_module("torch").nn
        return [(nn.RNN(V, H, batch_first=True), "batch_first=True"),
                (nn.RNN(V, H, nonlinearity="relu"), "nonlinearity='relu'"),
                (nn.LSTM(V, H, proj_size=4), "proj_size=4"),
                (nn.GRU(V, H, bias=False), "bias=False"),
                (nn.GRU(V, H, batch_first=True, bias=False), "batch_first=True, bias=False")]
    if backend == "tensorflow":
        layers = importlib.import_module("tensorflow").keras.layers
        return [(layers.SimpleRNN(H, activation="relu"), "activation='relu'"),
                (layers.LSTM(H, dropout=0.1), "dropout=0.1"),
                (layers.GRU(H, recurrent_dropout=0.2), "recurrent_dropout=0.2"),
                (layers.LSTM(H, go_backwards=True), "go_backwards=True"),
                (layers.GRU(H, recurrent_activation="hard_sigmoid"), "recurrent_activation='hard_sigmoid'"),
                (layers.Bidirectional(layers.LSTM(H), merge_mode="sum"), "merge_mode='sum'"),
                ([layers.LSTM(H), layers.GRU(H)], "stacked layers of different cells")]
    if backend == "jax":
        nn = importlib.import_module("flax.linen")
        return [(nn.SimpleCell(H, activation_fn=nn.relu), "activation_fn=relu"),
                (nn.GRUCell(H, gate_fn=nn.hard_sigmoid), "gate_fn=hard_sigmoid"),
                (nn.RNN(nn.GRUCell(H), reverse=True), "reverse=True"),
                ([nn.RNN(nn.OptimizedLSTMCell(H)), nn.RNN(nn.GRUCell(H))],
                 "stacked layers of different cells")]
    if backend == "mxnet":
        rnn = importlib.import_module("mxnet").gluon.rnn
        return [(rnn.RNN(H, activation="relu"), "activation='relu'"),
                (rnn.LSTM(H, layout="NTC"), "layout='NTC'"),
                (rnn.LSTM(H, projection_size=4), "projection_size=4")]
    if backend == "paddle":
        nn = importlib.import_module("paddle").nn
        return [(nn.SimpleRNN(V, H, activation="relu"), "activation='relu'"),
                (nn.LSTM(V, H, proj_size=4), "proj_size=4"),
                (nn.GRU(V, H, bias_ih_attr=False), "bias_ih_attr=False or bias_hh_attr=False"),
                (nn.SimpleRNN(V, H, activation="relu", bias_hh_attr=False),
                 "activation='relu', bias_ih_attr=False or bias_hh_attr=False")]
    return []


def test_framework_layers_with_settings_the_adapter_does_not_support_are_named(backend):
    cases = _framework_layers(backend)
    if backend == "numpy":  # no framework layers: wrapping any is refused with the way out
        with pytest.raises(d2l.ArgumentError) as err:
            d2l.RNNModel(object(), V)
        assert _one_line(err) == ("the numpy backend has no framework layers to wrap: pass "
                                  "d2l.rnn_layer(...) or use d2l.make_model('scratch', ...)")
        return
    assert len(cases) >= 3
    for layer, setting in cases:
        with pytest.raises(d2l.ArgumentError) as err:
            d2l.RNNModel(layer, V)
        text = _one_line(err)
        assert "RNNModel does not support" in text and setting in text and "build the layer without" in text


def test_a_layer_for_another_vocabulary_size_is_refused():
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.RNNModel(d2l.rnn_layer(10, H, cell="gru"), V)
    assert _one_line(err) == (f"the layer takes 10 inputs but the vocabulary has {V} tokens: build it with "
                              "d2l.rnn_layer(len(vocab), ...)")


def test_a_layer_that_is_not_a_recurrent_layer_or_has_the_wrong_input_size_is_refused(backend):
    if backend == "numpy":
        with pytest.raises(d2l.ArgumentError, match="the numpy backend has no framework layers to wrap"):
            d2l.RNNModel(d2l.rnn_layer(V, H).native, V)  # None: numpy's rnn_layer has no framework layer
        return
    if backend == "torch":
        nn = importlib.import_module("torch").nn
        other, sized = nn.Linear(V, H), nn.GRU(10, H)
    elif backend == "tensorflow":
        layers = importlib.import_module("tensorflow").keras.layers
        other, sized = layers.Dense(H), layers.GRU(H)
        sized.build((None, None, 10))  # Keras layers learn their input size when built
    elif backend == "jax":  # Flax cells take their input size from the first call: nothing to check
        other, sized = importlib.import_module("flax.linen").Dense(H), None
    elif backend == "paddle":
        nn = importlib.import_module("paddle").nn
        other, sized = nn.Linear(V, H), nn.GRU(10, H)
    else:
        gluon = importlib.import_module("mxnet").gluon
        other, sized = gluon.nn.Dense(H), gluon.rnn.GRU(H, input_size=10)
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.RNNModel(other, V)
    assert f"RNNModel cannot use {type(other).__name__}: pass the framework's RNN, GRU or LSTM layer" in \
        _one_line(err)
    if sized is None:
        return
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.RNNModel(sized, V)
    assert _one_line(err) == (f"the layer takes 10 inputs but the vocabulary has {V} tokens: build it "
                              "with input size len(vocab)")
