"""What both training commands share (``cli/command.py``) against run folders nobody vouches for (issue 32):
a ``last.npz`` whose settings name a file (never opened), a folder that mixes two runs (an ``--overwrite``
killed while it renamed its first epoch's files), a run that stopped early (finished: nothing changes),
settings, histories and run ids that are not what a run writes, and a translation run that diverges to a
finite loss (exit 2, the best model kept). Every refusal is one line, exit 2, and leaves the folder as it
was."""

import contextlib
import json
import os
import sys

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import cli
from d2lrnn.seq2seq import seq2seq_checkpoint_info
from d2lrnn.training import atomic, loop

#: A small language-model run: 15 minibatches an epoch.
TINY = ["--hidden", "8", "--max-tokens", "1000", "--batch-size", "8", "--num-steps", "8", "--no-progress"]
#: The shapes of tests/cli/test_translate.py's shared run, so that a framework that compiles the training
#: step (JAX, TensorFlow) compiles it once for both files.
PAIRS = ["--num-examples", "300", "--epochs", "1", "--hidden", "16", "--embed-size", "16",
         "--batch-size", "30", "--dropout", "0", "--num-steps", "6", "--no-progress"]


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != ".lock"}


def _rewrite_meta(path, change):
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    change(meta)
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)


@contextlib.contextmanager
def _opened_files():
    """The paths every ``open`` of this process names while the block runs (Python's audit events: what
    d2lrnn, NumPy and zipfile open)."""
    opened, active = [], [True]

    def hook(event, args):
        if active[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)  # hooks cannot be removed: this one stops listening when the block ends
    try:
        yield opened
    finally:
        active[0] = False


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A 1-epoch language-model run (kept unchanged: tests copy it)."""
    out = tmp_path_factory.mktemp("lm") / "run"
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(out)]) == 0
    return out


def _copy(run, to):
    to.mkdir()
    for name, data in _files(run).items():
        (to / name).write_bytes(data)
    return to


@pytest.mark.once
def test_a_last_npz_naming_a_file_never_makes_resume_open_it(lm_run, tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("password: hunter2\n" * 100)
    run = _copy(lm_run, tmp_path / "run")
    named = {"corpus": str(secret), "corpus_path": str(secret)}
    _rewrite_meta(run / "last.npz", lambda m: m["hparams"].update(named))
    before = _files(run)
    capsys.readouterr()
    with _opened_files() as opened:
        assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 2
    assert str(secret) not in opened
    err = capsys.readouterr().err
    assert err == (f"d2lrnn: error: the run in {run} was trained on the file '{secret}': pass it again with "
                   "--corpus PATH to resume (d2lrnn opens no file that a checkpoint names; the run checks it "
                   "is the same text)\n")
    assert _files(run) == before


@pytest.mark.once
def test_a_translation_run_naming_a_pairs_file_neither_opens_nor_prints_it(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["translate-train", *PAIRS, "--out", str(run)]) == 0
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the first line\n")
    _rewrite_meta(run / "last.npz", lambda m: m["hparams"].update(pairs=str(secret), epochs=1))
    capsys.readouterr()
    with _opened_files() as opened:
        assert cli.main(["translate-train", "--resume", str(run), "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert str(secret) not in opened and "root:x" not in err
    assert err.startswith(f"d2lrnn: error: the run in {run} was trained on the file '{secret}': pass it "
                          "again with --pairs PATH") and err.count("\n") == 1


@pytest.mark.once
def test_a_folder_mixing_two_runs_is_refused_and_overwrite_mends_it(lm_run, tmp_path, monkeypatch, capsys):
    """An --overwrite run killed between the renames of its first epoch's files: its model.npz is in
    place, the rest is the old run's. (The kill is a failure raised after the first rename; kill -9 leaves
    the same files and a temporary file, which the next run removes.)"""
    run = _copy(lm_run, tmp_path / "run")
    real_replace = os.replace

    def replace_once(src, dst):
        real_replace(src, dst)
        raise OSError(5, "Input/output error (the process is killed here)")

    monkeypatch.setattr(atomic.os, "replace", replace_once)
    assert cli.main(["train", *TINY, "--epochs", "1", "--seed", "5", "--out", str(run), "--overwrite"]) == 2
    monkeypatch.undo()
    mixed = _files(run)
    old = _files(lm_run)
    assert mixed["model.npz"] != old["model.npz"] and mixed["last.npz"] == old["last.npz"]
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 2
    assert capsys.readouterr().err == (
        f"d2lrnn: error: {run} mixes the files of two runs (its model.npz is not from the run of its "
        "last.npz: a run started with --overwrite was stopped while it saved its first epoch): start again "
        "with --overwrite, or choose another --out\n")
    assert _files(run) == mixed
    assert cli.main(["train", *TINY, "--epochs", "1", "--seed", "5", "--out", str(run), "--overwrite"]) == 0
    assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 0


@pytest.mark.once
def test_a_run_that_stopped_early_is_finished(tmp_path, monkeypatch, capsys):
    from d2lrnn.lm import train

    scripted = iter([9.0, 7.0, 8.0, 8.5])
    monkeypatch.setattr(train, "evaluate_perplexity", lambda *a, **k: next(scripted))
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--epochs", "30", "--patience", "2", "--out", str(run)]) == 0
    assert d2l.checkpoint_info(run / "last.npz")["history"]["epoch"] == [1, 2, 3, 4]
    before = _files(run)
    capsys.readouterr()
    for more in ([], ["--epochs", "40"]):
        assert cli.main(["train", "--resume", str(run), *more]) == 2
        assert capsys.readouterr().err == (
            f"d2lrnn: error: the run in {run} stopped early after epoch 4 of {more[-1] if more else 30} (no "
            "better validation perplexity for 2 epochs): it is finished, nothing was changed; start a new "
            "run to train with other settings\n")
    assert _files(run) == before


@pytest.mark.once
def test_a_run_scored_on_another_cut_of_the_validation_text_is_not_resumed(lm_run, tmp_path, capsys):
    # Until 2026-11-27 the validation text was cut into one row per minibatch row, so a model's validation
    # perplexity moved with the batch size; now it is cut into d2l.VAL_STREAMS rows. A run saved before
    # holds no val_streams: resumed, its best model would be chosen by two different measures.
    assert d2l.checkpoint_info(lm_run / "last.npz")["hparams"]["val_streams"] == d2l.VAL_STREAMS == 16
    for name, change in (("old", lambda m: m["hparams"].pop("val_streams")),
                         ("other", _set("hparams", "val_streams", value=8))):
        run = _copy(lm_run, tmp_path / name)
        _rewrite_meta(run / "last.npz", change)
        before = _files(run)
        capsys.readouterr()
        assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 2
        cut = "one row per minibatch row (d2lrnn before 2026-11-27)" if name == "old" else "8 rows"
        assert capsys.readouterr().err == (
            f"d2lrnn: error: the run in {run} scored its validation text cut into {cut}, this d2lrnn into 16 "
            "rows: its epochs and new ones would not compare, so it cannot be resumed; nothing was changed "
            "(its model.npz still generates): start a new run\n")
        assert _files(run) == before


def _set(*keys, value):
    def change(meta):
        target = meta
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return change


@pytest.mark.once
@pytest.mark.parametrize("change, message", [
    (_set("hparams", "cell", value="foo"), "last.npz is corrupt: its setting cell is 'foo', not one of rnn"),
    (_set("hparams", "model", value="foo"), "its setting model is 'foo', not one of scratch, concise"),
    (_set("hparams", "sampling", value="foo"), "its setting sampling is 'foo', not one of random"),
    (_set("hparams", "init", value="foo"), "its setting init is 'foo', not one of normal, uniform"),
    (_set("hparams", "epochs", value=10**30), "its setting epochs must be at most 100,000"),
    (_set("hparams", "hidden", value=16), "its settings say --hidden 16 but its model has num_hiddens 8"),
    (_set("hparams", "backend", value=["numpy"]), "its setting backend is ['numpy'], not one of"),
    (_set("hparams", "run", value="../../x"), "its run id is '../../x', not 32 hexadecimal digits"),
    (_set("history", "epoch", value=["x"]), "its history of epoch holds other things than numbers"),
    (_set("history", "train_ppl", value=[]), "its history of train_ppl is not a list of 1 epochs"),
    (_set("resume", "epoch", value=True), "holds no resume state: it is not a run's last.npz"),
    (_set("vocab", "token_freqs", value=[["a", "x"]]), "bad vocabulary: its counts are not a list"),
])
def test_settings_a_new_run_refuses_are_refused_on_resume(change, message, lm_run, tmp_path, capsys):
    run = _copy(lm_run, tmp_path / "run")
    _rewrite_meta(run / "last.npz", change)
    before = _files(run)
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("d2lrnn: error: ")
    assert _files(run) == before


@pytest.mark.once
def test_foreign_files_in_out_are_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.csv").write_text("my own,metrics\n")
    (out / "perplexity.png").write_bytes(b"\x89PNG\r\n\x1a\nmy own plot")
    for flags in ([], ["--overwrite"]):
        assert cli.main(["train", *TINY, "--out", str(out), *flags]) == 2
        assert "holds metrics.csv, perplexity.png, which d2lrnn did not write" in capsys.readouterr().err
    assert _files(out) == {"metrics.csv": b"my own,metrics\n",
                           "perplexity.png": b"\x89PNG\r\n\x1a\nmy own plot"}


@pytest.mark.once
def test_a_symbolic_link_as_last_npz_is_not_followed(lm_run, tmp_path, capsys):
    run = _copy(lm_run, tmp_path / "run")
    (run / "last.npz").rename(tmp_path / "elsewhere.npz")
    (run / "last.npz").symlink_to(tmp_path / "elsewhere.npz")
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run), "--epochs", "2"]) == 2
    assert "last.npz is a symbolic link: d2lrnn reads a run folder's own files" in capsys.readouterr().err


def test_translation_that_diverges_to_a_finite_loss_exits_2_keeping_the_best_model(tmp_path, monkeypatch,
                                                                                   capsys):
    """Issue 32, case 8: a loss of 7.5e10 (numpy, --lr 1e10) or 1e31 (MXNet, TensorFlow, --lr 1e30) exited 0
    and saved the model. Epoch 2's loss is made 1e31 here, as those runs' was: the run stops in one line,
    model.npz keeps epoch 1."""
    real = loop.run_epoch

    def blows_up(net, batches, step, task, guard, epoch=1, on_batch=None):
        value, speed = real(net, batches, step, task, guard, epoch, on_batch)
        return (1e31 if epoch == 2 else value), speed

    monkeypatch.setattr(loop, "run_epoch", blows_up)
    run = tmp_path / "run"
    assert cli.main(["translate-train", *PAIRS, "--epochs", "3", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == ("d2lrnn: error: training loss 1e+31 per token in epoch 2 is above log(2 x the target "
                   "vocabulary size 91) = 5.2 (a uniform guess scores log 91 = 4.51): the run diverged; "
                   "lower the learning rate (--lr) or clip gradients harder (--clip); the best model of this "
                   f"run (epoch 1, validation BLEU-4 0.000) is in {run / 'model.npz'}\n")
    assert seq2seq_checkpoint_info(run / "model.npz")["history"]["epoch"] == [1]
    assert seq2seq_checkpoint_info(run / "last.npz")["history"]["epoch"] == [1]


def test_translation_at_a_huge_learning_rate_is_caught_on_every_backend(tmp_path, capsys):
    assert cli.main(["translate-train", *PAIRS, "--lr", "1e30", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "the run diverged" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()  # no epoch finished: nothing saved, the empty folder removed
