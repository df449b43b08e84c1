"""Checkpoints: exact round trips, loading across backends, atomic writes, one-line errors."""

import json
import os

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.lm.checkpoint import checkpoint_writer
from d2lrnn.training import checkpoint

KINDS = ("scratch", "concise")
PREFIX = "time traveller"


#: (kind, cell, num_layers, bidirectional, dropout) of models beyond the one-layer RNN
MODELS = [("scratch", "gru", 2, False, 0.2), ("concise", "lstm", 1, False, 0.0),
          ("concise", "gru", 2, True, 0.0), ("scratch", "lstm", 1, True, 0.0)]


def _trained(kind, cell="rnn", num_layers=1, bidirectional=False, dropout=0.0):
    """A small model trained for two epochs on the active backend, its vocabulary and history."""
    d2l.manual_seed(0)
    train_iter, _, vocab = d2l.load_data_lm("timemachine", 4, 8, False, max_tokens=1200, val_fraction=0,
                                            seed=0)
    net = d2l.make_model(kind, len(vocab), 16, cell=cell, num_layers=num_layers, bidirectional=bidirectional,
                         dropout=dropout)
    history = d2l.train_ch8(net, train_iter, vocab, 1.0, 2, progress=False, plot=False, verbose=False,
                            allow_bidirectional=bidirectional, return_history=True)
    return net, vocab, history


def _greedy(net, vocab):
    return d2l.predict_ch8(PREFIX, 40, net, vocab)


def _numpy_params(net):
    return [ops.to_numpy(p) for p in net.scratch_params()]


def _assert_one_line_naming(err, path):
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_on_the_active_backend_is_exact(kind, tmp_path, backend):
    net, vocab, history = _trained(kind)
    path = tmp_path / "model.ckpt"  # any name: the file is written where asked, no suffix added
    hparams = {"lr": 1.0, "hidden": 16, "corpus": "timemachine"}
    assert d2l.save_checkpoint(path, net, vocab, hparams, history) == path
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]

    net2, vocab2, info = d2l.load_checkpoint(path)
    assert type(net2) is type(net) and net2.kind == net.kind
    for a, b in zip(_numpy_params(net2), _numpy_params(net), strict=True):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    assert vocab2 == vocab and vocab2.token_freqs == vocab.token_freqs
    assert _greedy(net2, vocab2) == _greedy(net, vocab)
    assert info == {"kind": net.kind, "cell": "rnn", "num_layers": 1, "bidirectional": False, "dropout": 0.0,
                    "input_dropout": 0.0, "output_dropout": 0.0, "locked_dropout": False, "weight_drop": 0.0,
                    "reset_after": False, "backend": backend,
                    "format_version": checkpoint.FORMAT_VERSION,
                    "d2lrnn_version": d2l.__version__, "hparams": hparams, "history": history, "resume": None}
    assert d2l.checkpoint_info(path) == info


@pytest.mark.parametrize("kind", KINDS)
def test_trained_on_this_backend_loads_on_numpy_with_the_same_greedy_text(kind, tmp_path, backend):
    net, vocab, history = _trained(kind)
    text = _greedy(net, vocab)
    assert text.startswith(PREFIX) and len(text) == len(PREFIX) + 40
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab, history=history)
    with d2l.use_backend("numpy"):
        net2, vocab2, info = d2l.load_checkpoint(path)
        assert all(isinstance(p, np.ndarray) for p in net2.params)
        assert _greedy(net2, vocab2) == text
        params2 = _numpy_params(net2)
    assert d2l.backend_name() == backend
    assert info["backend"] == backend and info["kind"] == net.kind
    for a, b in zip(params2, _numpy_params(net), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: "-".join(map(str, m)))
def test_every_cell_depth_and_direction_round_trips_across_backends(model, tmp_path, backend):
    net, vocab, history = _trained(*model)
    text = _greedy(net, vocab)
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab, history=history)
    info = d2l.checkpoint_info(path)
    kind, cell, num_layers, bidirectional, dropout = model
    assert (info["kind"], info["cell"], info["num_layers"], info["bidirectional"], info["dropout"]) == model
    assert info["reset_after"] == (cell == "gru" and kind == "concise")  # each kind's default GRU form
    with d2l.use_backend("numpy"):
        net2, vocab2, _ = d2l.load_checkpoint(path)
        assert net2.param_names == net.param_names and net2.config() == net.config()
        assert _greedy(net2, vocab2) == text
        params2 = _numpy_params(net2)
    for a, b in zip(params2, _numpy_params(net), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_trained_on_numpy_loads_on_this_backend_with_the_same_greedy_text(kind, tmp_path, backend):
    with d2l.use_backend("numpy"):
        net, vocab, history = _trained(kind)
        text = _greedy(net, vocab)
        path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab, history=history)
    net2, vocab2, info = d2l.load_checkpoint(path)
    assert info["backend"] == "numpy" and info["kind"] == net.kind
    assert _greedy(net2, vocab2) == text
    assert len(text) == len(PREFIX) + 40


def _small():
    _, _, vocab = d2l.load_data_lm("timemachine", 2, 4, max_tokens=200)
    return d2l.make_model("scratch", len(vocab), 4), vocab


@pytest.mark.parametrize("error, raised", [
    (OSError(28, "No space left on device"), d2l.CheckpointError),
    (RuntimeError("the writer broke"), RuntimeError),
    (KeyboardInterrupt(), KeyboardInterrupt),
])
def test_a_failed_save_keeps_the_old_file_and_leaves_no_temporary_file(error, raised, tmp_path, monkeypatch):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab, {"run": 1})
    before = path.read_bytes()

    def torn_write(file, arrays):
        file.write(b"PK\x03\x04 the first bytes of a zip, then the crash")
        raise error

    monkeypatch.setattr(checkpoint, "_write_npz", torn_write)
    net.params = [p + 1.0 for p in net.params]
    with pytest.raises(raised):
        d2l.save_checkpoint(path, net, vocab, {"run": 2})
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]
    assert d2l.load_checkpoint(path)[2]["hparams"] == {"run": 1}


def test_a_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    net, vocab = _small()

    def torn_write(file, arrays):
        file.write(b"PK")
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(checkpoint, "_write_npz", torn_write)
    with pytest.raises(RuntimeError):
        d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    assert os.listdir(tmp_path) == []


def test_the_file_appears_by_renaming_a_synced_temporary_file_from_the_same_folder(tmp_path, monkeypatch):
    net, vocab = _small()
    calls = []
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(("fsync", fd)) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: calls.append(("replace", a, b)) or real_replace(a, b))
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    replaces = [c for c in calls if c[0] == "replace"]
    assert len(replaces) == 1
    _, src, dst = replaces[0]
    assert os.path.dirname(src) == str(tmp_path) and src != str(path) and dst == path
    assert calls[0][0] == "fsync"  # the data is on disk before the rename
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would make it, not 0o600


def test_missing_checkpoint(tmp_path):
    path = tmp_path / "nothing.npz"
    with pytest.raises(d2l.CheckpointError, match="does not exist.*d2lrnn train") as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)
    with pytest.raises(d2l.CheckpointError, match="is a folder: pass the file in it, e.g. .*model.npz"):
        d2l.load_checkpoint(tmp_path)


def test_files_that_are_not_checkpoints(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    lone = tmp_path / "array.npy"
    np.save(lone, np.zeros(3))
    for path in (text, other, lone):
        with pytest.raises(d2l.CheckpointError, match="is not a d2lrnn checkpoint") as err:
            d2l.load_checkpoint(path)
        _assert_one_line_naming(err, path)


def test_truncated_and_empty_checkpoints(tmp_path):
    net, vocab = _small()
    whole = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab).read_bytes()
    for name, data in (("half.npz", whole[: len(whole) // 2]), ("empty.npz", b"")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(d2l.CheckpointError, match="is truncated or corrupt.*save it again") as err:
            d2l.load_checkpoint(path)
        _assert_one_line_naming(err, path)


def _rewrite_meta(path, change):
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    change(meta)
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)


@pytest.mark.parametrize("old_kind", ["rnn_scratch", "rnn_concise"])
def test_a_format_1_checkpoint_still_loads(old_kind, tmp_path):
    # Format 1 (before cells and layers): the one-layer RNN's five arrays, kinds 'rnn_scratch' and
    # 'rnn_concise', no model settings and no parameter names in the metadata.
    net, vocab = _small()
    net.params = [p + 0.01 * i for i, p in enumerate(net.params)]
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)

    def to_format_1(meta):
        for key in ("cell", "num_layers", "bidirectional", "dropout", "reset_after", "param_names"):
            del meta[key]
        meta.update(format_version=1, kind=old_kind)

    _rewrite_meta(path, to_format_1)
    net2, _, info = d2l.load_checkpoint(path)
    assert net2.kind == old_kind[4:] and net2.param_names == ("W_xh", "W_hh", "b_h", "W_hq", "b_q")
    assert (info["cell"], info["num_layers"], info["format_version"]) == ("rnn", 1, 1)
    for a, b in zip(_numpy_params(net2), _numpy_params(net), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_checkpoint_of_a_cell_this_code_cannot_build_is_refused(tmp_path):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    _rewrite_meta(path, lambda m: m.update(cell="transformer"))
    with pytest.raises(d2l.CheckpointError, match="cannot build .*unknown cell 'transformer'.*upgrade") \
            as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)


def test_a_newer_format_version_is_refused_with_the_fix(tmp_path):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    _rewrite_meta(path, lambda m: m.update(format_version=checkpoint.FORMAT_VERSION + 1))
    with pytest.raises(d2l.CheckpointError, match=f"format version {checkpoint.FORMAT_VERSION + 1}, "
                                                  "newer.*upgrade d2lrnn") as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)


def test_metadata_that_does_not_match_the_arrays_is_corrupt(tmp_path):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    _rewrite_meta(path, lambda m: m.update(num_hiddens=5))
    with pytest.raises(d2l.CheckpointError, match=r"corrupt: W_xh has shape \(28, 4\), expected \(28, 5\)"):
        d2l.load_checkpoint(path)
    _rewrite_meta(path, lambda m: m.update(num_hiddens=4, kind="transformer"))
    with pytest.raises(d2l.CheckpointError, match="holds a 'transformer' model, which this d2lrnn") as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)


def test_save_refuses_a_vocabulary_of_another_size_and_a_missing_folder(tmp_path):
    net, vocab = _small()
    with pytest.raises(d2l.CheckpointError, match="vocabulary has 3 tokens but the model expects 28"):
        d2l.save_checkpoint(tmp_path / "model.npz", net, d2l.Vocab(["a", "b"]))
    path = tmp_path / "no" / "such" / "model.npz"
    with pytest.raises(d2l.CheckpointError, match="cannot write checkpoint.*folder exists") as err:
        d2l.save_checkpoint(path, net, vocab)
    _assert_one_line_naming(err, path)


def test_atomic_write_of_text(tmp_path):
    path = checkpoint.atomic_write(tmp_path / "a.csv", lambda f: f.write("x,y\n1,2\n"), "w", "utf-8")
    assert path.read_text() == "x,y\n1,2\n" and os.listdir(tmp_path) == ["a.csv"]


def test_loading_does_not_consume_the_seeded_generator(tmp_path):
    net = d2l.RNNModelScratch(6, 4)
    vocab = d2l.Vocab(list("abcde"))
    path = d2l.save_checkpoint(tmp_path / "m.npz", net, vocab)
    d2l.manual_seed(11)
    d2l.load_checkpoint(path)
    after_load = d2l.to_numpy(d2l.normal(0, 1, (3,)))
    d2l.manual_seed(11)
    np.testing.assert_array_equal(after_load, d2l.to_numpy(d2l.normal(0, 1, (3,))))


def _rewrite_array(path, name, value):
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    arrays[name] = value
    np.savez(path, **arrays)


@pytest.mark.parametrize("name, change, message", [
    ("W_hh", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3, np.nan, a).astype(np.float32),
     r"holds 1 NaN or infinite values in W_hh: .*use the run's best checkpoint"),
    ("b_q", lambda a: np.full_like(a, np.inf), r"holds 28 NaN or infinite values in b_q"),
    ("W_xh", lambda a: a.astype(np.float64), "W_xh holds float64 values, not float32"),
    ("W_hq", lambda a: np.zeros(a.shape, np.int64), "W_hq holds int64 values, not float32"),
    ("b_h", lambda a: np.array(["a"] * a.size), "b_h holds <U1 values, not float32"),
])
def test_weights_that_are_not_finite_float32_are_refused_in_one_line(name, change, message, tmp_path):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    with np.load(path) as data:
        original = data[name]
    _rewrite_array(path, name, change(original))
    with pytest.raises(d2l.CheckpointError, match=message) as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)


@pytest.mark.parametrize("key, value, what", [
    ("hparams", ["lr", 1], "its 'hparams' is list, not a mapping of settings"),
    ("hparams", "lr=1", "its 'hparams' is str, not a mapping of settings"),
    ("history", [1, 2], "its 'history' is list, not a mapping of lists"),
    ("vocab", None, "its 'vocab' is NoneType, not a mapping"),
    ("vocab_size", "28", "its 'vocab_size' is str, not a whole number"),
    ("num_hiddens", True, "its 'num_hiddens' is bool, not a whole number"),
    ("kind", 3, "its 'kind' is int, not a model name"),
    ("resume", [], "its 'resume' is list, not a mapping"),
    ("vocab_size", 0, "vocab_size is 0"),
    ("vocab", {"idx_to_token": ["a", "b"]}, "bad vocabulary"),
    ("vocab", {"idx_to_token": ["<unk>", "a"]}, "its vocabulary has 2 tokens but the model 28"),
])
def test_settings_that_are_not_what_a_checkpoint_holds_are_refused(key, value, what, tmp_path):
    net, vocab = _small()
    path = d2l.save_checkpoint(tmp_path / "model.npz", net, vocab)
    _rewrite_meta(path, lambda m: m.update({key: value}))
    with pytest.raises(d2l.CheckpointError, match=f"is corrupt.*{what}") as err:
        d2l.load_checkpoint(path)
    _assert_one_line_naming(err, path)
    with pytest.raises(d2l.CheckpointError, match=f"is corrupt.*{what}"):
        d2l.checkpoint_info(path)


@pytest.mark.parametrize("path", [None, 3, ""])
def test_a_path_that_is_not_a_file_name_is_refused(path):
    with pytest.raises(d2l.CheckpointError, match=f"must be a file name such as 'model.npz', got {path!r}"):
        d2l.load_checkpoint(path)


def test_a_device_file_is_not_a_checkpoint():
    with pytest.raises(d2l.CheckpointError, match="/dev/zero is not a regular file"):
        d2l.load_checkpoint("/dev/zero")


def test_resume_state_round_trips_as_plain_data(tmp_path):
    net, vocab = _small()
    resume = {"epoch": 3, "generator": d2l.backends.generator_state(), "loader_generator": None}
    path = tmp_path / "last.npz"
    checkpoint.atomic_write(path, checkpoint_writer(net, vocab, {"lr": 1}, {"epoch": [1]}, resume))
    assert d2l.load_checkpoint(path)[2]["resume"] == resume
