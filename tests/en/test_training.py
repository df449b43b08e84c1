"""``Trainer.fit`` on the env's framework: a reader's own ``Module``, ``add_to_class``, one step of the
scratch language model against the NumPy reference, training that lowers perplexity, and the concise and
encoder-decoder models of the later sections."""

import math

import numpy as np
import pytest

import d2lrnn

from .. import reference
from .conftest import in_place
from .frameworks import decoder_class, keras3, parameter
from .test_classes import B, H, T, V, scratch_model, tokens


def one_batch_data(d2l, *arrays):
    """A ``DataModule`` whose training data is one minibatch of ``arrays`` and that has no validation."""

    class OneBatch(d2l.DataModule):
        def __init__(self):
            super().__init__()
            self.batch = [d2l.tensor(a) for a in arrays]

        def get_dataloader(self, train):
            return [self.batch] if train else None

    return OneBatch()


@in_place
def test_a_readers_module_is_trained_by_sgd_as_computed_by_hand(d2l, backend):
    class Line(d2l.Module):
        """y = x w + b, as the 1.0 edition's linear-regression cells write a model."""

        def __init__(self, lr):
            super().__init__(plot_train_per_epoch=1)
            self.save_hyperparameters()
            self.w = parameter(backend, np.array([[0.5], [-1.0]], np.float32))
            self.b = parameter(backend, np.array([0.25], np.float32))

        def forward(self, X):
            return d2l.matmul(X, self.w) + self.b

        def loss(self, y_hat, y):
            return d2l.reduce_mean((y_hat - y) ** 2)

        def configure_optimizers(self):
            return d2l.SGD([self.w, self.b], self.lr)

    X = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    model = Line(lr=0.1)
    d2l.Trainer(max_epochs=1).fit(model, one_batch_data(d2l, X, y))
    # by hand: y_hat = [-1.25, 2.75], r = y_hat - y = [-2.25, 2.75]; dL/dw = X^T r, dL/db = sum r (2/n = 1)
    r = np.array([[-2.25], [2.75]])
    np.testing.assert_allclose(d2l.to_numpy(model.w), [[0.5], [-1.0]] - 0.1 * X.T @ r, rtol=1e-6)
    np.testing.assert_allclose(d2l.to_numpy(model.b), [0.25 - 0.1 * 0.5], rtol=1e-6)
    (point,) = model.board.data["train_loss"]  # drawn at the fraction of the epoch done before the step
    assert point.x == 0 and point.y == pytest.approx((2.25 ** 2 + 2.75 ** 2) / 2)


@in_place
def test_add_to_class_changes_what_the_trainer_runs(d2l):
    class Mine(d2l.RNNLMScratch):  # a class of the test's own: add_to_class changes it for the process
        pass

    model, _ = scratch_model(d2l, model_class=Mine)
    seen = []

    @d2l.add_to_class(Mine)
    def training_step(self, batch):
        seen.append(tuple(d2l.shape(batch[0])))
        return self.loss(self(*batch[:-1]), batch[-1])

    d2l.Trainer(max_epochs=2).fit(model, one_batch_data(d2l, tokens((B, T)), tokens((B, T), 1)))
    assert seen == [(B, T), (B, T)]


@in_place
def test_one_clipped_step_of_the_scratch_language_model_is_the_references(d2l):
    model, params = scratch_model(d2l)
    X, Y = tokens((B, T)), tokens((B, T), 1)
    theta = 0.05  # below the gradient's norm: clipping acts
    _, grads, expected, _ = reference.sgd_step(params, X, Y, np.zeros((B, H)), lr=0.5, theta=theta)
    unclipped = reference.loss_and_grads(params, X, Y, np.zeros((B, H)))[1]
    assert math.sqrt(sum(float((g * g).sum()) for g in unclipped)) > theta
    d2l.Trainer(max_epochs=1, gradient_clip_val=theta).fit(model, one_batch_data(d2l, X, Y))
    got = [d2l.to_numpy(p) for p in (model.rnn.W_xh, model.rnn.W_hh, model.rnn.b_h, model.W_hq, model.b_q)]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    (point,) = model.board.data["train_ppl"]
    assert point.y == pytest.approx(math.exp(reference.loss(params, X, Y, np.zeros((B, H)))), rel=1e-5)


def test_training_the_scratch_language_model_lowers_its_perplexity(d2l):
    data = d2l.TimeMachine(batch_size=64, num_steps=16, num_train=512, num_val=256)
    rnn = d2l.RNNScratch(num_inputs=len(data.vocab), num_hiddens=32)
    model = d2l.RNNLMScratch(rnn, vocab_size=len(data.vocab), lr=1)
    d2l.Trainer(max_epochs=3, gradient_clip_val=1, num_gpus=1).fit(model, data)
    val = [p.y for p in model.board.data["val_ppl"]]
    assert len(val) == 3 and val[0] > val[1] > val[2] and val[2] < 0.75 * len(data.vocab), val
    assert model.predict("it has", 5, data.vocab).startswith("it has")


def test_the_concise_models_train(d2l, backend):
    data = d2l.TimeMachine(batch_size=32, num_steps=8, num_train=256, num_val=64)
    if keras3(backend):  # the book's Keras layers are time-major, which only Keras 2 has: one line says so
        with pytest.raises(d2lrnn.BackendError, match="TF_USE_LEGACY_KERAS=1") as refused:
            d2l.RNN(num_hiddens=16)
        assert "\n" not in str(refused.value)
        return
    # the book's PyTorch layers are told their number of inputs; the other frameworks' learn it
    inputs = {"num_inputs": len(data.vocab)} if backend == "torch" else {}
    for rnn in (d2l.RNN(**inputs, num_hiddens=16), d2l.GRU(**inputs, num_hiddens=16, num_layers=2)):
        model = d2l.RNNLM(rnn, vocab_size=len(data.vocab), lr=2)
        d2l.Trainer(max_epochs=2, gradient_clip_val=1).fit(model, data)
        train = [p.y for p in model.board.data["train_ppl"]]
        assert train[-1] < train[0] < 2 * len(data.vocab), train
        X = model.one_hot(d2l.ones((2, 5), dtype=d2l.int64))
        outputs, state = rnn.init_with_output(d2l.get_key(), X)[0] if backend == "jax" else rnn(X)
        d2l.check_shape(outputs, (5, 2, 16))


def test_the_encoder_decoder_trains_and_translates(d2l, backend):
    data = d2l.MTFraEng(batch_size=32, num_train=128, num_val=32)
    if keras3(backend):
        with pytest.raises(d2lrnn.BackendError, match="TF_USE_LEGACY_KERAS=1"):
            d2l.Seq2SeqEncoder(len(data.src_vocab), 16, 16, 2)
        return
    encoder = d2l.Seq2SeqEncoder(len(data.src_vocab), 16, 16, 2)
    decoder = decoder_class(backend, d2l)(len(data.tgt_vocab), 16, 16, 2)
    mode = {"training": True} if backend == "jax" else {}  # (a field of the book's Flax EncoderDecoder)
    model = d2l.Seq2Seq(encoder, decoder, tgt_pad=data.tgt_vocab["<pad>"], lr=0.01, **mode)
    trainer = d2l.Trainer(max_epochs=3, gradient_clip_val=1)
    trainer.fit(model, data)
    val = [p.y for p in model.board.data["val_loss"]]
    assert val[-1] < val[0], val
    batch = data.build(["go .", "i lost ."], ["va !", "j'ai perdu ."])
    if backend == "jax":  # the JAX form decodes with the trained parameters
        preds, _ = model.predict_step(trainer.state.params, batch, data.num_steps)
    else:
        preds, _ = model.predict_step(batch, d2l.try_gpu(), data.num_steps)
    d2l.check_shape(preds, (2, data.num_steps))
    assert d2l.bleu("va !", "va !", k=2) == 1.0


def readers_array(backend, d2l, array):
    """A weight as the 1.0 edition's scratch GRU and LSTM cells make one: on MXNet a plain array (the book's
    ``RNNLMScratch`` attaches its gradient), elsewhere the framework's parameter."""
    return d2l.tensor(array) if backend == "mxnet" else parameter(backend, array)


@in_place
def test_a_readers_gated_cell_keeping_plain_arrays_is_trained_by_the_scratch_language_model(d2l, backend):
    rng = np.random.default_rng(2)

    class Gated(d2l.Module):
        """H_t = Z * H_{t-1} + (1 - Z) * tanh(X W_xh + H W_hh + b_h), Z = sigmoid(X W_xz + H W_hz + b_z)."""

        def __init__(self, num_inputs, num_hiddens, sigma=0.5):
            super().__init__()
            self.save_hyperparameters()
            self.W_xz, self.W_hz, self.b_z = self.gate(num_inputs, num_hiddens, sigma)
            self.W_xh, self.W_hh, self.b_h = self.gate(num_inputs, num_hiddens, sigma)

        @staticmethod
        def gate(num_inputs, num_hiddens, sigma):
            W_x, W_h = (rng.normal(size=(n, num_hiddens)) * sigma for n in (num_inputs, num_hiddens))
            return tuple(readers_array(backend, d2l, a.astype(np.float32))
                         for a in (W_x, W_h, np.zeros(num_hiddens)))

        def forward(self, inputs, H=None):
            H = d2l.zeros((inputs.shape[1], self.num_hiddens)) if H is None else H
            outputs = []
            for X in inputs:
                Z = d2l.sigmoid(d2l.matmul(X, self.W_xz) + d2l.matmul(H, self.W_hz) + self.b_z)
                H_tilde = d2l.tanh(d2l.matmul(X, self.W_xh) + d2l.matmul(H, self.W_hh) + self.b_h)
                H = Z * H + (1 - Z) * H_tilde
                outputs.append(H)
            return outputs, H

    cell = Gated(V, H)
    model = d2l.RNNLMScratch(cell, vocab_size=V, lr=0.5)
    names = ("W_xz", "W_hz", "b_z", "W_xh", "W_hh", "b_h")
    before = {name: np.array(d2l.to_numpy(getattr(cell, name))) for name in names}
    d2l.Trainer(max_epochs=1, gradient_clip_val=1).fit(model, one_batch_data(d2l, tokens((B, T)),
                                                                             tokens((B, T), 1)))
    for name in names:
        assert np.abs(d2l.to_numpy(getattr(cell, name)) - before[name]).max() > 1e-6, name


@in_place
def test_linear_regression_loss_is_the_frameworks_squared_error(d2l, backend):
    model = d2l.LinearRegression(lr=0.01)
    y_hat, y = d2l.tensor(np.array([[1.0], [2.0]], np.float32)), d2l.tensor(np.array([3.0, 2.0], np.float32))
    # Gluon's L2Loss halves the squared error; PyTorch's MSELoss and Keras's MeanSquaredError do not
    expected = 1.0 if backend == "mxnet" else 2.0
    assert float(d2l.to_numpy(model.loss(y_hat, y))) == pytest.approx(expected)


@in_place
def test_linear_regression_starts_where_the_books_does(d2l, backend):
    """The book's N(0, 0.01^2) weights and zero bias; on PyTorch the lazy layer's own draw (Kaiming's uniform,
    bound 1/sqrt(fan_in), for the bias too), which overwrites the book's normal_ at the first call."""
    fan_in = 400
    model = d2l.LinearRegression(lr=0.01)
    model(d2l.tensor(np.zeros((2, fan_in), np.float32)))
    w, b = (np.asarray(d2l.to_numpy(p), np.float64).ravel() for p in model.get_w_b())
    assert w.size == fan_in and b.size == 1
    if backend == "torch":
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
        assert w.std() == pytest.approx(bound / np.sqrt(3), rel=0.15)  # a uniform's std: bound / sqrt(3)
    else:
        assert w.std() == pytest.approx(0.01, rel=0.15) and np.abs(w).max() < 0.05  # 400 draws: ~4% spread
        assert b.tolist() == [0.0]
