"""The 1.0 edition's classes on the env's framework: names, data, shapes, and the scratch language model
against the independent NumPy reference (:mod:`tests.reference`)."""

import numpy as np
import pytest

from d2lrnn import ops

from .. import reference
from .conftest import in_place

V, H, T, B = 6, 5, 4, 3  # vocabulary, hidden units, time steps, batch


def test_the_1_0_names_are_there_over_the_2_x_face(d2l, backend):
    for name in ("Module", "Classifier", "DataModule", "Trainer", "SGD", "HyperParameters", "ProgressBoard",
                 "RNNScratch", "RNNLMScratch", "RNN", "RNNLM", "GRU", "LinearRegression", "TimeMachine",
                 "MTFraEng", "Encoder", "Decoder", "EncoderDecoder", "Seq2Seq", "Seq2SeqEncoder",
                 "add_to_class", "check_shape"):
        assert hasattr(d2l, name), name
    # the JAX form's key and training state
    assert hasattr(d2l, "get_key") == hasattr(d2l, "TrainState") == (backend == "jax")
    assert d2l.matmul is not None and d2l.plt.__name__ == "matplotlib.pyplot"  # the 2.x face's tensor names
    X = d2l.swapaxes(d2l.reshape(d2l.arange(6), (1, 2, 3)), 0, 2)
    np.testing.assert_array_equal(d2l.to_numpy(X)[:, :, 0], [[0, 3], [1, 4], [2, 5]])
    assert tuple(d2l.shape(d2l.randn(2, 3))) == (2, 3) == tuple(d2l.shape(d2l.randn((2, 3))))


def test_vocab_orders_tokens_as_the_1_0_edition(d2l):
    vocab = d2l.Vocab(list("hello world"), reserved_tokens=["<pad>"])
    assert vocab.idx_to_token == [" ", "<pad>", "<unk>", "d", "e", "h", "l", "o", "r", "w"]
    assert vocab.unk == 2 and vocab["l"] == 6 and vocab["z"] == 2 and vocab[["h", "i"]] == [5, 2]
    assert vocab.to_tokens(d2l.tensor([5, 4])) == ["h", "e"]
    assert d2l.Vocab([["a", "b"], ["b"]], min_freq=2).idx_to_token == ["<unk>", "b"]


def test_time_machine_gives_the_books_numbers(d2l):
    data = d2l.TimeMachine(batch_size=2, num_steps=10)
    corpus, vocab = data.build(data._download())
    # the 1.0 edition's text-sequence section prints these
    assert (len(corpus), len(vocab)) == (173428, 28)
    assert corpus[:10] == [21, 9, 6, 0, 21, 10, 14, 6, 0, 14]
    X, Y = next(iter(data.get_dataloader(train=False)))
    np.testing.assert_array_equal(d2l.to_numpy(X)[:, 1:], d2l.to_numpy(Y)[:, :-1])
    assert tuple(d2l.shape(X)) == (2, 10) and len(data.train_dataloader()) == 5000


def test_translation_data_as_the_1_0_edition_builds_it(d2l):
    data = d2l.MTFraEng(batch_size=3, num_steps=5)
    src, tgt_in, src_len, tgt_out = (d2l.to_numpy(a) for a in data.build(["go ."], ["va !"]))
    go = [data.src_vocab[t] for t in ["go", ".", "<eos>"]] + [data.src_vocab["<pad>"]] * 2
    np.testing.assert_array_equal(src, [go])
    np.testing.assert_array_equal(src_len, [3])
    bos, pad = data.tgt_vocab["<bos>"], data.tgt_vocab["<pad>"]
    va = [data.tgt_vocab[t] for t in ["va", "!", "<eos>"]]
    np.testing.assert_array_equal(tgt_in, [[bos, *va, pad]])
    np.testing.assert_array_equal(tgt_out, [[*va, pad, pad]])
    assert len(data.train_dataloader()) == 512 // 3 + 1 and len(data.val_dataloader()) == 128 // 3 + 1


def test_add_to_class_makes_a_method_and_check_shape_checks(d2l):
    class Reader(d2l.HyperParameters):
        def __init__(self, a, b=2, _hidden=3):
            self.save_hyperparameters(ignore=["b"])

    @d2l.add_to_class(Reader)
    def total(self):
        return self.a + 10

    reader = Reader(1)
    assert reader.total() == 11 and reader.hparams == {"a": 1} and not hasattr(reader, "b")
    d2l.check_shape(d2l.zeros((2, 3)), (2, 3))
    d2l.check_len([1, 2], 2)
    with pytest.raises(AssertionError, match=r"tensor's shape \(2, 3\) != expected shape \(3, 2\)"):
        d2l.check_shape(d2l.zeros((2, 3)), (3, 2))


def scratch_model(d2l, sigma=0.5, model_class=None):
    """A scratch RNN language model (of ``model_class``, default ``d2l.RNNLMScratch``) and its parameters as
    the reference takes them."""
    rnn = d2l.RNNScratch(num_inputs=V, num_hiddens=H, sigma=sigma)
    model = (model_class or d2l.RNNLMScratch)(rnn, vocab_size=V, lr=0.5)
    model.plot_train_per_epoch = 1  # a point for every minibatch (the tests train on one)
    own = (rnn.W_xh, rnn.W_hh, rnn.b_h, model.W_hq, model.b_q)
    params = [np.array(ops.to_numpy(p)) for p in own]  # copies: training changes the module's in place
    return model, params


def tokens(shape, seed=0):
    return np.random.default_rng(seed).integers(0, V, shape)


@in_place
def test_the_scratch_rnn_and_its_language_model_match_the_reference(d2l):
    model, params = scratch_model(d2l)
    X, Y = tokens((B, T)), tokens((B, T), 1)
    outputs, state = model.rnn(model.one_hot(d2l.tensor(X)))
    d2l.check_len(outputs, T)
    logits, Hs = reference.forward(params, X, np.zeros((B, H)))
    np.testing.assert_allclose(d2l.to_numpy(state), Hs[-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d2l.to_numpy(outputs[1]), Hs[2], rtol=1e-5, atol=1e-6)
    Y_hat = model(d2l.tensor(X))
    d2l.check_shape(Y_hat, (B, T, V))
    np.testing.assert_allclose(d2l.to_numpy(Y_hat), np.stack(logits, 1), rtol=1e-5, atol=1e-6)
    loss = model.loss(Y_hat, d2l.tensor(Y))
    np.testing.assert_allclose(float(d2l.to_numpy(loss)), reference.loss(params, X, Y, np.zeros((B, H))),
                               rtol=1e-5)
    # accuracy: the fraction of steps whose largest logit is the label
    expected = np.mean(np.stack(logits, 1).argmax(-1) == Y)
    assert float(d2l.to_numpy(model.accuracy(Y_hat, d2l.tensor(Y)))) == pytest.approx(expected)


@in_place
def test_predict_is_the_references_greedy_decoding(d2l):
    model, params = scratch_model(d2l, sigma=1.0)
    vocab = d2l.Vocab(list("abcde"))  # 6 tokens with <unk>
    prefix = "cab"
    expected = reference.decode(params, [vocab[c] for c in prefix], 8)  # it never takes <unk>: nor here
    text = model.predict(prefix, 8, vocab)
    assert text == prefix + "".join(vocab.idx_to_token[i] for i in expected)
    assert len(text) == len(prefix) + 8 and "<unk>" not in text


def test_the_books_download_cells_are_served_from_the_bundled_files(d2l, tmp_path):
    with open(d2l.download(d2l.DATA_URL + "timemachine.txt", str(tmp_path), "sha1")) as f:
        assert f.read()[:39] == "The Time Machine, by H. G. Wells [1898]"
    archive = d2l.download(d2l.DATA_URL + "fra-eng.zip", str(tmp_path), "sha1")
    d2l.extract(archive)
    text = (tmp_path / "fra-eng" / "fra.txt").read_text(encoding="utf-8")
    assert text.startswith("Go.\tVa !\n") and len(text.splitlines()) == 18066
    with pytest.raises(d2l.DataError, match="bundles no file 'other.zip'") as refused:
        d2l.download(d2l.DATA_URL + "other.zip", str(tmp_path))
    assert "\n" not in str(refused.value) and sorted(p.name for p in tmp_path.iterdir()) == ["fra-eng"]
