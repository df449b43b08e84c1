"""A reader's own model functions, written as the book's notebooks write them, train through ``train_ch8``.

The functions below use only ``d2l.*`` operations, take one-hot inputs of shape (num_steps, batch,
vocab), walk the time steps with ``for X in inputs`` and collect the outputs in a list. On
TensorFlow such a loop cannot be traced into a graph (the list would hold tensors of a
``tf.while_loop``'s inner graph), and the compiled training step runs it eagerly instead. On every
backend the reader's model must train exactly as d2lrnn's own functions do from the same weights.
"""

import numpy as np
import pytest

import d2lrnn as d2l

V, H = 28, 16


def reader_get_rnn_params(vocab_size, num_hiddens, device):
    def normal(shape):
        return d2l.normal(0, 0.01, shape, device=device)

    W_xh, W_hh = normal((vocab_size, num_hiddens)), normal((num_hiddens, num_hiddens))
    b_h = d2l.zeros(num_hiddens, device=device)
    W_hq, b_q = normal((num_hiddens, vocab_size)), d2l.zeros(vocab_size)
    return [W_xh, W_hh, b_h, W_hq, b_q]


def reader_rnn(inputs, state, params):
    W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in inputs:
        H = d2l.tanh(d2l.matmul(X, W_xh) + d2l.matmul(H, W_hh) + b_h)
        Y = d2l.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return d2l.concat(outputs, 0), (H,)


def reader_get_gru_params(vocab_size, num_hiddens, device):
    def normal(shape):
        return d2l.normal(0, 0.01, shape, device=device)

    def three():
        return (normal((vocab_size, num_hiddens)), normal((num_hiddens, num_hiddens)),
                d2l.zeros(num_hiddens, device=device))

    W_xz, W_hz, b_z = three()  # update gate
    W_xr, W_hr, b_r = three()  # reset gate
    W_xh, W_hh, b_h = three()  # candidate state
    W_hq, b_q = normal((num_hiddens, vocab_size)), d2l.zeros(vocab_size, device=device)
    return [W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]


def reader_init_gru_state(batch_size, num_hiddens, device):
    return (d2l.zeros((batch_size, num_hiddens), device=device),)


def reader_gru(inputs, state, params):
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in inputs:
        Z = d2l.sigmoid(d2l.matmul(X, W_xz) + d2l.matmul(H, W_hz) + b_z)
        R = d2l.sigmoid(d2l.matmul(X, W_xr) + d2l.matmul(H, W_hr) + b_r)
        H_tilda = d2l.tanh(d2l.matmul(X, W_xh) + d2l.matmul(R * H, W_hh) + b_h)
        H = Z * H + (1 - Z) * H_tilda
        Y = d2l.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return d2l.concat(outputs, axis=0), (H,)


def reader_get_lstm_params(vocab_size, num_hiddens, device):
    def normal(shape):
        return d2l.normal(0, 0.01, shape, device=device)

    def three():
        return (normal((vocab_size, num_hiddens)), normal((num_hiddens, num_hiddens)),
                d2l.zeros(num_hiddens, device=device))

    W_xi, W_hi, b_i = three()  # input gate
    W_xf, W_hf, b_f = three()  # forget gate
    W_xo, W_ho, b_o = three()  # output gate
    W_xc, W_hc, b_c = three()  # candidate memory cell
    W_hq, b_q = normal((num_hiddens, vocab_size)), d2l.zeros(vocab_size, device=device)
    return [W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q]


def reader_init_lstm_state(batch_size, num_hiddens, device):
    return (d2l.zeros((batch_size, num_hiddens), device=device),
            d2l.zeros((batch_size, num_hiddens), device=device))


def reader_lstm(inputs, state, params):
    [W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q] = params
    (H, C) = state
    outputs = []
    for X in inputs:
        I = d2l.sigmoid(d2l.matmul(X, W_xi) + d2l.matmul(H, W_hi) + b_i)  # noqa: E741 - the book's name
        F = d2l.sigmoid(d2l.matmul(X, W_xf) + d2l.matmul(H, W_hf) + b_f)
        O = d2l.sigmoid(d2l.matmul(X, W_xo) + d2l.matmul(H, W_ho) + b_o)  # noqa: E741 - the book's name
        C_tilda = d2l.tanh(d2l.matmul(X, W_xc) + d2l.matmul(H, W_hc) + b_c)
        C = F * C + I * C_tilda
        H = O * d2l.tanh(C)
        Y = d2l.matmul(H, W_hq) + b_q
        outputs.append(Y)
    return d2l.concat(outputs, axis=0), (H, C)


READER = {
    "rnn": (reader_get_rnn_params, d2l.init_rnn_state, reader_rnn),
    "gru": (reader_get_gru_params, reader_init_gru_state, reader_gru),
    "lstm": (reader_get_lstm_params, reader_init_lstm_state, reader_lstm),
}
OURS = {
    "rnn": (d2l.get_params, d2l.init_rnn_state, d2l.rnn),
    "gru": (d2l.get_gru_params, d2l.init_gru_state, d2l.gru),
    "lstm": (d2l.get_lstm_params, d2l.init_lstm_state, d2l.lstm),
}


@pytest.fixture(scope="module")
def data():
    d2l.manual_seed(0)
    train_iter, _, vocab = d2l.load_data_lm(batch_size=4, num_steps=6, max_tokens=600)
    assert len(vocab) == V
    return train_iter, vocab


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_a_readers_book_style_model_trains_like_d2lrnns_own(cell, data):
    train_iter, vocab = data
    histories, finals = [], []
    for functions in (READER[cell], OURS[cell]):
        d2l.manual_seed(1)  # the reader draws the weights in the book's order: the same numbers as ours
        net = d2l.RNNModelScratch(len(vocab), H, None, *functions)
        history = d2l.train_ch8(net, train_iter, vocab, 1, 3, progress=False, verbose=False,
                                return_history=True)
        histories.append(history["train_ppl"])
        finals.append([d2l.to_numpy(p) for p in net.params])
    assert net.kind == "scratch" and len(histories[0]) == 3
    assert histories[0][-1] < histories[0][0] < V  # it learns
    # Same function and weights, summed in another order (one-hot products vs gathered rows,
    # fused gate products): float32 rounding, compounded over 3 epochs of SGD steps.
    np.testing.assert_allclose(histories[0], histories[1], rtol=1e-5)
    for mine, ours in zip(*finals, strict=True):
        np.testing.assert_allclose(mine, ours, rtol=1e-4, atol=1e-6)


def test_a_readers_model_predicts_like_d2lrnns_own(data):
    _, vocab = data
    d2l.manual_seed(2)
    net = d2l.RNNModelScratch(len(vocab), H, None, *READER["lstm"])
    twin = d2l.RNNModelScratch(len(vocab), H, None, *OURS["lstm"])
    twin.params = list(net.params)
    assert d2l.predict_ch8("time", 12, net, vocab) == d2l.predict_ch8("time", 12, twin, vocab)
