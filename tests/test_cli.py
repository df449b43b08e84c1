"""The ``d2lrnn`` command: a tiny training run end to end, generation, and one-line argument errors."""

import csv
import os
import pathlib
import subprocess
import sys
import warnings

import pytest

import d2lrnn as d2l
from d2lrnn import cli

ROOT = pathlib.Path(d2l.__file__).resolve().parents[1]
TINY = ["--hidden", "16", "--epochs", "2", "--max-tokens", "4000", "--batch-size", "4", "--num-steps", "8",
        "--no-progress"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_FILES = [".lock", "last.npz", "metrics.csv", "model.npz", "perplexity.png"]


def _run(*args):
    """``python -m d2lrnn ARGS`` in a fresh interpreter, importing the d2lrnn under test."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "d2lrnn", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real ``d2lrnn train`` run in a subprocess, shared by the tests that read its output."""
    out = tmp_path_factory.mktemp("run")
    result = _run("train", *TINY, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return result, out


def _baselines():
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 4, 8, False, 4000, 0.1, seed=0)
    return d2l.ngram_perplexities(train_iter.corpus, val_iter.corpus, len(vocab))


def test_train_writes_a_checkpoint_a_metrics_csv_and_a_plot(tiny_run, backend):
    _, out = tiny_run
    net, vocab, info = d2l.load_checkpoint(out / "model.npz")
    assert (net.kind, net.num_hiddens, len(vocab), info["backend"]) == ("rnn_scratch", 16, 28, backend)
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
    assert lines[0] == (f"corpus timemachine: 3,600 training / 400 validation characters, vocabulary 28 | "
                        f"backend {backend} | model scratch, 16 hidden units | 2 epochs, sequential sampling")
    history = d2l.load_checkpoint(out / "model.npz")[2]["history"]
    train_ppl, val_ppl = history["train_ppl"][-1], history["val_ppl"][-1]
    table = {line.rsplit(None, 2)[0]: line.split()[-2:] for line in lines
             if line.startswith(("RNN (", "1-gram", "2-gram", "3-gram", "5-gram"))}
    baselines = _baselines()
    assert table == {"RNN (scratch)": [f"{train_ppl:.2f}", f"{val_ppl:.2f}"],
                     **{f"{n}-gram (add-k)": ["-", f"{ppl:.2f}"] for n, ppl in baselines.items()}}
    verdict = "beats" if val_ppl < baselines[3] else "does not beat"
    assert any(line.startswith(f"the RNN {verdict} the trigram") for line in lines)
    samples = [line[2:] for line in lines if line.startswith("  ")]
    assert [s.split(" ")[0] for s in samples] == ["time", "traveller"]
    assert [len(s) for s in samples] == [len("time traveller") + 100, len("traveller") + 100]
    assert f"checkpoint  {out / 'model.npz'}" in lines and f"metrics     {out / 'metrics.csv'}" in lines
    assert any(line.startswith("wall time ") for line in lines)


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
    assert net.kind == "rnn_concise" and info["hparams"]["sampling"] == "random"
    assert "RNN (concise)" in capsys.readouterr().out


def test_help_is_readable(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "train" in text and "generate" in text and "d2lrnn COMMAND --help" in text
    assert cli.main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--hidden N", "(default: 512)", "--corpus NAME|PATH", "(default: timemachine)",
                   "--out DIR", "(default: 30)", "(default: sequential)"):
        assert option in text


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
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS)
def test_bad_arguments_are_one_line_errors_with_exit_code_2(argv, message, tmp_path, monkeypatch, capsys,
                                                            backend):
    monkeypatch.chdir(tmp_path)  # where a default output folder would go
    (tmp_path / "a-file").write_text("not a folder, not a checkpoint")
    (tmp_path / "torn.npz").write_bytes(b"PK\x03\x04\x14\x00\x00\x00")
    fill = {"tmp": str(tmp_path), "missing": _missing_framework(monkeypatch)}
    assert cli.main([a.format(**fill) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("d2lrnn")
    assert message.format(**fill) in captured.err
    assert d2l.backend_name() == backend


def test_divergence_exits_1_with_a_one_line_message(tmp_path, capsys):
    with warnings.catch_warnings():  # the overflow itself may warn; the message is what we check
        warnings.simplefilter("ignore")
        code = cli.main(["train", *TINY, "--lr", "1e38", "--clip", "1e38", "--out", str(tmp_path)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("d2lrnn: error: loss became") and "at epoch 1, step 2" in err


def test_ctrl_c_exits_130_without_a_traceback(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "train_ch8", interrupted)
    assert cli.main(["train", *TINY, "--out", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "d2lrnn: interrupted before the first epoch finished; nothing was saved"
    assert not (tmp_path / "run").exists()  # the folder this run made holds nothing: it is removed


def test_sample_prefixes_of_other_corpora_come_from_the_validation_text():
    _, val_iter, vocab = d2l.load_data_lm("tinyshakespeare", 4, 8, False, 20000, 0.1)
    text = "".join(vocab.to_tokens(list(val_iter.corpus)))
    first, middle = cli.sample_prefixes("tinyshakespeare", vocab, val_iter.corpus)
    assert 0 < len(first) <= 10 and 0 < len(middle) <= 10
    assert text.index(first) == text.index(" ") + 1
    assert any(text[i - 1] == " " and text[i:i + 10].strip() == middle and abs(i - len(text) // 2) < 40
               for i in range(1, len(text)))
    assert cli.sample_prefixes("timemachine", vocab, val_iter.corpus) == ("time traveller", "traveller")

