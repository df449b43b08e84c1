"""``d2lrnn translate-train`` and ``d2lrnn translate``: a tiny run end to end, its files and report, resume
after an interruption, the time budget, and every bad input as one line with exit code 2."""

import contextlib
import csv
import inspect
import io
import os
import shutil
import types

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from d2lrnn import cli
from d2lrnn.seq2seq import evaluate_bleu, translate
from d2lrnn.seq2seq import train as seq2seq_train
from d2lrnn.seq2seq.bleu import bleu
from d2lrnn.seq2seq.checkpoint import load_seq2seq_checkpoint, seq2seq_checkpoint_info
from d2lrnn.seq2seq.train import book_bleu, book_sentences
from d2lrnn.training import loop

D = cli.TRANSLATE_DEFAULTS
NUM_EXAMPLES = 300
#: 270 training and 30 validation pairs in batches of 30: no smaller last batch, whose new shape would
#: make TensorFlow trace the training step a second time.
TINY = ["--num-examples", str(NUM_EXAMPLES), "--epochs", "2", "--hidden", "16", "--embed-size", "16",
        "--batch-size", "30", "--no-progress"]
#: The shared run: dropout masks come from each framework's own generator, which a run does not save, so
#: a run that must resume bit for bit trains without dropout; 6 steps hold these short sentences. Its
#: learning rate warms up and decays, and it keeps averaged weights: a resumed run continues both.
STEPS = 6
SCHEDULE = {"schedule": "cosine", "warmup": 3, "ema": 0.5}
SHARED_RUN = [*TINY, "--dropout", "0", "--num-steps", str(STEPS),
              *(arg for key, value in SCHEDULE.items() for arg in (f"--{key}", str(value)))]
RUN_FILES = [".lock", "last.npz", "loss.png", "metrics.csv", "model.npz"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _main(argv):
    """``cli.main(argv)`` and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real ``d2lrnn translate-train`` run (:data:`SHARED_RUN`), shared by the tests that read it:
    what it printed, its folder, and a copy of the folder as epoch 1 left it (what a run interrupted in
    epoch 2 leaves)."""
    out = tmp_path_factory.mktemp("run") / "whole"
    after_epoch_1 = out.parent / "after-epoch-1"
    real_save = cli.saving.RunSaver.__call__

    def save_and_copy(self, epoch, net, history):
        real_save(self, epoch, net, history)
        if epoch == 1:
            shutil.copytree(out, after_epoch_1, ignore=shutil.ignore_patterns(".lock"))

    with pytest.MonkeyPatch.context() as m:
        m.setattr(cli.saving.RunSaver, "__call__", save_and_copy)
        code, printed = _main(["translate-train", *SHARED_RUN, "--out", str(out)])
    assert code == 0
    return printed, out, after_epoch_1


def _split():
    """The shared run's data (the settings not given are the command's defaults)."""
    return d2l.load_data_nmt_split(30, STEPS, NUM_EXAMPLES, D["val_fraction"], D["min_freq"],
                                   D["seed"])


def _history(path):
    return seq2seq_checkpoint_info(path)["history"]


def _best_epoch(history):
    """The epoch model.npz must hold: the highest validation BLEU, on a tie the lowest validation loss."""
    scores = list(zip(history["val_bleu"], [-v for v in history["val_loss"]]))
    return history["epoch"][scores.index(max(scores))]


def test_translate_train_writes_the_best_model_metrics_plot_and_resume_state(tiny_run, backend):
    _, out, _ = tiny_run
    assert sorted(os.listdir(out)) == RUN_FILES  # no temporary file
    history = _history(out / "last.npz")
    assert history["epoch"] == [1, 2]
    with open(out / "metrics.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["epoch", "train_loss", "val_loss", "val_bleu", "tokens_per_sec", "seconds"]
    for column, key in enumerate(rows[0]):
        assert [float(row[column]) for row in rows[1:]] == history[key]
    assert history["train_loss"][1] < history["train_loss"][0]
    assert history["val_loss"][1] < history["val_loss"][0]
    assert all(0 <= b <= 1 for b in history["val_bleu"])
    assert (out / "loss.png").read_bytes()[:8] == PNG_MAGIC

    best = _history(out / "model.npz")
    assert best["epoch"][-1] == _best_epoch(history)
    for key in ("epoch", "train_loss", "val_loss", "val_bleu"):  # the history up to the best epoch
        assert best[key] == history[key][:len(best["epoch"])]

    info = seq2seq_checkpoint_info(out / "model.npz")
    layers = D["num_layers"]
    assert (info["rnn"], info["cell"], info["embed_size"], info["num_hiddens"], info["num_layers"]) == \
        ("scratch", "gru", 16, 16, layers)
    assert (info["dropout"], info["num_steps"], info["backend"]) == (0.0, STEPS, backend)
    assert info["resume"] is None
    hparams = info["hparams"]
    given = {"num_examples": NUM_EXAMPLES, "epochs": 2, "hidden": 16, "embed_size": 16, "batch_size": 30,
             "dropout": 0.0, "num_steps": STEPS, **SCHEDULE}
    assert {k: hparams[k] for k in D} == {**D, **given}
    assert (hparams["backend"], hparams["token"]) == (backend, "word")
    assert seq2seq_checkpoint_info(out / "last.npz")["resume"]["epoch"] == 2
    saved = d2lrnn.training.checkpoint.load_optimizer_state(out / "last.npz")
    assert saved["optimizer"] == D["optimizer"] == "adam" and saved["t"] == 2 * len(_split()[0])
    num_params = len(_arrays(out / "model.npz"))
    assert saved["averaged"] and len(saved["arrays"]) == 3 * num_params  # Adam's two, then the averages


def test_translate_train_prints_the_setup_the_best_epoch_bleu_and_the_book_sentences(tiny_run, backend):
    printed, out, _ = tiny_run
    lines = printed.splitlines()
    train_iter, val_iter, src_vocab, tgt_vocab = _split()
    name = f"{D['num_layers']}-layer GRU encoder-decoder" if D["num_layers"] > 1 else "GRU encoder-decoder"
    assert lines[0] == (f"pairs fra-eng (bundled): {train_iter.num_pairs} training / {val_iter.num_pairs} "
                        f"validation pairs, vocabularies {len(src_vocab)} source / {len(tgt_vocab)} target "
                        f"words | backend {backend} | {name} (scratch), embedding 16, 16 hidden units | "
                        f"Adam lr {D['lr']:g}, 3 warm-up steps, cosine decay, averaged weights (EMA 0.5), "
                        f"clip {D['clip']:g} | batch 30 x {STEPS} steps, "
                        "2 epochs")
    assert lines[1] == f"output folder {out}"

    net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(out / "model.npz")
    history = info["history"]
    epoch = history["epoch"][-1]
    greedy, beam = evaluate_bleu(net, val_iter, tgt_vocab), evaluate_bleu(net, val_iter, tgt_vocab, 4)
    assert f"{greedy:.3f}" == f"{history['val_bleu'][-1]:.3f}"  # the epoch's BLEU, from the saved weights
    table = lines[lines.index("") + 1:][:4]
    assert table[0].split() == [*f"{name} (scratch), epoch {epoch} of 2".split(), "train", "validation"]
    assert table[1].split() == ["loss", "per", "target", "token", f"{history['train_loss'][-1]:.3f}",
                                f"{history['val_loss'][-1]:.3f}"]
    assert table[2].split() == ["BLEU-4,", "greedy", "-", f"{greedy:.3f}"]
    assert table[3].split() == ["BLEU-4,", "beam", "search", "(k=4)", "-", f"{beam:.3f}"]

    mean, preds = book_bleu(net, src_vocab, tgt_vocab, STEPS)
    assert f"mean {mean:.3f}):" in printed
    for source, target, pred in zip(*book_sentences(), preds):
        assert f"  {source} => {pred} (BLEU {bleu(pred, target, k=2):.3f}; the book's: {target})" in lines
    assert any(line.startswith("wall time ") for line in lines)
    for what, file in (("checkpoint", "model.npz"), ("metrics", "metrics.csv"), ("plot", "loss.png"),
                       ("resume", "last.npz")):
        assert f"{what:<11} {out / file}" in lines


def test_translate_prints_one_line_per_sentence(tiny_run, capsys):
    _, out, _ = tiny_run
    sentences = ["go .", "I lost.", "he's calm .", "zyzzyva wombat !"]
    net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(out / "model.npz")
    assert "zyzzyva" not in src_vocab and "wombat" not in src_vocab
    for options, beam, alpha in (([], 1, 0.75), (["--beam", "3", "--alpha", "0.5"], 3, 0.5)):
        assert cli.main(["translate", *sentences, "--checkpoint", str(out), *options]) == 0
        expected = translate(net, sentences, src_vocab, tgt_vocab, info["num_steps"], beam, alpha)
        assert capsys.readouterr().out == "".join(line + "\n" for line in expected)
    # unknown words read as <unk>
    unknown = translate(net, ["<unk> <unk> !"], src_vocab, tgt_vocab, info["num_steps"])
    assert cli.main(["translate", "zyzzyva wombat !", "--checkpoint", str(out / "model.npz")]) == 0
    assert capsys.readouterr().out.splitlines() == unknown


def _interrupt_at(monkeypatch, epoch):
    """Ctrl-C as ``epoch`` of the training loop starts."""
    real = loop.run_epoch
    signature = inspect.signature(real)

    def run_epoch(*args, **kwargs):
        if signature.bind(*args, **kwargs).arguments.get("epoch") == epoch:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "run_epoch", run_epoch)


def _arrays(path):
    with np.load(path) as data:
        return {name: data[name] for name in data.files if name != "meta"}


def _contents(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.name != ".lock"}


def test_a_run_interrupted_in_epoch_2_resumes_to_the_result_of_a_run_never_interrupted(tiny_run, tmp_path,
                                                                                      monkeypatch, capsys):
    _, whole, after_epoch_1 = tiny_run
    cut = tmp_path / "cut"
    shutil.copytree(after_epoch_1, cut)
    assert _history(cut / "last.npz")["epoch"] == [1] and sorted(os.listdir(cut)) == RUN_FILES[1:]
    saved = _contents(cut)
    with monkeypatch.context() as m:
        _interrupt_at(m, epoch=2)
        assert cli.main(["translate-train", "--resume", str(cut), "--no-progress"]) == 130
    assert capsys.readouterr().err == (f"\nd2lrnn: interrupted; epochs 1-1 are saved in {cut}: continue "
                                       f"with: d2lrnn translate-train --resume {cut}\n")
    assert _contents(cut) == saved  # nothing lost
    assert cli.main(["translate-train", "--resume", str(cut), "--no-progress"]) == 0
    assert "resuming after epoch 1 of 2" in capsys.readouterr().out
    for name in ("model.npz", "last.npz"):
        expected, resumed = _arrays(whole / name), _arrays(cut / name)
        assert sorted(resumed) == sorted(expected)
        for key in expected:  # parameters and Adam's state, bit for bit
            np.testing.assert_array_equal(resumed[key], expected[key], err_msg=f"{name} {key}")
        h1, h2 = _history(whole / name), _history(cut / name)
        for key in ("epoch", "train_loss", "val_loss", "val_bleu"):
            assert h2[key] == h1[key], (name, key)
    assert any(key.startswith("optimizer.") for key in _arrays(cut / "last.npz"))
    columns = [[row.split(",")[:4] for row in (folder / "metrics.csv").read_text().splitlines()]
               for folder in (whole, cut)]
    assert columns[1] == columns[0] and len(columns[0]) == 3  # header, epochs 1 and 2: the same numbers


@pytest.mark.once
def test_resume_keeps_the_run_settings(tiny_run, capsys):
    _, out, _ = tiny_run
    before = {name: (out / name).read_bytes() for name in RUN_FILES[1:]}
    assert cli.main(["translate-train", "--resume", str(out), "--hidden", "32"]) == 2
    assert capsys.readouterr().err == ("d2lrnn: error: --resume continues the run with its own settings: "
                                       "drop --hidden (the run used 16)\n")
    assert cli.main(["translate-train", "--resume", str(out)]) == 2
    assert capsys.readouterr().err == (f"d2lrnn: error: the run in {out} has already finished 2 of 2 epochs: "
                                       "pass --epochs N with N > 2 to train it further\n")
    assert {name: (out / name).read_bytes() for name in RUN_FILES[1:]} == before


def _spy_on_updaters(monkeypatch):
    """The keyword arguments of every training step the command makes, as a list that fills as it does."""
    made = []
    real_updater = cli.translate.make_seq2seq_updater

    def spy(*args, **kwargs):
        made.append(kwargs)
        return real_updater(*args, **kwargs)

    monkeypatch.setattr(cli.translate, "make_seq2seq_updater", spy)
    return made


#: The settings translate-train gained after runs were first saved, and what a run saved without them used.
ADDED = {"label_smoothing": 0.0, "embed_dropout": 0.0, "output_dropout": 0.0, "schedule": "constant",
         "warmup": 0, "ema": 0.0, "attention": False, "tie_embeddings": False, "bidirectional": False,
         "precision": "float32"}


@pytest.mark.once
def test_label_smoothing_reaches_the_training_step_is_saved_and_old_runs_resume_without_it(tmp_path,
                                                                                          monkeypatch):
    import json

    made = _spy_on_updaters(monkeypatch)
    run = tmp_path / "run"
    code, printed = _main(["translate-train", *TINY, "--epochs", "1", "--label-smoothing", "0.2",
                           "--out", str(run)])
    assert code == 0 and [kwargs["label_smoothing"] for kwargs in made] == [0.2]
    assert "clip 1, label smoothing 0.2 |" in printed
    assert seq2seq_checkpoint_info(run / "last.npz")["hparams"]["label_smoothing"] == 0.2
    with np.load(run / "last.npz") as data:  # the settings as a d2lrnn before --label-smoothing saved them
        arrays = {name: data[name] for name in data.files}
    meta = json.loads(str(arrays["meta"]))
    for key in ADDED:  # all of them came later
        del meta["hparams"][key]
    for key in ("embed_dropout", "output_dropout", "attention", "tie_embeddings", "bidirectional"):
        del meta[key]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(run / "last.npz", **arrays)
    code, printed = _main(["translate-train", "--resume", str(run), "--epochs", "2", "--no-progress"])
    assert code == 0 and "label smoothing" not in printed and "warm-up" not in printed
    assert [(kwargs["label_smoothing"], kwargs["schedule"], kwargs["average"]) for kwargs in made] == \
        [(0.2, None, 0.0), (0.0, None, 0.0)]
    assert "embedding dropout" not in printed and "output dropout" not in printed
    info = seq2seq_checkpoint_info(run / "last.npz")
    assert cli.translate.TRANSLATE_ADDED == ADDED and {key: info["hparams"][key] for key in ADDED} == ADDED
    assert (info["embed_dropout"], info["output_dropout"], info["attention"], info["tie_embeddings"],
            info["bidirectional"]) == (0.0, 0.0, False, False, False)


def test_bfloat16_products_train_and_resume_on_torch_and_are_refused_elsewhere(tmp_path, monkeypatch,
                                                                                backend):
    made = _spy_on_updaters(monkeypatch)
    run = tmp_path / "run"
    code, printed = _main(["translate-train", *TINY, "--epochs", "1", "--precision", "bfloat16",
                           "--out", str(run)])
    if backend != "torch":
        assert code == 2 and not run.exists() and made == []
        return
    assert code == 0 and [kwargs["precision"] for kwargs in made] == ["bfloat16"]
    assert "Adam lr 0.002, bfloat16 products, clip 1 |" in printed
    assert seq2seq_checkpoint_info(run / "last.npz")["hparams"]["precision"] == "bfloat16"
    code, printed = _main(["translate-train", "--resume", str(run), "--epochs", "2", "--no-progress"])
    assert code == 0 and [kwargs["precision"] for kwargs in made] == ["bfloat16", "bfloat16"]
    assert seq2seq_checkpoint_info(run / "last.npz")["history"]["epoch"] == [1, 2]


@pytest.mark.once
def test_the_schedule_and_the_averaged_weights_reach_the_step_and_model_npz_holds_the_averages(tmp_path,
                                                                                              monkeypatch):
    made = _spy_on_updaters(monkeypatch)
    run = tmp_path / "run"
    code, printed = _main(["translate-train", *TINY, "--epochs", "1", "--schedule", "linear", "--warmup", "2",
                           "--ema", "0.9", "--out", str(run)])
    assert code == 0 and len(made) == 1
    schedule, steps = made[0]["schedule"], len(_split()[0])  # one epoch of 9 batches
    assert (schedule.lr, schedule.total, schedule.warmup, schedule.decay) == (D["lr"], steps, 2, "linear")
    assert made[0]["average"] == 0.9
    assert f"| Adam lr {D['lr']:g}, 2 warm-up steps, linear decay, averaged weights (EMA 0.9), clip 1 |" \
        in printed
    model, last = _arrays(run / "model.npz"), _arrays(run / "last.npz")
    saved = d2lrnn.training.checkpoint.load_optimizer_state(run / "last.npz")
    assert saved["t"] == steps and len(saved["arrays"]) == 3 * len(model)
    for (name, weights), averages in zip(model.items(), saved["arrays"][2 * len(model):]):
        np.testing.assert_array_equal(weights, averages, err_msg=name)  # the model is the averages
    changed = sum(not np.array_equal(model[name], last[name]) for name in model)
    assert changed > len(model) // 2  # and not the weights training goes on from


def test_the_concise_model_a_time_budget_and_the_default_folder(tmp_path, monkeypatch, backend, capsys):
    """--minutes stops after the epoch that crosses it (a clock that moves 1000 s per epoch), and
    model.npz holds the epoch of the best validation BLEU (scripted: 0.1, 0.3, 0.2)."""
    monkeypatch.chdir(tmp_path)
    clock = [0.0]
    real_epoch = loop.run_epoch

    def epoch_of_1000_seconds(*args, **kwargs):
        result = real_epoch(*args, **kwargs)
        clock[0] += 1000.0
        return result

    monkeypatch.setattr(loop, "run_epoch", epoch_of_1000_seconds)
    monkeypatch.setattr(d2lrnn.training.metrics, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    scripted = iter([0.1, 0.3, 0.2])
    monkeypatch.setattr(seq2seq_train, "evaluate_bleu", lambda *args, **kwargs: next(scripted))
    args = ["translate-train", *TINY, "--model", "concise", "--epochs", "5", "--minutes", "40",
            "--embed-dropout", "0.1", "--output-dropout", "0.2", "--attention", "--tie-embeddings",
            "--bidirectional"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    rates = f"dropout {D['dropout']:g}, embedding dropout 0.1, output dropout 0.2"
    assert "GRU encoder-decoder with a bidirectional encoder and attention (concise)" in printed
    assert f"(concise), tied embedding 16, 16 hidden units, {rates} | Adam" in printed
    out = tmp_path / "runs" / f"translate-{backend}-concise-1"
    assert sorted(os.listdir(out)) == RUN_FILES
    assert "stopped after epoch 3 of 5: the 40 minutes of --minutes are used" in printed
    assert f", 5 epochs, at most 40 minutes\noutput folder {out.relative_to(tmp_path)}\n" in printed
    history = _history(out / "last.npz")
    assert (history["epoch"], history["val_bleu"], history["seconds"]) == \
        ([1, 2, 3], [0.1, 0.3, 0.2], [1000.0, 2000.0, 3000.0])
    info = seq2seq_checkpoint_info(out / "model.npz")
    assert info["history"]["epoch"][-1] == 2 and info["rnn"] == "concise"
    assert info["num_steps"] == D["num_steps"]
    assert info["dropout"] == (D["dropout"] if D["num_layers"] > 1 else 0.0)
    assert (info["embed_dropout"], info["output_dropout"]) == (0.1, 0.2)
    assert (info["hparams"]["embed_dropout"], info["hparams"]["output_dropout"]) == (0.1, 0.2)
    assert info["attention"] is True and info["hparams"]["attention"] is True
    assert "decoder.W_a" in np.load(out / "model.npz") and "decoder.W_hq" not in np.load(out / "model.npz")
    assert info["tie_embeddings"] is True and info["hparams"]["tie_embeddings"] is True
    assert info["bidirectional"] is True and info["hparams"]["bidirectional"] is True
    assert "encoder.l1.rev.W_hz" in np.load(out / "model.npz")
    assert cli.main(["translate-train", "--resume", str(out), "--epochs", "6"]) == 2
    assert capsys.readouterr().err == (f"d2lrnn: error: the run in {out} has already trained 50 of its 40 "
                                       "minutes: pass --minutes M with M > 50 to train it further\n")


@pytest.mark.once
def test_help_lists_the_translation_commands_and_their_defaults(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "translate-train" in text and "translate " in text
    assert cli.main(["translate-train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    hidden = f"--hidden N hidden units of the encoder's and decoder's GRU layers (default: {D['hidden']})"
    for option in (hidden,
                   f"(default: {D['epochs']})", f"(default: {D['lr']})", "(default: all pairs)",
                   "(default: the bundled English-French pairs)", "(default: no limit)", "--resume DIR"):
        assert option in text
    assert cli.main(["translate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "SENTENCE [SENTENCE ...]" in text and "--beam K" in text and "(default: 0.75)" in text


def _lm_run(folder):
    """A folder holding a language model's checkpoint, as 'd2lrnn train' leaves it."""
    folder.mkdir()
    vocab = d2l.Vocab(list("abc"))
    for name in ("model.npz", "last.npz"):
        d2l.save_checkpoint(folder / name, d2l.RNNModelScratch(len(vocab), 4), vocab)


BAD_INPUT = [
    (["translate", "", "--checkpoint", "{run}"],
     "the sentence to translate is empty: give at least one word"),
    (["translate", "go .", "   ", "--checkpoint", "{run}"], "sentence 2 to translate is empty"),
    (["translate", "go .", "--checkpoint", "{run}", "--beam", "0"],
     "argument --beam: must be at least 1 (1: greedy search; e.g. 4), got 0"),
    (["translate", "go .", "--checkpoint", "{run}", "--beam", "-3"], "argument --beam: must be at least 1"),
    (["translate", "go .", "--checkpoint", "{run}", "--beam", "2.5"],
     "argument --beam: expected a whole number"),
    (["translate", "go .", "--checkpoint", "{run}", "--alpha", "-1"],
     "argument --alpha: must be a number of 0"),
    (["translate", "go .", "--checkpoint", "{tmp}/lm"], "holds a language model, not a translation model: "
                                                        "continue text with `d2lrnn generate --checkpoint"),
    (["generate", "--checkpoint", "{run}"], "holds a translation model (seq2seq), not a language model: "
                                            "translate with `d2lrnn translate SENTENCE --checkpoint"),
    (["translate", "go .", "--checkpoint", "{tmp}/missing.npz"],
     "missing.npz does not exist: check the path, or train a model with `d2lrnn translate-train`"),
    (["translate", "go ."], "the following arguments are required: --checkpoint"),
    (["translate", "--checkpoint", "{run}"], "the following arguments are required: SENTENCE"),
    (["translate-train", "--pairs", "{tmp}/bad.txt"],
     "--pairs {tmp}/bad.txt: line 2 of the pairs is not 'source<TAB>target': 'hello world': give one pair a "
     "line, the two sentences separated by one tab"),
    (["translate-train", "--pairs", "{tmp}/latin1.txt"],
     "d2lrnn: error: pairs file '{tmp}/latin1.txt' is not UTF-8 text (byte 0xe9"),
    (["translate-train", "--pairs", "{tmp}/blank.txt"], "the pairs file holds no sentence pairs"),
    (["translate-train", "--pairs", "{tmp}/nope.txt"], "pairs file '{tmp}/nope.txt' does not exist"),
    (["translate-train", "--pairs", "{tmp}"], "is a folder: pass a text file"),
    (["translate-train", "--pairs", ""], "argument --pairs: is empty: give a file name"),
    (["translate-train", "--num-examples", "5"], "5 pairs cannot be split with val_fraction"),
    (["translate-train", "--num-layers", "1", "--dropout", "0.3"],
     "--dropout 0.3 acts between GRU layers, and one layer has none: add --num-layers 2"),
    (["translate-train", "--embed-size", "0"], "argument --embed-size: must be at least 1, got 0"),
    (["translate-train", "--bidirectional", "--hidden", "255"],
     "--bidirectional gives each direction half of --hidden, and 255 is odd: give an even --hidden"),
    (["translate-train", "--tie-embeddings", "--hidden", "128"],
     "--tie-embeddings makes the decoder's embedding its output layer's weights, so --embed-size (256) must "
     "equal --hidden (128): give them the same value"),
    (["translate-train", "--minutes", "0"], "argument --minutes: must be a number above 0"),
    (["translate-train", "--precision", "bfloat16"],
     "precision 'bfloat16' needs automatic mixed precision, which d2lrnn has on the torch backend only, not "
     "on numpy: use --backend torch"),
    (["translate-train", "--precision", "float16"], "argument --precision: invalid choice: 'float16'"),
    (["translate-train", "--model", "transformer"], "argument --model: invalid choice: 'transformer'"),
    (["translate-train", "--label-smoothing", "1"],
     "argument --label-smoothing: must be at least 0 and below 1 (e.g. 0.2), got 1"),
    (["translate-train", *TINY, "--warmup", "18"],
     "d2lrnn: error: --warmup 18 is not shorter than the run's 18 steps (2 epochs of 9): use a smaller "
     "--warmup"),
    (["translate-train", "--resume", "{tmp}/lm"],
     "lm holds a language model run: continue it with d2lrnn train --resume"),
    (["train", "--resume", "{run}"],
     "holds a translation run: continue it with d2lrnn translate-train --resume"),
    (["translate-train", "--resume", "{run}", "--overwrite"], "--resume continues a run and --overwrite"),
    (["translate-train", *TINY, "--out", "{run}"],
     "holds another run's checkpoint (model.npz, last.npz): pass --overwrite"),
]


@pytest.mark.once
@pytest.mark.parametrize("argv, message", BAD_INPUT)
def test_bad_input_is_one_line_with_exit_code_2_and_nothing_lost(argv, message, tiny_run, tmp_path,
                                                                 monkeypatch, capsys, backend):
    _, run, _ = tiny_run
    monkeypatch.chdir(tmp_path)  # where a default output folder would go
    _lm_run(tmp_path / "lm")
    (tmp_path / "bad.txt").write_text("go .\tva !\nhello world\n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\tcaf\xe9\n".encode("latin-1"))
    (tmp_path / "blank.txt").write_text("\n\n")
    before = {path: path.read_bytes() for folder in (run, tmp_path / "lm") for path in folder.iterdir()}
    listing = sorted(os.listdir(tmp_path))
    fill = {"tmp": str(tmp_path), "run": str(run)}
    assert cli.main([a.format(**fill) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("d2lrnn")
    assert message.format(**fill) in captured.err
    assert "Traceback" not in captured.err
    assert d2l.backend_name() == backend
    assert sorted(os.listdir(tmp_path)) == listing  # no folder made
    assert {path: path.read_bytes() for path in before} == before


def test_divergence_exits_2_and_ctrl_c_exits_130_in_one_line_leaving_no_empty_folder(tmp_path, monkeypatch,
                                                                                     capsys):
    diverged = "loss became nan at epoch 1, step 3: the run diverged; lower the learning rate (--lr)"

    def diverges(*args, **kwargs):
        raise d2l.TrainingError(diverged, 1, 3)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    for train, code, err in (
            (diverges, 2, f"d2lrnn: error: {diverged}; no epoch finished, so nothing was saved\n"),
            (interrupted, 130, "\nd2lrnn: interrupted before the first epoch finished; nothing was saved\n")):
        monkeypatch.setattr(cli.translate, "train_encoder_decoder", train)
        assert cli.main(["translate-train", *TINY, "--out", str(tmp_path / "run")]) == code
        assert capsys.readouterr().err == err
        assert not (tmp_path / "run").exists()  # the folder this run made holds nothing: it is removed
