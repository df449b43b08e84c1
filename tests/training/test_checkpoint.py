"""The checkpoint container against files nobody vouches for: sizes are checked from the zip and ``.npy``
headers before any data is read, compressed entries (possible memory bombs) are refused, metadata has
caps on its length, depth and texts, damaged bytes are one line, and the optimizer state is checked
like the parameters."""

import io
import json
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import checks
from d2lrnn.training import archive, checkpoint

VOCAB = d2l.Vocab(list("abcdefghijklmnopqrstuvwxyz "))


def _saved(tmp_path, name="model.npz", optimizer=False):
    """A small checkpoint (a 4-unit RNN, 28 tokens); with Adam's state when ``optimizer``."""
    net = d2l.RNNModelScratch(len(VOCAB), 4)
    state = None
    if optimizer:
        arrays = [np.full(d2l.to_numpy(p).shape, 0.5, np.float32) for p in net.params * 2]
        state = {"optimizer": "adam", "t": 3, "arrays": arrays}
    write = d2l.lm.checkpoint_writer(net, VOCAB, {"lr": 1}, {"epoch": [1]}, None, state)
    return checkpoint.atomic_write(tmp_path / name, write)


def _entries(path):
    with zipfile.ZipFile(path) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def _write_zip(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npy_header(descr, shape, version=1, pad=0):
    """The bytes of an ``.npy`` header alone (no data): what a crafted entry claims."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}) + " " * pad + "\n"
    size = struct.pack("<H" if version == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text.encode("latin1")


def _meta_of(path):
    return json.loads(str(np.load(path)["meta"]))


def _one_line(err, path):
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_compressed_archive_is_refused_before_anything_is_decompressed(tmp_path):
    # A memory bomb: 64 MB of zeros compressed to about 64 KB (the 1.6 MB file held 1.6 GB).
    path = _saved(tmp_path)
    entries = _entries(path)
    entries["W_hh.npy"] = _npy(np.zeros((4096, 4096), np.float32))
    bomb = _write_zip(tmp_path / "bomb.npz", entries, zipfile.ZIP_DEFLATED)
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(d2l.CheckpointError, match="holds compressed arrays, which d2lrnn never") as err:
            d2l.load_checkpoint(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _one_line(err, bomb)
    assert peak < 4_000_000  # a few of the file's own bytes, not the 64 MB it expands to


def test_an_array_larger_than_the_model_is_refused_from_its_header(tmp_path):
    path = _saved(tmp_path)
    entries = _entries(path)
    entries["W_hh.npy"] = _npy(np.zeros((2000, 2000), np.float32))  # 16 MB where the model has 4 x 4
    crafted = _write_zip(tmp_path / "big.npz", entries)
    tracemalloc.start()
    try:
        with pytest.raises(d2l.CheckpointError, match=r"W_hh has shape \(2000, 2000\), expected \(4, 4\)"):
            d2l.load_checkpoint(crafted)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4_000_000


@pytest.mark.parametrize("entry, reason", [
    (_npy_header("<f4", (4, 4)), "W_hh holds 68 bytes, not the 132 its header gives"),  # no data behind it
    (_npy_header("<f4", (4, 4), version=2, pad=20_000), "the header of W_hh has 20058 bytes"),
    (_npy_header("|O", (4, 4)), "an array of Python objects"),
    (_npy_header([("a", "<f4")], (4,)), "an array of a type d2lrnn does not read"),
    (_npy_header("<f4", (4, 4))[:-2] + b"\x00\n", "an unreadable array header"),
    (b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}    \n", "an array header without descr"),
    (b"not an array", "W_hh is not an array"),
])
def test_crafted_array_headers_are_one_line(entry, reason, tmp_path):
    entries = _entries(_saved(tmp_path))
    entries["W_hh.npy"] = entry
    crafted = _write_zip(tmp_path / "crafted.npz", entries)
    with pytest.raises(d2l.CheckpointError, match="is truncated or corrupt") as err:
        d2l.load_checkpoint(crafted)
    assert reason in _one_line(err, crafted)


def test_metadata_longer_than_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = _saved(tmp_path)
    entries = _entries(path)
    meta = _meta_of(path)
    meta["hparams"]["note"] = "x" * 3000
    entries["meta.npy"] = _npy(np.array(json.dumps(meta)))
    padded = _write_zip(tmp_path / "padded.npz", entries)
    monkeypatch.setattr(checkpoint, "MAX_META_CHARS", 2000)
    with pytest.raises(d2l.CheckpointError, match=r"metadata holds 3,\d{3} characters, more than the 2,000"):
        d2l.load_checkpoint(padded)


@pytest.mark.parametrize("change, message", [
    (lambda m: m["hparams"].update(prefix="x" * (checkpoint.MAX_TEXT + 1)),
     "a text in its 'hparams' has 4,097 characters, more than 4,096"),
    (lambda m: m["hparams"].update(deep=[[[[[[[[["x"]]]]]]]]]), "nested more than 8 levels deep"),
    (lambda m: m.update(vocab_size=checks.MAX_VOCAB + 1), "vocab_size is 1048577, above d2lrnn's limit"),
    (lambda m: m.update(num_layers=checks.MAX_LAYERS + 1), "num_layers is 65, above d2lrnn's limit of 64"),
    (lambda m: m["vocab"].update(idx_to_token=["<unk>", *range(27)]), "its tokens are not a list of strings"),
    (lambda m: m["vocab"].update(token_freqs=[["a", "x"]]), r"its counts are not a list of \[token, count\]"),
    (lambda m: m.update(param_names="W_xh"), "its parameter names are not a list of names"),
])
def test_crafted_metadata_fields_are_one_line(change, message, tmp_path):
    path = _saved(tmp_path)
    entries = _entries(path)
    meta = _meta_of(path)
    change(meta)
    entries["meta.npy"] = _npy(np.array(json.dumps(meta)))
    crafted = _write_zip(tmp_path / "crafted.npz", entries)
    with pytest.raises(d2l.CheckpointError, match=message) as err:
        d2l.checkpoint_info(crafted)
    _one_line(err, crafted)


def test_a_model_larger_than_the_machine_is_refused_before_its_arrays_are_read(tmp_path, monkeypatch):
    path = _saved(tmp_path)
    monkeypatch.setattr(checkpoint.memory, "physical_memory", lambda: 1088)  # the model takes 1,088 bytes...
    d2l.load_checkpoint(path)
    monkeypatch.setattr(checkpoint.memory, "physical_memory", lambda: 1087)  # ...and no less
    with pytest.raises(d2l.CheckpointError, match="describes a model of 1,088 bytes, more than this "
                                                  "machine's 1,087 bytes of memory"):
        d2l.load_checkpoint(path)


def test_every_single_bit_flip_in_a_run_checkpoint_is_one_line_or_harmless(tmp_path):
    """The issue's case 9 (217 of 400 random flips gave a traceback): 80 bits of a last.npz with Adam's
    state, drawn at random and each flipped alone, are either read back (a flip in a field the reader does
    not use) or refused in one CheckpointError line, by the loader and by the optimizer state's reader."""
    path = _saved(tmp_path, "last.npz", optimizer=True)
    original = path.read_bytes()
    expected = _contents(path)
    outcomes = {"read": 0, "refused": 0}
    for bit in np.random.default_rng(0).choice(8 * len(original), 80, replace=False).tolist():
        flipped = bytearray(original)
        flipped[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(flipped))
        try:
            read = _contents(path)
        except d2l.CheckpointError as err:
            assert "\n" not in str(err)
            outcomes["refused"] += 1
            continue
        # harmless: the flip landed in a zip field the reader does not use (times, attributes)
        assert read.keys() == expected.keys()
        for name in expected:
            np.testing.assert_array_equal(read[name], expected[name], err_msg=f"bit {bit}: {name}")
        outcomes["read"] += 1
    # The CRCs and headers catch nearly all (measured 77, 80 and 75 of the 80 on numpy, TensorFlow and
    # JAX: the metadata names the backend, so the drawn bits land in other fields on each).
    assert outcomes["refused"] >= 70, outcomes


def _contents(path):
    """Every array a run's checkpoint gives back: the model's parameters and the optimizer's state."""
    net, _, _ = d2l.load_checkpoint(path)
    arrays = {f"param.{i}": d2l.to_numpy(p) for i, p in enumerate(net.params)}
    state = checkpoint.load_optimizer_state(path)
    arrays.update({f"optimizer.{i}": np.asarray(a) for i, a in enumerate(state["arrays"])})
    arrays["t"] = np.asarray(state["t"])
    return arrays


def test_the_optimizer_state_is_checked_from_its_headers(tmp_path):
    path = _saved(tmp_path, "last.npz", optimizer=True)
    saved = checkpoint.load_optimizer_state(path)
    assert (saved["optimizer"], saved["t"], len(saved["arrays"])) == ("adam", 3, 10)
    entries = _entries(path)
    entries["optimizer.3.npy"] = _npy(np.zeros((3000, 3000), np.float32))
    crafted = _write_zip(tmp_path / "crafted.npz", entries)
    with pytest.raises(d2l.CheckpointError, match=r"damaged optimizer state \(optimizer.3 holds float32 "
                                                  r"values of shape \(3000, 3000\), not float32 of shape "
                                                  r"\(4, 28\)\)"):
        checkpoint.load_optimizer_state(crafted)
    for change, reason in (({"name": "rmsprop", "t": 3, "arrays": 10}, "an optimizer d2lrnn does not have"),
                           ({"name": "adam", "t": -1, "arrays": 10}, "step count -1"),
                           ({"name": "adam", "t": 3, "arrays": 12}, "12 arrays where adam keeps 10"),
                           ([1, 2], "not a mapping of name, t and arrays")):
        meta = _meta_of(path)
        meta["optimizer"] = change
        entries = _entries(path)
        entries["meta.npy"] = _npy(np.array(json.dumps(meta)))
        _write_zip(crafted, entries)
        with pytest.raises(d2l.CheckpointError, match="holds a damaged optimizer state") as err:
            checkpoint.load_optimizer_state(crafted)
        assert reason in _one_line(err, crafted)


def test_a_symbolic_link_is_refused_where_links_are_not_followed(tmp_path):
    target = _saved(tmp_path)
    link = tmp_path / "last.npz"
    link.symlink_to(target)
    assert d2l.checkpoint_info(link)["hparams"] == {"lr": 1}  # a path the user names may be a link
    with pytest.raises(d2l.CheckpointError, match="is a symbolic link: d2lrnn reads a run folder's own"):
        d2l.checkpoint_info(link, follow_symlinks=False)
    with pytest.raises(d2l.CheckpointError, match="is a symbolic link"):
        checkpoint.load_optimizer_state(link, follow_symlinks=False)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "model.npz"
    import os

    os.mkfifo(fifo)
    with pytest.raises(d2l.CheckpointError, match="is not a regular file"):
        d2l.load_checkpoint(fifo)


def test_a_name_too_long_is_one_line(tmp_path):
    path = tmp_path / ("x" * 300 + ".npz")
    with pytest.raises(d2l.CheckpointError, match="cannot read checkpoint .*File name too long: check the"):
        d2l.load_checkpoint(path)


def test_fortran_ordered_arrays_read_as_numpy_reads_them(tmp_path):
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = _write_zip(tmp_path / "a.npz", {"a.npy": _npy(np.asfortranarray(values))})
    with archive.opened(path) as opened:
        np.testing.assert_array_equal(opened.array("a"), values)
