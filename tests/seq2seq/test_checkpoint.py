"""Translation checkpoints: exact round trips, loading across backends, optimizer and resume state,
every corrupt field refused in one line, and each loader refusing the other kind of model."""

import json
import os

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.seq2seq import make_seq2seq, make_seq2seq_updater, translate
from d2lrnn.seq2seq.checkpoint import (
    load_seq2seq_checkpoint,
    save_seq2seq_checkpoint,
    seq2seq_checkpoint_info,
    seq2seq_checkpoint_writer,
)
from d2lrnn.seq2seq.model import Decoder, Encoder, EncoderDecoder
from d2lrnn.training import checkpoint

RNNS = ("scratch", "concise")
NUM_STEPS = 8
#: Sentences to translate: words of the training pairs, one the vocabulary lacks, and a long one.
SENTENCES = ["go .", "i lost .", "he's calm .", "i'm home .", "zyzzyva !",
             "who are you and where are we going ?"]
HPARAMS = {"lr": 0.005, "hidden": 16, "pairs": None}
HISTORY = {"epoch": [1, 2], "train_loss": [5.1, 4.2], "val_loss": [5.0, 4.4], "val_bleu": [0.0, 0.01],
           "tokens_per_sec": [900.0, 950.0], "seconds": [1.5, 3.0]}


@pytest.fixture(scope="module")
def vocabs():
    """The source and target vocabularies of the first 200 pairs (NumPy work: no backend involved)."""
    _, _, src_vocab, tgt_vocab = d2l.load_data_nmt_split(16, NUM_STEPS, num_examples=200, seed=0)
    return src_vocab, tgt_vocab


def _model(vocabs, rnn="scratch", seed=0):
    """A small encoder-decoder (2 GRU layers) drawn from ``seed``, with every weight moved off its
    initial value so that biases are not all zero."""
    d2l.manual_seed(seed)
    net = make_seq2seq(len(vocabs[0]), len(vocabs[1]), 8, 16, 2, 0.1, rnn=rnn)
    rng = np.random.default_rng(seed)
    net.params = [p + ops.from_numpy(rng.normal(0, 0.3, ops.shape(p)).astype(np.float32)) for p in net.params]
    return net


def _numpy(params):
    return [ops.to_numpy(p) for p in params]


def _translations(net, src_vocab, tgt_vocab):
    """Greedy and beam-search (k = 3) translations of SENTENCES."""
    return [translate(net, SENTENCES, src_vocab, tgt_vocab, NUM_STEPS, beam) for beam in (1, 3)]


def _assert_one_line_naming(err, path):
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message


@pytest.mark.parametrize("rnn", RNNS)
def test_round_trip_on_the_active_backend_is_exact(rnn, vocabs, tmp_path, backend):
    net = _model(vocabs, rnn)
    path = tmp_path / "model.ckpt"  # any name: the file is written where asked
    assert save_seq2seq_checkpoint(path, net, *vocabs, NUM_STEPS, HPARAMS, HISTORY) == path
    assert os.listdir(tmp_path) == ["model.ckpt"]

    net2, src2, tgt2, info = load_seq2seq_checkpoint(path)
    assert isinstance(net2, EncoderDecoder) and net2.config() == net.config()
    assert net2.param_names == net.param_names
    for a, b in zip(_numpy(net2.params), _numpy(net.params), strict=True):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    assert (src2, tgt2) == vocabs and tgt2.token_freqs == vocabs[1].token_freqs
    assert _translations(net2, src2, tgt2) == _translations(net, *vocabs)
    assert info == {"kind": "seq2seq", "rnn": rnn, "cell": "gru", "embed_size": 8, "num_hiddens": 16,
                    "num_layers": 2, "dropout": 0.1, "reset_after": True, "embed_dropout": 0.0,
                    "output_dropout": 0.0, "attention": False, "tie_embeddings": False,
                    "bidirectional": False, "num_steps": NUM_STEPS,
                    "backend": backend, "format_version": checkpoint.FORMAT_VERSION,
                    "d2lrnn_version": d2l.__version__, "hparams": HPARAMS, "history": HISTORY, "resume": None}
    assert seq2seq_checkpoint_info(path) == info


@pytest.mark.parametrize("rnn", RNNS)
def test_saved_on_numpy_loads_here_and_saved_here_loads_on_numpy(rnn, vocabs, tmp_path, backend):
    with d2l.use_backend("numpy"):
        net = _model(vocabs, rnn)
        expected = _translations(net, *vocabs)
        params = _numpy(net.params)
        path = save_seq2seq_checkpoint(tmp_path / "numpy.npz", net, *vocabs, NUM_STEPS)
    assert d2l.backend_name() == backend
    net2, src2, tgt2, info = load_seq2seq_checkpoint(path)
    assert info["backend"] == "numpy" and info["rnn"] == rnn
    assert all(ops.is_tensor(p) for p in net2.params)
    for a, b in zip(_numpy(net2.params), params, strict=True):
        np.testing.assert_array_equal(a, b)
    assert _translations(net2, src2, tgt2) == expected
    assert len(set(expected[0])) > 1  # the sentences get different translations: the test can tell

    back = save_seq2seq_checkpoint(tmp_path / "here.npz", net2, src2, tgt2, NUM_STEPS)
    with d2l.use_backend("numpy"):
        net3, src3, tgt3, info = load_seq2seq_checkpoint(back)
        assert _translations(net3, src3, tgt3) == expected
        params3 = _numpy(net3.params)
    assert info["backend"] == backend
    for a, b in zip(params3, params, strict=True):
        np.testing.assert_array_equal(a, b)


def test_optimizer_and_resume_state_round_trip(vocabs, tmp_path):
    net = _model(vocabs)
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=ops.shape(p)).astype(np.float32) for p in net.params * 2]  # Adam: m and v
    resume = {"epoch": 2, "generator": d2l.backends.generator_state(), "loader_generator": None}
    write = seq2seq_checkpoint_writer(net, *vocabs, NUM_STEPS, HPARAMS, HISTORY, resume,
                                      {"optimizer": "adam", "t": 17, "arrays": arrays})
    path = checkpoint.atomic_write(tmp_path / "last.npz", write)
    assert seq2seq_checkpoint_info(path)["resume"] == resume
    saved = checkpoint.load_optimizer_state(path)
    assert (saved["optimizer"], saved["t"]) == ("adam", 17)
    for a, b in zip(saved["arrays"], arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    net2, _, tgt_vocab, _ = load_seq2seq_checkpoint(path)
    updater = make_seq2seq_updater(net2, tgt_vocab, 0.005)
    updater.load_state_dict(saved)
    assert updater.state_dict()["t"] == 17
    for a, b in zip(updater.state_dict()["arrays"], arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    weights_only = save_seq2seq_checkpoint(tmp_path / "m.npz", net, *vocabs, NUM_STEPS)
    assert checkpoint.load_optimizer_state(weights_only) is None


def test_loading_does_not_consume_the_seeded_generator(vocabs, tmp_path):
    path = save_seq2seq_checkpoint(tmp_path / "m.npz", _model(vocabs), *vocabs, NUM_STEPS)
    d2l.manual_seed(11)
    load_seq2seq_checkpoint(path)
    after_load = d2l.to_numpy(d2l.normal(0, 1, (3,)))
    d2l.manual_seed(11)
    np.testing.assert_array_equal(after_load, d2l.to_numpy(d2l.normal(0, 1, (3,))))


def test_each_loader_refuses_the_other_kind_of_model_and_names_its_command(vocabs, tmp_path):
    lm_vocab = d2l.Vocab(list("abcde"))
    lm = d2l.save_checkpoint(tmp_path / "lm.npz", d2l.RNNModelScratch(len(lm_vocab), 4), lm_vocab)
    with pytest.raises(d2l.CheckpointError, match="holds a language model, not a translation model: continue "
                                                  "text with `d2lrnn generate --checkpoint .*lm.npz`") as err:
        load_seq2seq_checkpoint(lm)
    _assert_one_line_naming(err, lm)
    with pytest.raises(d2l.CheckpointError, match="holds a language model"):
        seq2seq_checkpoint_info(lm)

    s2s = save_seq2seq_checkpoint(tmp_path / "s2s.npz", _model(vocabs), *vocabs, NUM_STEPS)
    refused = (r"holds a translation model \(seq2seq\), not a language model: translate with `d2lrnn "
               "translate SENTENCE --checkpoint .*s2s.npz`")
    for load in (d2l.load_checkpoint, d2l.checkpoint_info):
        with pytest.raises(d2l.CheckpointError, match=refused) as err:
            load(s2s)
        _assert_one_line_naming(err, s2s)
    assert checkpoint.checkpoint_kind(s2s) == "seq2seq" and checkpoint.checkpoint_kind(lm) == "lm"


def test_files_that_are_not_checkpoints_name_the_command_that_writes_them(vocabs, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    whole = save_seq2seq_checkpoint(tmp_path / "model.npz", _model(vocabs), *vocabs, NUM_STEPS).read_bytes()
    (tmp_path / "half.npz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "empty.npz").write_bytes(b"")
    cases = {"missing.npz": "does not exist: check the path, or train a model with `d2lrnn translate-tra",
             "notes.txt": "is not a d2lrnn checkpoint: pass a model.npz written by `d2lrnn translate-train`",
             "other.npz": "is not a d2lrnn checkpoint",
             "half.npz": "is truncated or corrupt", "empty.npz": "is truncated or corrupt"}
    for name, message in cases.items():
        with pytest.raises(d2l.CheckpointError, match=message) as err:
            load_seq2seq_checkpoint(tmp_path / name)
        _assert_one_line_naming(err, tmp_path / name)


def _rewrite(path, change_meta=None, change_arrays=None):
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    if change_meta:
        change_meta(meta)
    if change_arrays:
        change_arrays(arrays, meta)
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)


def _set(key, value):
    return lambda meta: meta.update({key: value})


def _without_bos(meta):
    tokens = meta["tgt_vocab"]["idx_to_token"]
    tokens[tokens.index("<bos>")] = "<start>"


def _drop(name):
    def change(arrays, meta):
        del arrays[name]
        meta["param_names"].remove(name)
    return change


def _nan_at(name, index):
    def change(arrays, meta):
        arrays[name] = arrays[name].copy()
        arrays[name].flat[index] = np.nan
    return change


def _as(name, dtype):
    return lambda arrays, meta: arrays.update({name: arrays[name].astype(dtype)})


META_CASES = [
    (_set("num_hiddens", 12), r"is corrupt: encoder.W_xz has shape \(8, 16\), expected \(8, 12\) for "
                              r"vocabularies \d+ and \d+, embedding 8 and 12 hidden units"),
    (_set("embed_size", 9), r"encoder.embedding has shape \(\d+, 8\), expected \(\d+, 9\)"),
    (_set("num_layers", 1), "it holds encoder.l1.W_xz, .* for a 1-layer gru encoder-decoder"),
    (_set("src_vocab_size", "95"), "its 'src_vocab_size' is str, not a whole number"),
    (_set("num_steps", 0), "num_steps is 0"),
    (_set("num_steps", 2.5), "its 'num_steps' is float, not a whole number"),
    (_set("reset_after", "yes"), "its 'reset_after' is str, not true or false"),
    (_set("tgt_vocab", None), "its 'tgt_vocab' is NoneType, not a mapping"),
    (_set("hparams", ["lr", 1]), "its 'hparams' is list, not a mapping of settings"),
    (_set("resume", []), "its 'resume' is list, not a mapping"),
    (_set("rnn", "transformer"), "holds a 'transformer' translation model, which this d2lrnn cannot build"),
    (_set("cell", "transformer"), "holds a model this d2lrnn cannot build .*unknown cell 'transformer'"),
    (_set("dropout", 1.5), "holds a model this d2lrnn cannot build .*dropout is 1.5"),
    (_set("embed_dropout", 1.5), "holds a model this d2lrnn cannot build .*embed_dropout is 1.5"),
    (_set("output_dropout", "0.2"), "its 'output_dropout' is str, not a number"),
    (_set("kind", "transformer"), "holds a 'transformer' model, not a translation model"),
    (_set("format_version", checkpoint.FORMAT_VERSION + 1), "newer than this d2lrnn reads.*upgrade d2lrnn"),
    (_without_bos, "is corrupt: its target vocabulary lacks <bos>"),
    (lambda m: m["src_vocab"]["idx_to_token"].pop(), r"its source vocabulary has \d+ tokens but the model"),
    (_set("src_vocab", {"idx_to_token": ["a", "<unk>"]}), "bad source vocabulary"),
]


def test_the_dropout_rates_round_trip_and_a_checkpoint_from_before_them_has_none(vocabs, tmp_path):
    d2l.manual_seed(0)
    net = make_seq2seq(len(vocabs[0]), len(vocabs[1]), 8, 16, 2, 0.1, embed_dropout=0.2, output_dropout=0.3)
    path = save_seq2seq_checkpoint(tmp_path / "model.npz", net, *vocabs, NUM_STEPS)
    net2, *_, info = load_seq2seq_checkpoint(path)
    assert (info["embed_dropout"], info["output_dropout"]) == (0.2, 0.3) and net2.config() == net.config()

    _rewrite(path, change_meta=lambda meta: [meta.pop(key) for key in ("embed_dropout", "output_dropout")])
    net3, *_, info = load_seq2seq_checkpoint(path)
    assert (info["embed_dropout"], info["output_dropout"]) == (0.0, 0.0)
    assert (net3.config()["embed_dropout"], net3.config()["output_dropout"]) == (0.0, 0.0)


def _round_trip(net, setting, vocabs, tmp_path, rng):
    """Save ``net``, load it back: ``setting`` is True in its info, the same config and outputs; the path."""
    path = save_seq2seq_checkpoint(tmp_path / "model.npz", net, *vocabs, NUM_STEPS)
    net2, *_, info = load_seq2seq_checkpoint(path)
    assert info[setting] is True and net2.config() == net.config()
    X = ops.from_numpy(rng.integers(0, len(vocabs[0]), (2, NUM_STEPS)))
    Y = ops.from_numpy(rng.integers(0, len(vocabs[1]), (2, 3)))
    valid_len = ops.from_numpy(np.array([NUM_STEPS, 2]))
    np.testing.assert_array_equal(ops.to_numpy(net2(X, Y, valid_len)[0]),
                                  ops.to_numpy(net(X, Y, valid_len)[0]))
    return path


def _saved_without_it_reads_false(setting, vocabs, tmp_path):
    """A plain model's checkpoint from before ``setting`` existed loads with it False."""
    plain = save_seq2seq_checkpoint(tmp_path / "plain.npz", _model(vocabs), *vocabs, NUM_STEPS)
    _rewrite(plain, change_meta=lambda meta: meta.pop(setting))
    assert load_seq2seq_checkpoint(plain)[-1][setting] is False


def test_attention_round_trips_and_a_checkpoint_from_before_it_has_none(vocabs, tmp_path, rng):
    d2l.manual_seed(0)
    net = make_seq2seq(len(vocabs[0]), len(vocabs[1]), 8, 16, 2, 0.1, attention=True)
    path = _round_trip(net, "attention", vocabs, tmp_path, rng)

    _rewrite(path, change_meta=lambda meta: meta.update(attention="yes"))
    with pytest.raises(d2l.CheckpointError, match="its .attention. is str"):
        load_seq2seq_checkpoint(path)
    _rewrite(path, change_meta=lambda meta: meta.pop("attention"))  # as before attention: none
    with pytest.raises(d2l.CheckpointError, match="decoder.W_a"):  # so its three extra arrays do not fit
        load_seq2seq_checkpoint(path)
    _saved_without_it_reads_false("attention", vocabs, tmp_path)


def test_tied_embeddings_round_trip_and_a_checkpoint_from_before_them_has_none(vocabs, tmp_path, rng):
    d2l.manual_seed(0)
    net = make_seq2seq(len(vocabs[0]), len(vocabs[1]), 16, 16, 2, 0.1, tie_embeddings=True)
    path = _round_trip(net, "tie_embeddings", vocabs, tmp_path, rng)

    _rewrite(path, change_meta=lambda meta: meta.update(tie_embeddings=1))
    with pytest.raises(d2l.CheckpointError, match="its .tie_embeddings. is int"):
        load_seq2seq_checkpoint(path)
    _rewrite(path, change_meta=lambda meta: meta.pop("tie_embeddings"))  # as before them: untied
    with pytest.raises(d2l.CheckpointError, match="lacks decoder.W_hq"):  # so its output layer is missing
        load_seq2seq_checkpoint(path)
    _saved_without_it_reads_false("tie_embeddings", vocabs, tmp_path)


def test_a_bidirectional_encoder_round_trips_and_a_checkpoint_from_before_it_reads_one_way(vocabs, tmp_path,
                                                                                          rng):
    d2l.manual_seed(0)
    net = make_seq2seq(len(vocabs[0]), len(vocabs[1]), 8, 16, 2, 0.1, attention=True, bidirectional=True)
    path = _round_trip(net, "bidirectional", vocabs, tmp_path, rng)

    _rewrite(path, change_meta=lambda meta: meta.update(bidirectional="both"))
    with pytest.raises(d2l.CheckpointError, match="its .bidirectional. is str"):
        load_seq2seq_checkpoint(path)
    _rewrite(path, change_meta=lambda meta: meta.pop("bidirectional"))  # as before it: one way
    with pytest.raises(d2l.CheckpointError, match="is corrupt: it holds encoder.rev.W_xz, "):  # extra arrays
        load_seq2seq_checkpoint(path)
    _rewrite(path, change_meta=lambda meta: meta.update(bidirectional=True, num_hiddens=15))
    with pytest.raises(d2l.CheckpointError, match="cannot build .a bidirectional encoder splits num_hiddens "
                                                  "in two, and 15 is odd"):
        load_seq2seq_checkpoint(path)
    _saved_without_it_reads_false("bidirectional", vocabs, tmp_path)


@pytest.mark.parametrize("change, message", META_CASES)
def test_corrupt_settings_are_refused_in_one_line(change, message, vocabs, tmp_path):
    path = save_seq2seq_checkpoint(tmp_path / "model.npz", _model(vocabs), *vocabs, NUM_STEPS)
    _rewrite(path, change_meta=change)
    for load in (load_seq2seq_checkpoint, seq2seq_checkpoint_info):
        with pytest.raises(d2l.CheckpointError, match=message) as err:
            load(path)
        _assert_one_line_naming(err, path)


ARRAY_CASES = [
    (_nan_at("decoder.W_hq", 5), "holds 1 NaN or infinite values in decoder.W_hq: .*use the run's best"),
    (_nan_at("encoder.embedding", 0), "holds 1 NaN or infinite values in encoder.embedding"),
    (_as("decoder.b_q", np.float64), "decoder.b_q holds float64 values, not float32"),
    (_as("encoder.l1.W_hh", np.int32), "encoder.l1.W_hh holds int32 values, not float32"),
    (_drop("decoder.b_q"), "is corrupt: it lacks decoder.b_q for a 2-layer gru encoder-decoder"),
    (lambda arrays, meta: arrays.update({"decoder.W_hq": arrays["decoder.W_hq"].T.copy()}),
     r"decoder.W_hq has shape \(\d+, 16\), expected \(16, \d+\)"),
    (lambda arrays, meta: meta["param_names"].reverse(), "its parameters in another order"),
]


@pytest.mark.parametrize("change, message", ARRAY_CASES)
def test_corrupt_weights_are_refused_in_one_line(change, message, vocabs, tmp_path):
    path = save_seq2seq_checkpoint(tmp_path / "model.npz", _model(vocabs), *vocabs, NUM_STEPS)
    _rewrite(path, change_arrays=change)
    with pytest.raises(d2l.CheckpointError, match=message) as err:
        load_seq2seq_checkpoint(path)
    _assert_one_line_naming(err, path)


class _MyEncoder(Encoder):
    def forward(self, params, X, *args, training=False):
        return X


class _MyDecoder(Decoder):
    def init_state(self, enc_outputs, *args):
        return enc_outputs


def test_save_refuses_what_it_could_not_load_back(vocabs, tmp_path):
    net = _model(vocabs)
    src_vocab, tgt_vocab = vocabs
    with pytest.raises(d2l.CheckpointError, match=r"the target vocabulary has 3 tokens but the model \d+: "
                                                  "save the vocabularies the model was trained with"):
        save_seq2seq_checkpoint(tmp_path / "m.npz", net, src_vocab, d2l.Vocab(["a", "b"]), NUM_STEPS)
    no_bos = d2l.Vocab.from_tokens_list([t if t != "<bos>" else "<start>" for t in tgt_vocab.idx_to_token])
    with pytest.raises(d2l.CheckpointError, match="the target vocabulary lacks <bos>"):
        save_seq2seq_checkpoint(tmp_path / "m.npz", net, src_vocab, no_bos, NUM_STEPS)
    for other in (d2l.RNNModelScratch(len(src_vocab), 4), EncoderDecoder(_MyEncoder(), _MyDecoder())):
        with pytest.raises(d2l.CheckpointError, match="cannot be saved as a translation model: build it with "
                                                      "d2l.make_seq2seq"):
            save_seq2seq_checkpoint(tmp_path / "m.npz", other, *vocabs, NUM_STEPS)
    with pytest.raises(d2l.ArgumentError, match="num_steps"):
        save_seq2seq_checkpoint(tmp_path / "m.npz", net, *vocabs, 0)
    missing = tmp_path / "no" / "such" / "m.npz"
    with pytest.raises(d2l.CheckpointError, match="cannot write checkpoint.*folder exists") as err:
        save_seq2seq_checkpoint(missing, net, *vocabs, NUM_STEPS)
    _assert_one_line_naming(err, missing)
    assert os.listdir(tmp_path) == []
