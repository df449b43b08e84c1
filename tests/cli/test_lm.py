"""The ``d2lrnn`` command: a tiny training run end to end, generation, and one-line argument errors."""

import csv
import inspect
import json
import math
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from d2lrnn import cli, ops
from d2lrnn.lm.checkpoint import corpus_digest
from tests.conftest import HANG_GUARD_SECONDS

ROOT = pathlib.Path(d2l.__file__).resolve().parents[1]
# The tiny runs: 2,000 characters (1,800 to train on: 28 minibatches of 8 x 8 per epoch).
BATCH, STEPS, TOKENS = 8, 8, 2000
TINY = ["--hidden", "16", "--epochs", "2", "--max-tokens", str(TOKENS), "--batch-size", str(BATCH),
        "--num-steps", str(STEPS), "--no-progress"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_FILES = [".lock", "last.npz", "metrics.csv", "model.npz", "perplexity.png"]


def _run(*args):
    """``python -m d2lrnn ARGS`` in a fresh interpreter, importing the d2lrnn under test."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "d2lrnn", *args], capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD_SECONDS)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real ``d2lrnn train`` run in a subprocess, shared by the tests that read its output."""
    out = tmp_path_factory.mktemp("run")
    result = _run("train", *TINY, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return result, out


def _baselines():
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)
    return d2l.ngram_perplexities(train_iter.corpus, val_iter.corpus, len(vocab))


def test_train_writes_a_checkpoint_a_metrics_csv_and_a_plot(tiny_run, backend):
    _, out = tiny_run
    net, vocab, info = d2l.load_checkpoint(out / "model.npz")
    assert (net.kind, net.num_hiddens, len(vocab), info["backend"]) == ("scratch", 16, 28, backend)
    assert info["hparams"]["epochs"] == 2 and info["hparams"]["prefixes"] == ["time traveller", "traveller"]
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds"]
    assert [int(r[0]) for r in rows[1:]] == [1, 2]
    for key, column in (("train_ppl", 1), ("val_ppl", 2)):
        assert [float(r[column]) for r in rows[1:]] == info["history"][key]
    assert (out / "perplexity.png").read_bytes()[:8] == PNG_MAGIC
    assert sorted(os.listdir(out)) == RUN_FILES  # no temporary files


def test_train_prints_the_setup_the_table_against_the_baselines_and_samples(tiny_run, backend):
    result, out = tiny_run
    lines = result.stdout.splitlines()
    assert lines[0] == (f"corpus timemachine: 1,800 training / 200 validation characters, vocabulary 28 | "
                        f"backend {backend} | RNN (scratch), 16 hidden units | SGD lr 1 | batch 8 x 8 steps, "
                        "2 epochs, sequential sampling")
    history = d2l.load_checkpoint(out / "model.npz")[2]["history"]
    train_ppl, val_ppl = history["train_ppl"][-1], history["val_ppl"][-1]
    table = {line.rsplit(None, 2)[0]: line.split()[-2:] for line in lines
             if line.startswith(("RNN (", "1-gram", "2-gram", "3-gram", "5-gram"))}
    baselines = _baselines()
    assert table == {"RNN (scratch)": [f"{train_ppl:.2f}", f"{val_ppl:.2f}"],
                     **{f"{n}-gram (add-k)": ["-", f"{ppl:.2f}"] for n, ppl in baselines.items()}}
    verdict = "beats" if val_ppl < baselines[3] else "does not beat"
    assert any(line.startswith(f"the RNN {verdict} the trigram") for line in lines)
    # Two samples, one per Time Machine prefix, each the prefix and 100 generated characters; what
    # the characters are is the model's business (checked against a reference in test_reference.py).
    samples = [line[2:] for line in lines if line.startswith("  ")]
    assert [s.startswith(p) for s, p in zip(samples, ("time traveller", "traveller"))] == [True, True]
    assert [len(s) for s in samples] == [len("time traveller") + 100, len("traveller") + 100]
    assert f"checkpoint  {out / 'model.npz'}" in lines and f"metrics     {out / 'metrics.csv'}" in lines
    assert any(line.startswith("wall time ") for line in lines)


def test_device_cpu_trains_the_same_run_as_the_frameworks_own_placement(tiny_run, tmp_path, capsys):
    # --device cpu puts the model, every minibatch and the generation on the CPU device by name: the
    # same numbers as the run that left placement to the framework (on the CPU here)
    out = tmp_path / "run"
    assert cli.main(["train", *TINY, "--device", "cpu", "--out", str(out)]) == 0
    assert cli.main(["generate", "--checkpoint", str(out), "--num-chars", "12", "--device", "cpu"]) == 0

    def figures(folder):
        with open(folder / "metrics.csv") as f:
            return [(row["train_ppl"], row["val_ppl"]) for row in csv.DictReader(f)]

    assert figures(out) == figures(tiny_run[1])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("time traveller")


def test_generate_continues_the_prefix_from_the_checkpoint(tiny_run):
    _, out = tiny_run
    result = _run("generate", "--checkpoint", str(out / "model.npz"), "--prefix", "the time", "--num-chars",
                  "30")
    assert result.returncode == 0, result.stderr
    net, vocab, _ = d2l.load_checkpoint(out / "model.npz")
    assert result.stdout == d2l.predict_ch8("the time", 30, net, vocab) + "\n"
    assert result.stdout.startswith("the time") and len(result.stdout) == len("the time") + 30 + 1


def test_generate_samples_reproducibly_with_a_seed(tiny_run, capsys):
    _, out = tiny_run
    args = ["generate", "--checkpoint", str(out / "model.npz"), "--num-chars", "25", "--temperature", "1.5"]
    texts = []
    for seed in ("1", "1", "2"):
        assert cli.main([*args, "--seed", seed]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] != texts[2]
    assert all(t.startswith("time traveller") and len(t) == len("time traveller") + 25 + 1 for t in texts)


def test_concise_model_random_sampling_and_the_default_output_folder(tmp_path, monkeypatch, backend, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", *TINY, "--model", "concise", "--sampling", "random", "--epochs", "1"]) == 0
    out = tmp_path / "runs" / f"timemachine-{backend}-concise-1"
    assert sorted(os.listdir(out)) == RUN_FILES
    net, _, info = d2l.load_checkpoint(out / "model.npz")
    assert net.kind == "concise" and info["hparams"]["sampling"] == "random"
    assert "RNN (concise)" in capsys.readouterr().out


@pytest.mark.parametrize("cell, layers, folder",
                         [("gru", "2", "scratch-gru-l2"), ("lstm", "1", "concise-lstm")])
def test_every_cell_trains_saves_resumes_and_generates(cell, layers, folder, tmp_path, monkeypatch, backend,
                                                       capsys):
    monkeypatch.chdir(tmp_path)
    model = folder.split("-")[0]
    dropout = ["--dropout", "0.2"] if layers != "1" else []
    args = ["train", *TINY, "--epochs", "1", "--cell", cell, "--num-layers", layers, *dropout,
            "--model", model]
    assert cli.main(args) == 0
    out = tmp_path / "runs" / f"timemachine-{backend}-{folder}-1"
    assert sorted(os.listdir(out)) == RUN_FILES
    printed = capsys.readouterr().out
    name = f"{layers}-layer {cell.upper()}" if layers != "1" else cell.upper()
    between = "between layers 0.2, " if dropout else ""
    assert f"| {name} ({model}), 16 hidden units, dropout {between}input 0.1, output 0.3 |" in printed
    assert f"\n{name} ({model}) " in printed and f"the {name} " in printed  # the table's row and verdict
    net, vocab, info = d2l.load_checkpoint(out / "model.npz")
    assert info["cell"] == cell and info["num_layers"] == int(layers) and net.kind == model
    assert info["dropout"] == (0.2 if dropout else 0.0) and info["hparams"]["cell"] == cell
    assert net.named_params().keys() == d2l.make_model(model, len(vocab), 16, cell=cell,
                                                       num_layers=int(layers)).named_params().keys()
    # the run's settings come back on --resume; another cell is refused
    assert cli.main(["train", "--resume", str(out), "--epochs", "2", "--cell", "rnn"]) == 2
    assert f"drop --cell (the run used {cell})" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(out), "--epochs", "2", "--no-progress"]) == 0
    assert d2l.checkpoint_info(out / "last.npz")["history"]["epoch"] == [1, 2]
    capsys.readouterr()
    assert cli.main(["generate", "--checkpoint", str(out), "--num-chars", "12"]) == 0
    net, vocab, _ = d2l.load_checkpoint(out / "model.npz")
    assert capsys.readouterr().out == d2l.predict_ch8("time traveller", 12, net, vocab) + "\n"


def test_a_run_saved_before_cells_resumes_as_the_plain_rnn(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(run)]) == 0
    capsys.readouterr()
    with np.load(run / "last.npz") as data:  # the settings as an older d2lrnn saved them
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    for key in ("cell", "num_layers", "dropout", "init"):
        del meta["hparams"][key]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(run / "last.npz", **arrays)
    assert cli.main(["train", "--resume", str(run), "--epochs", "2", "--no-progress"]) == 0
    info = d2l.checkpoint_info(run / "last.npz")
    assert info["hparams"]["cell"] == "rnn" and info["hparams"]["num_layers"] == 1 and info["cell"] == "rnn"
    assert info["hparams"]["init"] == "normal"  # what every run used before --init


def test_init_uniform_starts_from_the_frameworks_weights_and_is_recorded(tmp_path, monkeypatch, capsys):
    from d2lrnn.lm import model as lm

    started = []
    original = lm._LayerModel.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        started.append({name: ops.to_numpy(p) for name, p in zip(self.param_names, self.params)})

    monkeypatch.setattr(lm._LayerModel, "__init__", spy)
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--epochs", "1", "--cell", "gru", "--init", "uniform", "--hidden", "16",
                     "--out", str(run)]) == 0
    capsys.readouterr()
    W_xz, W_hz, b_z = (started[0][name] for name in ("W_xz", "W_hz", "b_z"))
    assert 1.0 < np.abs(W_xz).max() <= 3 ** 0.5  # rows picked by characters: unit variance
    assert 0.125 < np.abs(W_hz).max() <= 0.25 and np.abs(b_z).max() <= 0.25  # 1 / sqrt(16)
    assert d2l.checkpoint_info(run / "last.npz")["hparams"]["init"] == "uniform"
    assert cli.main(["train", *TINY, "--init", "xavier", "--out", str(tmp_path / "bad")]) == 2
    assert "argument --init: invalid choice: 'xavier'" in capsys.readouterr().err


@pytest.mark.once
def test_the_corpus_fingerprint_hashes_the_stored_bytes():
    import hashlib

    train_iter, val_iter, _ = d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)
    assert train_iter.corpus.dtype == np.uint8
    stored = b"|u1:" + train_iter.corpus.tobytes() + val_iter.corpus.tobytes()
    assert corpus_digest(train_iter, val_iter, chunk=1000) == hashlib.sha1(stored).hexdigest()
    assert corpus_digest(train_iter, val_iter) == hashlib.sha1(stored).hexdigest()


@pytest.mark.once
def test_a_run_with_another_fingerprint_of_the_text_is_refused(tmp_path, capsys):
    # e.g. the SHA-1 of the indices as int64 that runs saved before the compact stream hold (those runs are
    # also from before the validation cut, refused for that first)
    import hashlib

    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(run)]) == 0
    capsys.readouterr()
    with np.load(run / "last.npz") as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    train_iter, val_iter, _ = d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)
    as_int64 = b"".join(split.corpus.astype(np.int64).tobytes() for split in (train_iter, val_iter))
    meta["hparams"]["corpus_sha1"] = hashlib.sha1(as_int64).hexdigest()
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(run / "last.npz", **arrays)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"}
    assert cli.main(["train", "--resume", str(run), "--epochs", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"d2lrnn: error: the corpus timemachine is not the text the run in {run} was trained on (it changed "
        "since): resume needs the same text; start a new run instead\n")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"} == before


@pytest.mark.once
def test_help_is_readable(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "train" in text and "generate" in text and "d2lrnn COMMAND --help" in text
    assert cli.main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--hidden N", "(default: 512; --cell gru/lstm: 256)", "--corpus NAME|PATH",
                   "(default: timemachine)", "--out DIR", "(default: 30; --cell gru/lstm: 40)",
                   "(default: sequential)", "(default: sgd; --cell gru/lstm: adam)",
                   "(default: 1.0; --cell gru: 0.02; --cell lstm: 0.04)"):
        assert option in " ".join(text.split())  # as printed, without the line wrapping


def _missing_framework(monkeypatch):
    """A backend other than the active one whose framework import now fails, as if not installed."""
    name = next(b for b in ("torch", "tensorflow", "mxnet")
                if b != d2l.backend_name() and f"d2lrnn.backends.{b}" not in sys.modules)
    monkeypatch.setitem(sys.modules, name, None)
    return name


BAD_ARGUMENTS = [
    (["train", "--hidden", "-5"], "argument --hidden: must be at least 1, got -5"),
    (["train", "--hidden", "0"], "argument --hidden: must be at least 1, got 0"),
    (["train", "--batch-size", "0"], "argument --batch-size: must be at least 1"),
    (["train", "--num-steps", "-1"], "argument --num-steps: must be at least 1"),
    (["train", "--epochs", "0"], "argument --epochs: must be at least 1"),
    (["train", "--epochs", "two"], "argument --epochs: expected a whole number, got 'two'"),
    (["train", "--lr", "0"], "argument --lr: must be a number above 0"),
    (["train", "--lr", "-1"], "argument --lr: must be a number above 0"),
    (["train", "--clip", "0"], "argument --clip: must be a number above 0"),
    (["train", "--val-fraction", "1"], "argument --val-fraction: must be between 0 and 1"),
    (["train", "--max-tokens", "0"], "argument --max-tokens: must be -1 (the whole corpus) or at least 1"),
    (["train", "--corpus", "nosuch"], "unknown corpus 'nosuch': choose one of timemachine"),
    (["train", "--corpus", "{tmp}/no/such.txt"], "no/such.txt' does not exist"),
    (["train", "--backend", "nosuch"], "argument --backend: unknown backend 'nosuch': choose one of"),
    (["train", "--backend", "{missing}"], "needs the package '{missing}'"),
    (["train", *TINY, "--out", "{tmp}/a-file"], "cannot create the output folder"),
    (["train", "--max-tokens", "100"], "fewer than batch_size * num_steps + 1"),
    (["generate", "--checkpoint", "{tmp}/missing.npz"], "missing.npz does not exist"),
    (["generate", "--checkpoint", "{tmp}/a-file"], "a-file is not a d2lrnn checkpoint"),
    (["generate", "--checkpoint", "{tmp}/torn.npz"], "torn.npz is truncated or corrupt"),
    (["generate", "--checkpoint", "{tmp}/torn.npz", "--num-chars", "0"], "argument --num-chars: must be at"),
    (["generate", "--checkpoint", "{tmp}/torn.npz", "--temperature", "-1"], "argument --temperature"),
    (["generate", "--checkpoint", "{tmp}/torn.npz", "--backend", "{missing}"], "needs the package"),
    (["generate"], "the following arguments are required: --checkpoint"),
    (["train", "--seed", "-1"], "argument --seed: must be 0 or more, got -1"),
    (["generate", "--checkpoint", "{tmp}/torn.npz", "--seed", "-1"], "argument --seed: must be 0 or more"),
    (["train", "--out", ""], "argument --out: is empty: give a folder name"),
    (["train", "--resume", " "], "argument --resume: is empty: give a folder name"),
    (["train", "--resume", "{tmp}/nowhere"], "--resume {tmp}/nowhere: no such run folder"),
    (["train", "--resume", "{tmp}"], "holds no state to resume from (no last.npz)"),
    (["train", "--resume", "{tmp}", "--out", "{tmp}"], "argument --out: not allowed with argument --resume"),
    (["train", "--resume", "{tmp}", "--overwrite"], "--resume continues a run and --overwrite replaces one"),
    (["train", "--corpus", "a\nb.txt"], "corpus file 'a\\nb.txt' does not exist"),
    (["train", "--nosuch\nflag"], "unrecognized arguments: --nosuch\\nflag"),
    (["generate", "--checkpoint", "/dev/zero"], "/dev/zero is not a regular file"),
    (["generate", "--checkpoint", "{tmp}/nan.npz"], "holds 1 NaN or infinite values in W_hh"),
    (["generate", "--checkpoint", "{tmp}/nan.npz", "--prefix", ""], "--prefix is empty: give some text"),
    ([], "the following arguments are required: COMMAND"),
    (["train", "--cell", "transformer"], "argument --cell: invalid choice: 'transformer' (choose from 'rnn', "
                                         "'gru', 'lstm')"),
    (["train", "--num-layers", "0"], "argument --num-layers: must be at least 1, got 0"),
    (["train", "--dropout", "1"], "argument --dropout: must be at least 0 and below 1 (e.g. 0.2), got 1"),
    (["train", "--dropout", "-0.1"], "argument --dropout: must be at least 0 and below 1"),
    (["train", "--dropout", "0.2"], "--dropout 0.2 acts between recurrent layers, and one layer has none: "
                                    "add --num-layers 2"),
    (["train", "--bidirectional"], "--bidirectional: a bidirectional model reads each sequence from both "
                                   "ends"),
    (["train", "--weight-drop", "1"], "argument --weight-drop: must be at least 0 and below 1 (e.g. 0.2), "
                                      "got 1"),
    (["train", "--ema", "1"], "argument --ema: must be at least 0 (none) and below 1 (e.g. 0.999), got 1"),
    (["train", "--ema", "-0.5"], "argument --ema: must be at least 0 (none) and below 1"),
    (["train", "--locked-dropout"], "--locked-dropout locks the masks of --input-dropout, --dropout and "
                                    "--output-dropout, and all three are 0"),
    (["train", "--locked-dropout", "--model", "concise", "--num-layers", "2", "--dropout", "0.2"],
     "--locked-dropout with --dropout needs --model scratch"),
    # the test machines have no GPU: --device gpu is refused before anything is written
    (["train", "--device", "gpu"], "--device gpu: numpy sees no GPU here: leave --device out (or give "
                                   "--device cpu) to run on the CPU"),
    (["generate", "--checkpoint", "{tmp}/nan.npz", "--device", "gpu"], "--device gpu: numpy sees no GPU"),
    (["translate", "go .", "--checkpoint", "{tmp}/nan.npz", "--device", "gpu"], "--device gpu: numpy sees"),
    (["train", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["train", "--precision", "bfloat16"],
     "precision 'bfloat16' needs automatic mixed precision, which d2lrnn has on the torch backend only, not "
     "on numpy: use --backend torch"),
    (["train", "--precision", "half"], "argument --precision: invalid choice: 'half'"),
    (["train", "--preset", "fastest"], "argument --preset: invalid choice: 'fastest' (choose from "
                                       "'timemachine-5min', 'tinyshakespeare-10min', "
                                       "'tinyshakespeare-bf16', 'tinyshakespeare-bf16-5min', "
                                       "'tinyshakespeare-bf16-10min')"),
    (["train", "--preset", "timemachine-5min", "--resume", "{tmp}"],
     "--resume continues the run with its own settings: drop --preset timemachine-5min"),
]


def _nan_checkpoint(path):
    vocab = d2l.Vocab(list("abc"))
    d2l.save_checkpoint(path, d2l.RNNModelScratch(len(vocab), 4), vocab)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["W_hh"][1, 2] = np.nan
    np.savez(path, **arrays)


@pytest.mark.once
@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS)
def test_bad_arguments_are_one_line_errors_with_exit_code_2(argv, message, tmp_path, monkeypatch, capsys,
                                                            backend):
    monkeypatch.chdir(tmp_path)  # where a default output folder would go
    (tmp_path / "a-file").write_text("not a folder, not a checkpoint")
    (tmp_path / "torn.npz").write_bytes(b"PK\x03\x04\x14\x00\x00\x00")
    _nan_checkpoint(tmp_path / "nan.npz")
    fill = {"tmp": str(tmp_path), "missing": _missing_framework(monkeypatch)}
    assert cli.main([a.format(**fill) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("d2lrnn")
    assert message.format(**fill) in captured.err
    assert d2l.backend_name() == backend
    assert sorted(os.listdir(tmp_path)) == ["a-file", "nan.npz", "torn.npz"]  # nothing written


def test_divergence_exits_2_with_one_line_and_no_warning_before_it(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning printed before the error line would fail here
        code = cli.main(["train", *TINY, "--lr", "1e38", "--clip", "1e38", "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("d2lrnn: error: loss became inf at epoch 1, step 2: the run diverged; lower the "
                          "learning rate (--lr)")
    assert err.endswith("; no epoch finished, so nothing was saved\n")
    assert not (tmp_path / "run").exists()


def _switch_to_a_huge_learning_rate_after(monkeypatch, num_steps):
    """From step ``num_steps + 1`` on, train with lr 1e300, as a schedule gone wrong would: a real
    overflow of the update, nothing injected."""
    real = cli.lm._updater

    def updater(*args):
        made = real(*args)
        made.schedule = lambda t: 1.0 if t <= num_steps else 1e300
        return made

    monkeypatch.setattr(cli.lm, "_updater", updater)


def _epoch_batches():
    return len(d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)[0])


def test_a_diverged_run_exits_2_with_the_best_model_of_the_run_on_disk(tmp_path, monkeypatch, capsys):
    _switch_to_a_huge_learning_rate_after(monkeypatch, 2 * _epoch_batches())  # epochs 1-2 train normally
    out = tmp_path / "run"
    assert cli.main(["train", *TINY, "--epochs", "4", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    net, _, info = d2l.load_checkpoint(out / "model.npz")
    best = min((v, e) for e, v in zip(info["history"]["epoch"], info["history"]["val_ppl"]))
    loss = err.split("(loss ")[1].split(")")[0]
    assert err == (f"d2lrnn: error: the update at epoch 3, step 1 made parameters NaN or inf (loss {loss}): "
                   "the run diverged; lower the learning rate (--lr) or clip gradients harder (--clip); the "
                   f"best model of this run (epoch {best[1]}, validation perplexity {best[0]:.2f}) is in "
                   f"{out / 'model.npz'}\n")
    assert info["history"]["epoch"][-1] == best[1]
    assert all(np.isfinite(d2l.to_numpy(p)).all() for p in net.params)
    assert d2l.checkpoint_info(out / "last.npz")["resume"]["epoch"] == 2
    assert len((out / "metrics.csv").read_text().splitlines()) == 3  # a header and epochs 1-2


def test_a_diverging_run_cannot_replace_a_good_model(tmp_path, capsys):
    out = str(tmp_path / "D")
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", out]) == 0
    before = {name: (tmp_path / "D" / name).read_bytes() for name in RUN_FILES[1:]}
    capsys.readouterr()
    assert cli.main(["train", *TINY, "--epochs", "1", "--lr", "1e6", "--out", out]) == 2
    assert "holds another run's checkpoint (model.npz, last.npz): pass --overwrite" in capsys.readouterr().err
    assert cli.main(["train", *TINY, "--epochs", "1", "--lr", "1e6", "--out", out, "--overwrite"]) == 2
    assert capsys.readouterr().err.endswith("no epoch finished, so nothing was saved\n")
    assert {name: (tmp_path / "D" / name).read_bytes() for name in RUN_FILES[1:]} == before


def test_every_epoch_leaves_the_best_model_so_far_and_the_state_to_resume_from(tmp_path, monkeypatch):
    seen = []
    real_call = cli.saving.RunSaver.__call__

    def call_and_look(self, epoch, net, history):
        real_call(self, epoch, net, history)
        best = min(range(epoch), key=lambda i: (history["val_ppl"][i], i))
        seen.append((epoch, best + 1, d2l.checkpoint_info(tmp_path / "model.npz")["history"]["epoch"][-1],
                     d2l.checkpoint_info(tmp_path / "last.npz")["resume"]["epoch"],
                     len((tmp_path / "metrics.csv").read_text().splitlines()) - 1))

    monkeypatch.setattr(cli.saving.RunSaver, "__call__", call_and_look)
    assert cli.main(["train", *TINY, "--epochs", "3", "--out", str(tmp_path)]) == 0
    assert [s[0] for s in seen] == [1, 2, 3]
    for epoch, best, in_model, in_last, rows in seen:
        assert (in_model, in_last, rows) == (best, epoch, epoch)


def _interrupt_at(monkeypatch, epoch, step):
    """Ctrl-C in the middle of a run: at ``step`` of ``epoch``."""
    from d2lrnn.training import loop

    real = loop.run_epoch
    signature = inspect.signature(real)

    def run_epoch(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        if arguments["epoch"] == epoch:
            def on_batch(n, count=[0]):  # noqa: B006 - a counter local to this epoch
                count[0] += 1
                if count[0] == step:
                    raise KeyboardInterrupt
            arguments["on_batch"] = on_batch
        return real(**arguments)

    monkeypatch.setattr(loop, "run_epoch", run_epoch)


def _arrays(path):
    with np.load(path) as data:
        return {name: data[name] for name in data.files if name != "meta"}


def test_an_interrupted_run_resumes_to_the_result_of_a_run_never_interrupted(tmp_path, monkeypatch, capsys):
    args = ["train", *TINY, "--epochs", "4", "--sampling", "random", "--seed", "3"]
    assert cli.main([*args, "--out", str(tmp_path / "whole")]) == 0
    with monkeypatch.context() as m:
        _interrupt_at(m, epoch=3, step=5)
        assert cli.main([*args, "--out", str(tmp_path / "cut")]) == 130
    cut = tmp_path / "cut"
    assert capsys.readouterr().err == (f"\nd2lrnn: interrupted; epochs 1-2 are saved in {cut}: continue "
                                       f"with: d2lrnn train --resume {cut}\n")
    assert cli.main(["train", "--resume", str(cut), "--no-progress"]) == 0
    assert "resuming after epoch 2 of 4" in capsys.readouterr().out
    for name in ("model.npz", "last.npz"):
        whole, resumed = _arrays(tmp_path / "whole" / name), _arrays(cut / name)
        for key in whole:  # bit for bit
            np.testing.assert_array_equal(resumed[key], whole[key], err_msg=f"{name} {key}")
        h1, h2 = (d2l.checkpoint_info(d / name)["history"] for d in (tmp_path / "whole", cut))
        assert (h1["epoch"], h1["train_ppl"], h1["val_ppl"]) == (h2["epoch"], h2["train_ppl"], h2["val_ppl"])


@pytest.mark.once
def test_resume_keeps_the_run_settings_and_can_add_epochs(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", run]) == 0
    capsys.readouterr()
    assert cli.main(["train", "--resume", run, "--hidden", "32"]) == 2
    assert capsys.readouterr().err == ("d2lrnn: error: --resume continues the run with its own settings: "
                                       "drop --hidden (the run used 16)\n")
    assert cli.main(["train", "--resume", run]) == 2
    assert "has already finished 1 of 1 epochs: pass --epochs N with N > 1" in capsys.readouterr().err
    assert cli.main(["train", "--resume", run, "--epochs", "2", "--hidden", "16", "--no-progress"]) == 0
    info = d2l.checkpoint_info(tmp_path / "run" / "last.npz")
    assert info["history"]["epoch"] == [1, 2] and info["hparams"]["epochs"] == 2
    assert info["hparams"]["hidden"] == 16 and info["resume"]["epoch"] == 2


@pytest.mark.once
def test_raw_trains_on_every_character_of_the_text_and_resumes_raw(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", *TINY, "--corpus", "tinyshakespeare", "--raw", "--epochs", "1", "--out", str(run)]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    _, _, vocab = d2l.load_data_lm("tinyshakespeare", BATCH, STEPS, False, TOKENS, 0.1, seed=0, raw=True)
    assert {"F", ":", "\n"} <= set(vocab.idx_to_token)  # upper case, punctuation, line breaks kept
    sizes = f"1,800 training / 200 validation characters, vocabulary {len(vocab)} "
    assert f"corpus tinyshakespeare (raw): {sizes}" in printed
    assert d2l.checkpoint_info(run / "last.npz")["hparams"]["raw"] is True
    net, saved_vocab, _ = d2l.load_checkpoint(run / "model.npz")
    assert saved_vocab.idx_to_token == vocab.idx_to_token and net.vocab_size == len(vocab)
    assert cli.main(["train", "--resume", str(run), "--epochs", "2", "--no-progress"]) == 0
    assert "corpus tinyshakespeare (raw)" in capsys.readouterr().out
    assert d2l.checkpoint_info(run / "last.npz")["history"]["epoch"] == [1, 2]


@pytest.mark.once
def test_resume_refuses_a_corpus_that_changed_and_a_damaged_resume_state(tmp_path, capsys):
    corpus = tmp_path / "data.txt"
    corpus.write_text("the time traveller said " * 200)
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--corpus", str(corpus), "--out", str(run)]) == 0
    corpus.write_text("the time traveller spoke " * 200)
    capsys.readouterr()
    # d2lrnn opens no file a checkpoint names (issue 32): the run's own corpus file is given again
    assert cli.main(["train", "--resume", str(run), "--epochs", "3"]) == 2
    assert capsys.readouterr().err == (f"d2lrnn: error: the run in {run} was trained on the file "
                                       f"'{corpus}': pass it again with --corpus PATH to resume (d2lrnn "
                                       "opens no file that a checkpoint names; the run checks it is the same "
                                       "text)\n")
    assert cli.main(["train", "--resume", str(run), "--epochs", "3", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert err == (f"d2lrnn: error: the corpus {corpus} is not the text the run in {run} was trained on (it "
                   "changed since): resume needs the same text; start a new run instead\n")
    corpus.write_text("the time traveller said " * 200)
    with np.load(run / "last.npz") as data:
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["resume"]["generator"] = {"bit_generator": "PCG64", "state": "broken"}
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(run / "last.npz", **arrays)
    assert cli.main(["train", "--resume", str(run), "--epochs", "3", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"d2lrnn: error: {run / 'last.npz'} holds a damaged resume state (")
    assert err.count("\n") == 1


@pytest.mark.once
def test_default_folders_are_fresh_per_run(tmp_path, monkeypatch, backend):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert cli.main(["train", *TINY, "--epochs", "1"]) == 0
    for name, text in (("a", "the time traveller " * 300), ("b", "a different text altogether " * 300)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data.txt").write_text(text)
        assert cli.main(["train", *TINY, "--epochs", "1", "--corpus", f"{name}/data.txt"]) == 0
    assert sorted(os.listdir(tmp_path / "runs")) == [
        f"data-{backend}-scratch-1", f"data-{backend}-scratch-2",
        f"timemachine-{backend}-scratch-1", f"timemachine-{backend}-scratch-2"]
    for n, name in ((1, "a"), (2, "b")):  # two files of one name: two runs, neither replaced
        run = tmp_path / "runs" / f"data-{backend}-scratch-{n}"
        hparams = d2l.checkpoint_info(run / "model.npz")["hparams"]
        assert hparams["corpus_path"] == str(tmp_path / name / "data.txt")


@pytest.mark.once
def test_a_second_run_into_a_busy_folder_is_refused_at_once(tmp_path, capsys):
    from d2lrnn.training.runs import open_run_folder

    with open_run_folder(tmp_path):
        assert cli.main(["train", *TINY, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"d2lrnn: error: another d2lrnn run (pid {os.getpid()}) is writing to {tmp_path}")


@pytest.mark.once
@pytest.mark.parametrize("failure", ["disk full", "a folder in the way"])
def test_a_write_error_is_one_line_exit_2_and_keeps_the_last_complete_set(failure, tmp_path, monkeypatch,
                                                                          capsys):
    real = cli.saving.metrics_csv_writer

    def metrics_csv_writer(history, fields):
        if len(history["epoch"]) < 2:
            return real(history, fields)
        if failure == "a folder in the way":  # someone makes a folder where the plot goes, mid-run
            (tmp_path / "perplexity.png").rename(tmp_path / "old.png")
            (tmp_path / "perplexity.png").mkdir()
            return real(history, fields)

        def disk_full(f):
            f.write("epoch,")
            raise OSError(28, "No space left on device")

        return disk_full

    monkeypatch.setattr(cli.saving, "metrics_csv_writer", metrics_csv_writer)
    assert cli.main(["train", *TINY, "--epochs", "3", "--out", str(tmp_path)]) == 2
    name, why = {"disk full": ("metrics.csv", "No space left on device"),
                 "a folder in the way": ("perplexity.png", "a folder is in the way")}[failure]
    assert capsys.readouterr().err == (f"d2lrnn: error: cannot write {name} in {tmp_path}: {why}: free some "
                                       "space or fix the folder, or choose another --out; the files written "
                                       "before are kept\n")
    expected = RUN_FILES if failure == "disk full" else sorted([*RUN_FILES, "old.png"])
    assert sorted(os.listdir(tmp_path)) == expected  # no temporary file
    epochs = [d2l.checkpoint_info(tmp_path / name)["history"]["epoch"] for name in ("model.npz", "last.npz")]
    assert epochs == [[1], [1]] and len((tmp_path / "metrics.csv").read_text().splitlines()) == 2


@pytest.mark.once
@pytest.mark.parametrize("how", ["folder in the way", "not writable"])
def test_an_unusable_output_folder_is_refused_before_training(how, tmp_path, monkeypatch, capsys):
    if how == "folder in the way":
        (tmp_path / "perplexity.png").mkdir()
        message = "perplexity.png is a folder, in the way of the run's perplexity.png"
    else:  # root ignores permission bits: the refusal is injected where the folder is first written
        def refused(*args, **kwargs):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr("d2lrnn.training.runs._open_lock_file", refused)
        message = "cannot write in the output folder"
    monkeypatch.setattr(cli.lm, "train_lm", lambda *a, **k: pytest.fail("training started"))
    assert cli.main(["train", *TINY, "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1


@pytest.mark.once
def test_huge_perplexities_are_printed_compactly():
    table = cli.lm.perplexity_table("scratch", 1.5e84, math.inf, {1: 17.0, 2: 10.0, 3: 6.9, 5: 5.2})
    assert "RNN (scratch)      1.5e+84         inf" in table
    assert table.endswith("(inf >= 6.90)\nand does not beat the best n-gram, the 5-gram (inf >= 5.20)")
    baselines = {1: 430.9, 2: 251.1, 3: 987.2, 5: 2384.3}
    table = cli.lm.perplexity_table("scratch", 300.0, 240.0, baselines, "LSTM")
    assert table.endswith("(240.00 < 987.20)\nand beats the best n-gram, the 2-gram (240.00 < 251.10)")
    trigram_best = cli.lm.perplexity_table("scratch", 5.0, 6.0, {1: 17.0, 2: 10.0, 3: 6.9, 5: 7.0})
    assert trigram_best.endswith("(6.00 < 6.90)")
    assert cli.lm._best_ngram_note({1: 9.0, 2: 8.0, 3: 7.0, 5: 5.0}) == "; the best is the 5-gram's 5.00"


def test_generate_takes_a_run_folder(tiny_run, capsys):
    _, out = tiny_run
    assert cli.main(["generate", "--checkpoint", str(out), "--num-chars", "10"]) == 0
    net, vocab, _ = d2l.load_checkpoint(out / "model.npz")
    assert capsys.readouterr().out == d2l.predict_ch8("time traveller", 10, net, vocab) + "\n"


@pytest.mark.once
def test_ctrl_c_exits_130_without_a_traceback(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.lm, "train_lm", interrupted)
    assert cli.main(["train", *TINY, "--out", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "d2lrnn: interrupted before the first epoch finished; nothing was saved"
    assert not (tmp_path / "run").exists()  # the folder this run made holds nothing: it is removed


@pytest.mark.once
def test_sample_prefixes_of_other_corpora_come_from_the_validation_text():
    _, val_iter, vocab = d2l.load_data_lm("tinyshakespeare", 4, 8, False, 20000, 0.1)
    text = "".join(vocab.to_tokens(list(val_iter.corpus)))
    first, middle = cli.lm.sample_prefixes("tinyshakespeare", vocab, val_iter.corpus)
    assert 0 < len(first) <= 10 and 0 < len(middle) <= 10
    assert text.index(first) == text.index(" ") + 1
    assert any(text[i - 1] == " " and text[i:i + 10].strip() == middle and abs(i - len(text) // 2) < 40
               for i in range(1, len(text)))
    assert cli.lm.sample_prefixes("timemachine", vocab, val_iter.corpus) == ("time traveller", "traveller")



@pytest.mark.once
def test_baselines_of_a_large_text_are_fitted_on_a_sample_and_the_output_says_so(tmp_path, capsys,
                                                                                 monkeypatch):
    from d2lrnn.data import ngram

    monkeypatch.setattr(ngram, "BASELINE_FIT_TOKENS", 1000)
    monkeypatch.setattr(ngram, "BASELINE_SCORE_TOKENS", 150)
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert ("a sample of the large text: fitted on the first 1,000 of 1,800 training tokens, scored on the "
            "first 150 of 200 validation tokens") in out
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)
    expected = d2l.ngram_perplexities(train_iter.corpus[:1000], val_iter.corpus[:150], len(vocab))
    info = d2l.checkpoint_info(tmp_path / "run" / "last.npz")
    assert info["hparams"]["ngram_val_ppl"] == {str(n): ppl for n, ppl in expected.items()}


def test_gru_and_lstm_train_with_adam_by_default_say_so_and_keep_its_state(tmp_path, capsys):
    """--cell lstm takes its own defaults (Adam, warm-up, cosine decay, dropout, early stopping) where
    the command line gives none, prints them with the book's alternative, and saves Adam's state."""
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--cell", "lstm", "--out", str(run)]) == 0
    printed = capsys.readouterr().out
    steps = len(d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)[0])
    warmup = min(100, 2 * steps // 10)  # capped at a tenth of this short run
    assert (f"| Adam lr 0.04, {warmup} warm-up steps, cosine decay | batch 8 x 8 steps, 2 epochs, "
            "early stop after 3 epochs without improvement, sequential sampling") in printed
    assert (f"defaults for --cell lstm: --input-dropout 0.1, --output-dropout 0.3, --optimizer adam, "
            f"--lr 0.04, --schedule cosine, --warmup {warmup}, --patience 3 (the book's training: "
            "--optimizer sgd --lr 1 --schedule constant --warmup 0)") in printed
    info = d2l.checkpoint_info(run / "last.npz")
    assert {k: info["hparams"][k] for k in ("optimizer", "lr", "schedule", "warmup", "patience")} == \
        {"optimizer": "adam", "lr": 0.04, "schedule": "cosine", "warmup": warmup, "patience": 3}
    assert (info["input_dropout"], info["output_dropout"]) == (0.1, 0.3)
    saved = d2lrnn.training.checkpoint.load_optimizer_state(run / "last.npz")
    net, _, _ = d2l.load_checkpoint(run / "last.npz")
    assert saved["optimizer"] == "adam" and saved["t"] == 2 * steps
    assert [a.shape for a in saved["arrays"]] == [tuple(ops.shape(p)) for p in net.params] * 2
    assert np.abs(saved["arrays"][0]).max() > 0  # the first moment of W_xi moved
    # the best model holds weights only
    assert d2lrnn.training.checkpoint.load_optimizer_state(run / "model.npz") is None
    # given values win over the cell's defaults, and the RNN keeps the book's
    assert cli.main(["train", *TINY, "--epochs", "1", "--cell", "gru", "--optimizer", "sgd", "--lr", "1",
                     "--out", str(tmp_path / "sgd")]) == 0
    assert f"| SGD lr 1, {steps // 10} warm-up steps, cosine decay |" in capsys.readouterr().out
    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(tmp_path / "rnn")]) == 0
    printed = capsys.readouterr().out
    assert "| SGD lr 1 | batch 8 x 8 steps, 1 epoch, sequential sampling" in printed
    assert "defaults for" not in printed


@pytest.mark.once
def test_a_preset_fills_the_settings_not_given_and_says_so(tmp_path, capsys):
    """--preset NAME takes the recipe's settings where the command line gives none (given ones win), then
    the cell's defaults fill the rest; the run saves the settings themselves and prints which came from
    where."""
    preset = cli.lm.PRESETS["timemachine-5min"]["settings"]
    run = tmp_path / "run"
    assert cli.main(["train", *TINY, "--preset", "timemachine-5min", "--out", str(run)]) == 0
    printed = capsys.readouterr().out
    given = {"hidden": 16, "epochs": 2, "max_tokens": TOKENS, "batch_size": BATCH, "num_steps": STEPS}
    hparams = d2l.checkpoint_info(run / "last.npz")["hparams"]
    assert {k: hparams[k] for k in preset} == {**preset, **{k: v for k, v in given.items() if k in preset}}
    steps = len(d2l.load_data_lm("timemachine", BATCH, STEPS, False, TOKENS, 0.1, seed=0)[0])
    warmup = min(100, 2 * steps // 10)  # the cell's default, capped at a tenth of this short run
    assert {k: hparams[k] for k in ("optimizer", "schedule", "warmup")} == \
        {"optimizer": "adam", "schedule": "cosine", "warmup": warmup}
    assert ("--preset timemachine-5min: --corpus timemachine, --model concise, --cell lstm, --input-dropout "
            "0.1, --output-dropout 0.3, --weight-drop 0.15, --ema 0.998, --init uniform, --lr 0.03, "
            "--patience 0\ndefaults for --cell lstm: --optimizer adam, --schedule cosine, "
            f"--warmup {warmup} (the book's training:") in printed
    assert "| LSTM (concise), 16 hidden units" in printed


@pytest.mark.parametrize("name, marker, count", [
    ("tinyshakespeare-10min", "Reproduce the `d2lrnn train` row without the benchmark", 16),
    ("tinyshakespeare-bf16", "Reproduce the bfloat16 row without the benchmark", 17),
    ("tinyshakespeare-bf16-5min", "Reproduce the 5-minute row without the benchmark", 17),
    ("tinyshakespeare-bf16-10min", "Reproduce the 10-minute row without the benchmark", 19)])
def test_the_tiny_shakespeare_presets_are_the_commands_the_benchmark_measured(name, marker, count, tmp_path,
                                                                              capsys, backend):
    """--preset NAME runs the settings of the command bench/RESULTS.md gives for its `d2lrnn train` row on
    Tiny Shakespeare (the measurement the preset's help quotes); bfloat16's on torch, refused elsewhere."""
    results = (pathlib.Path(__file__).parents[2] / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    block = results.split(marker)[1].split("<!--")[0].split("\n\n")[1]
    command = block.replace("\\\n", " ").split("d2lrnn train", 1)[1].split()
    parsed = vars(cli.build_parser().parse_args(["train", *command]))
    measured = {key: parsed[key] for key in cli.lm.TRAIN_DEFAULTS if parsed[key] is not None}
    assert parsed["backend"] == "torch" and len(measured) == count
    run = tmp_path / "run"
    status = cli.main(["train", "--preset", name, "--max-tokens", "20000", "--hidden", "16", "--epochs", "1",
                       "--warmup", "2", "--no-progress", "--out", str(run)])
    if measured.get("precision") == "bfloat16" and backend != "torch":
        assert status == 2 and "use --backend torch" in capsys.readouterr().err
        return
    assert status == 0
    hparams = d2l.checkpoint_info(run / "last.npz")["hparams"]
    given = {"hidden": 16, "epochs": 1, "warmup": 2}  # the command line wins over the preset
    assert {key: hparams[key] for key in measured} == {**measured, **given}
    preset = cli.lm.PRESETS[name]["settings"]  # optimizer, schedule: the LSTM's defaults
    assert {key: preset.get(key, hparams[key]) for key in measured} == measured


def test_bfloat16_products_train_and_resume_on_torch_and_are_refused_elsewhere(tmp_path, capsys, backend):
    run = tmp_path / "run"
    status = cli.main(["train", *TINY, "--cell", "lstm", "--model", "concise", "--precision", "bfloat16",
                       "--out", str(run)])
    if backend != "torch":
        assert status == 2 and not run.exists()
        assert f"not on {backend}: use --backend torch, or leave --precision out" in capsys.readouterr().err
        return
    assert status == 0
    assert "cosine decay, bfloat16 products |" in capsys.readouterr().out
    assert d2l.checkpoint_info(run / "last.npz")["hparams"]["precision"] == "bfloat16"
    assert cli.main(["train", "--resume", str(run), "--epochs", "3", "--no-progress"]) == 0
    assert "bfloat16 products" in capsys.readouterr().out  # the run's own setting, not the default
    assert d2l.checkpoint_info(run / "last.npz")["history"]["epoch"][-1] == 3


def test_precision_is_checked_on_the_backend_the_run_trains_on_not_the_active_one(tmp_path, capsys, backend):
    """--backend names the run's backend, made active after the settings are read: bfloat16 is checked on
    it (a torch run with bfloat16 products starts where numpy is the default)."""
    run = tmp_path / "run"
    with d2l.use_backend("numpy"):
        status = cli.main(["train", *TINY, "--backend", backend, "--cell", "lstm", "--precision", "bfloat16",
                           "--out", str(run)])
        assert d2l.backend_name() == "numpy"
    if backend != "torch":
        assert status == 2 and not run.exists()
        assert f"not on {backend}: use --backend torch" in capsys.readouterr().err
        return
    assert status == 0 and "bfloat16 products |" in capsys.readouterr().out
    assert d2l.checkpoint_info(run / "last.npz")["hparams"]["backend"] == "torch"


def test_an_interrupted_adam_run_with_a_schedule_resumes_bit_for_bit(tmp_path, monkeypatch, capsys):
    """Adam's running averages, its step count, the schedule's position and the averaged weights come back
    on --resume, and the masks of locked dropout and weight drop (drawn from d2lrnn's generator; the
    per-element dropout masks of each framework's own generator are not restored, so that is off)."""
    args = ["train", *TINY, "--epochs", "3", "--cell", "gru", "--input-dropout", "0.1", "--output-dropout",
            "0.2", "--locked-dropout", "--weight-drop", "0.3", "--ema", "0.9", "--weight-decay", "0.01",
            "--warmup", "20"]
    assert cli.main([*args, "--out", str(tmp_path / "whole")]) == 0
    with monkeypatch.context() as m:
        _interrupt_at(m, epoch=3, step=4)
        assert cli.main([*args, "--out", str(tmp_path / "cut")]) == 130
    assert cli.main(["train", "--resume", str(tmp_path / "cut"), "--no-progress"]) == 0
    capsys.readouterr()
    for name in ("last.npz", "model.npz"):
        whole, resumed = _arrays(tmp_path / "whole" / name), _arrays(tmp_path / "cut" / name)
        assert sorted(whole) == sorted(resumed)
        for key in whole:
            np.testing.assert_array_equal(resumed[key], whole[key], err_msg=f"{name} {key}")
    info = d2l.checkpoint_info(tmp_path / "whole" / "last.npz")
    assert (info["locked_dropout"], info["weight_drop"], info["hparams"]["ema"]) == (True, 0.3, 0.9)
    # last.npz: the weights training goes on from, then Adam's two arrays per weight and the averages;
    # model.npz (the best epoch, here the last): the averages
    last, best = _arrays(tmp_path / "whole" / "last.npz"), _arrays(tmp_path / "whole" / "model.npz")
    names, n = list(d2l.load_checkpoint(tmp_path / "whole" / "last.npz")[0].param_names), len(best)
    assert d2l.checkpoint_info(tmp_path / "whole" / "model.npz")["history"]["epoch"][-1] == 3
    for i, name in enumerate(names):
        np.testing.assert_array_equal(best[name], last[f"optimizer.{2 * n + i}"], err_msg=name)
    assert not np.array_equal(best["W_hq"], last["W_hq"])


@pytest.mark.once
def test_too_long_a_warmup_and_patience_without_improvement(tmp_path, monkeypatch, capsys):
    assert cli.main(["train", *TINY, "--warmup", "100000", "--schedule", "cosine",
                     "--out", str(tmp_path / "a")]) == 2
    assert "--warmup 100000 is not shorter than the run's" in capsys.readouterr().err
    from d2lrnn.lm import train

    scripted = iter([9.0, 7.0, 8.0, 8.5, 6.0])
    monkeypatch.setattr(train, "evaluate_perplexity", lambda *a, **k: next(scripted))
    assert cli.main(["train", *TINY, "--epochs", "6", "--patience", "2", "--out", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr().out
    assert "stopped early after epoch 4 of 6: the validation perplexity did not improve for 2 epochs" \
        in printed
    assert d2l.checkpoint_info(tmp_path / "b" / "model.npz")["history"]["epoch"] == [1, 2]
