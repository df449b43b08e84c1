"""The 1.0 edition's JAX form (``from d2lrnn.en import jax as d2l``): Flax modules that hold no parameters,
``Trainer.fit`` keeping them in ``trainer.state``; a reader's module against a step computed by hand, the
optimizers against optax's, and the scratch language model against the NumPy reference
(:mod:`tests.reference`). Collected in the jax env only (conftest)."""

import math

import jax
import numpy as np
import pytest

import d2lrnn

from .. import reference
from .frameworks import decoder_class
from .test_classes import B, H, T, V, tokens
from .test_training import one_batch_data

X_LINE = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
Y_LINE = np.array([[1.0], [0.0]], np.float32)


def line_class(d2l, optimizer):
    """y = x w + b as the 1.0 edition's JAX cells write a model (w, b start at fixed values), trained by
    ``optimizer(lr)``."""

    class Line(d2l.Module):
        lr: float

        def setup(self):
            self.w = self.param("w", lambda key, shape: d2l.tensor([[0.5], [-1.0]]), (2, 1))
            self.b = self.param("b", lambda key, shape: d2l.tensor([0.25]), (1,))

        def forward(self, X):
            return d2l.matmul(X, self.w) + self.b

        def loss(self, params, X, y, state):
            return d2l.reduce_mean((state.apply_fn({"params": params}, *X) - y) ** 2)

        def configure_optimizers(self):
            return optimizer(self.lr)

    return Line


def optimizers(d2l, name):
    if name == "optax":
        optax = pytest.importorskip("optax")
        return optax.sgd, optax.adam
    return d2l.SGD, d2l.Adam


def as_reference(params):
    """The scratch model's parameters in the reference's order, as NumPy arrays."""
    rnn = params["rnn"]
    return [np.array(p) for p in (rnn["W_xh"], rnn["W_hh"], rnn["b_h"], params["W_hq"], params["b_q"])]


def scratch(d2l, sigma=0.5):
    rnn = d2l.RNNScratch(num_inputs=V, num_hiddens=H, sigma=sigma)
    return d2l.RNNLMScratch(rnn, vocab_size=V, lr=0.5)


@pytest.mark.parametrize("optimizer", ["d2l", "optax"])
def test_a_readers_flax_module_is_trained_by_sgd_as_computed_by_hand(d2l, optimizer):
    model = line_class(d2l, optimizers(d2l, optimizer)[0])(lr=0.1)
    model.plot_train_per_epoch = 1
    trainer = d2l.Trainer(max_epochs=1)
    trainer.fit(model, one_batch_data(d2l, X_LINE, Y_LINE))
    # by hand: y_hat = [-1.25, 2.75], r = y_hat - y = [-2.25, 2.75]; dL/dw = X^T r, dL/db = sum r (2/n = 1)
    r = np.array([[-2.25], [2.75]])
    params = trainer.state.params
    np.testing.assert_allclose(np.array(params["w"]), [[0.5], [-1.0]] - 0.1 * X_LINE.T @ r, rtol=1e-6)
    np.testing.assert_allclose(np.array(params["b"]), [0.25 - 0.1 * 0.5], rtol=1e-6)
    assert trainer.state.step == 1
    (point,) = model.board.data["train_loss"]
    assert point.x == 0 and point.y == pytest.approx((2.25 ** 2 + 2.75 ** 2) / 2)


def test_d2lrnns_adam_takes_optaxs_steps(d2l):
    trained = []
    for name in ("d2l", "optax"):
        model = line_class(d2l, optimizers(d2l, name)[1])(lr=0.1)
        trainer = d2l.Trainer(max_epochs=3)
        trainer.fit(model, one_batch_data(d2l, X_LINE, Y_LINE))
        trained.append(np.array(trainer.state.params["w"]))
    np.testing.assert_allclose(trained[0], trained[1], rtol=1e-5)
    assert np.abs(trained[0] - [[0.5], [-1.0]]).max() > 0.2  # three steps of about lr each: it moved


def test_the_flax_scratch_model_matches_the_reference(d2l):
    d2lrnn.manual_seed(3)
    key = d2l.get_key()
    d2lrnn.manual_seed(3)
    assert np.array_equal(np.array(d2l.get_key()), np.array(key))  # keys come from d2lrnn's seeded generator
    model = scratch(d2l)
    X, Y = tokens((B, T)), tokens((B, T), 1)
    Y_hat, variables = model.init_with_output(key, d2l.tensor(X))
    params = as_reference(variables["params"])
    assert all(p.dtype == np.float32 for p in params)
    logits, _ = reference.forward(params, X, np.zeros((B, H)))
    np.testing.assert_allclose(np.array(Y_hat), np.stack(logits, 1), rtol=1e-5, atol=1e-6)
    inputs, labels = (d2l.tensor(X),), d2l.tensor(Y)
    loss, aux = model.loss(variables["params"], inputs, labels, None)
    assert aux == {}
    assert float(loss) == pytest.approx(reference.loss(params, X, Y, np.zeros((B, H))), rel=1e-5)
    expected = np.mean(np.stack(logits, 1).argmax(-1) == Y)
    assert float(model.accuracy(variables["params"], inputs, labels, None)) == pytest.approx(expected)


def test_flax_predict_is_the_references_greedy_decoding(d2l):
    d2lrnn.manual_seed(3)  # parameters whose greedy continuation varies
    model = scratch(d2l, sigma=1.0)
    _, variables = model.init_with_output(d2l.get_key(), d2l.tensor(tokens((B, T))))
    vocab = d2l.Vocab(list("abcde"))  # <unk> is 0, and may be predicted
    expected = reference.decode(as_reference(variables["params"]), [vocab[c] for c in "cab"], 8, forbidden=[])
    assert len(set(expected)) >= 3, expected
    assert model.predict("cab", 8, vocab, variables["params"]) == "cab" + "".join(
        vocab.idx_to_token[i] for i in expected)
    with pytest.raises(d2lrnn.ArgumentError, match="pass the parameters") as refused:
        model.predict("cab", 8, vocab)  # not trained: no trainer's parameters to default to
    assert "\n" not in str(refused.value)


def test_flax_predict_step_is_the_books_decoding_loop_compiled_once(d2l, compiled_programs):
    # The book's JAX predict_step applies the encoder once and the decoder once per token, eagerly; d2lrnn's
    # runs the same two applications compiled, once per model and shape: the same tokens, and a second
    # call compiles nothing (eagerly, Flax's nn.RNN compiled a scan per layer and token). From the parameters
    # Trainer.fit starts from: both loops must give the same tokens from any weights (a trained model's took
    # ~5 s more to make), and these give several. The book's loop runs the decoder through a jax.jit of its
    # own (eagerly: ~1 s).
    d2lrnn.manual_seed(0)
    data = d2l.MTFraEng(batch_size=8, num_train=16, num_val=8)
    encoder = d2l.Seq2SeqEncoder(len(data.src_vocab), 8, 8, 2)
    model = d2l.Seq2Seq(encoder, decoder_class("jax", d2l)(len(data.tgt_vocab), 8, 8, 2),
                        tgt_pad=data.tgt_vocab["<pad>"], lr=0.01, training=True)
    batch = data.build(["go .", "i lost .", "he's calm ."], ["va !", "j'ai perdu .", "il est calme ."])
    params = model.apply_init(batch[:-1], jax.random.PRNGKey(0))["params"]  # what Trainer.fit starts from
    src, tgt, src_valid_len, _ = batch
    enc_all_outputs = model.encoder.apply({"params": params["encoder"]}, src, src_valid_len, training=False)
    dec_state = model.decoder.init_state(enc_all_outputs, src_valid_len)
    outputs = [tgt[:, 0].reshape(-1, 1)]
    decoder_apply = jax.jit(model.decoder.apply, static_argnames="training")
    for _ in range(6):
        Y, dec_state = decoder_apply({"params": params["decoder"]}, outputs[-1], dec_state, training=False)
        outputs.append(Y.argmax(2))
    expected = np.concatenate([np.array(o) for o in outputs[1:]], 1)
    assert len(set(expected.ravel().tolist())) >= 2, expected  # not one token throughout

    preds, attention = model.predict_step(params, batch, 6)
    np.testing.assert_array_equal(np.array(preds), expected)
    assert attention == ([], [])
    compiled_programs.clear()
    np.testing.assert_array_equal(np.array(model.predict_step(params, batch, 6)[0]), expected)
    assert compiled_programs == []


def test_one_clipped_step_of_the_flax_scratch_model_is_the_references(d2l):
    class Recorded(d2l.RNNLMScratch):
        pass

    initial = []

    @d2l.add_to_class(Recorded)
    def apply_init(self, dummy_input, key):
        variables = d2l.RNNLMScratch.apply_init(self, dummy_input, key)
        initial.append(variables["params"])
        return variables

    model = Recorded(d2l.RNNScratch(num_inputs=V, num_hiddens=H, sigma=0.5), vocab_size=V, lr=0.5)
    model.plot_train_per_epoch = 1
    X, Y = tokens((B, T)), tokens((B, T), 1)
    theta = 0.05  # below the gradient's norm: clipping acts
    trainer = d2l.Trainer(max_epochs=1, gradient_clip_val=theta)
    trainer.fit(model, one_batch_data(d2l, X, Y))
    params = as_reference(initial[0])
    _, _, expected, _ = reference.sgd_step(params, X, Y, np.zeros((B, H)), lr=0.5, theta=theta)
    unclipped = reference.loss_and_grads(params, X, Y, np.zeros((B, H)))[1]
    assert math.sqrt(sum(float((g * g).sum()) for g in unclipped)) > theta
    for got, want in zip(as_reference(trainer.state.params), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (point,) = model.board.data["train_ppl"]
    assert point.y == pytest.approx(math.exp(reference.loss(params, X, Y, np.zeros((B, H)))), rel=1e-5)


def test_linear_regression_takes_an_sgd_step_on_half_the_squared_error(d2l):
    class Recorded(d2l.LinearRegression):
        pass

    initial = []

    @d2l.add_to_class(Recorded)
    def apply_init(self, dummy_input, key):
        variables = d2l.LinearRegression.apply_init(self, dummy_input, key)
        initial.append(variables["params"])
        return variables

    model = Recorded(lr=0.1)
    trainer = d2l.Trainer(max_epochs=1)
    trainer.fit(model, one_batch_data(d2l, X_LINE, Y_LINE))
    w0, b0 = (np.array(p, np.float64) for p in model.get_w_b(trainer.state.replace(params=initial[0])))
    assert w0.shape == (2, 1) and 0 < np.abs(w0).max() < 0.05 and not b0.any()  # N(0, 0.01^2), zero bias
    r = X_LINE @ w0 + b0 - Y_LINE  # d/dw of mean(r^2 / 2) = X^T r / n
    w, b = model.get_w_b(trainer.state)
    np.testing.assert_allclose(np.array(w), w0 - 0.1 * X_LINE.T @ r / 2, rtol=1e-5)
    np.testing.assert_allclose(np.array(b), b0 - 0.1 * r.sum(0) / 2, rtol=1e-5)


def test_flax_predict_of_a_framework_layer_is_the_books_loop_compiled_once(d2l, compiled_programs):
    # The book's predict applies the RNN layer once per character, eagerly (a Flax nn.RNN compiled a scan
    # at every call); d2lrnn's compiles the layer's and the output layer's applications once per model.
    d2lrnn.manual_seed(1)
    model = d2l.RNNLM(d2l.GRU(num_hiddens=8, num_layers=2), vocab_size=V, lr=1)
    _, variables = model.init_with_output(d2l.get_key(), d2l.tensor(tokens((B, T))))
    params = variables["params"]
    vocab = d2l.Vocab(list("abcde"))
    state, ids = None, [vocab["c"]]
    for i in range(len("cab") + 8 - 1):  # the book's loop, applied eagerly
        embs = model.one_hot(d2l.tensor([[ids[-1]]]))
        rnn_outputs, state = model.rnn.apply({"params": params["rnn"]}, embs, state)
        if i < len("cab") - 1:
            ids.append(vocab["cab"[i + 1]])
        else:
            Y = model.apply({"params": params}, rnn_outputs, method="output_layer")
            ids.append(int(np.array(Y).argmax(axis=2).reshape(-1)[0]))
    expected = "".join(vocab.idx_to_token[i] for i in ids)
    assert len(set(expected[3:])) >= 2, expected  # not one character throughout

    assert model.predict("cab", 8, vocab, params) == expected
    compiled_programs.clear()
    assert model.predict("cab", 8, vocab, params) == expected
    assert compiled_programs == []
