"""bench/bench_lm.py, bench/lm_eval.py and bench/lm_reference.py: the whole-validation-text loss on
hand-computed cases, d2lrnn's and the reference's evaluation against their own losses, both sides
learning in a few seconds, the run names and settings, and the report (written to a temporary file,
never to bench/RESULTS.md). The reference's tests need torch and are skipped without it."""

import math
import shlex

import numpy as np
import pytest

import d2lrnn
import d2lrnn as d2l
from bench import bench_lm
from bench.bench_lm import BenchError, child_command, parse_run, resolve
from bench.lm_eval import cross_entropy_sum, cut_streams, describe, evaluate
from tests.conftest import as_time_module, ticking_clock

# ------------------------------------------------------------------ the evaluation helper


def test_uniform_model_exact_nats_and_count():
    tokens = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0], np.uint8)  # 2 streams of 4, the last token left out

    def predict(X, state):
        return np.zeros(X.shape + (4,), np.float32), state

    result = evaluate(tokens, predict, lambda batch: None, streams=2, num_steps=2)
    assert result["nats"] == pytest.approx(math.log(4), rel=1e-12)
    counts = (result["predicted"], result["streams"], result["stream_length"], result["left_out"])
    assert counts == (6, 2, 4, 1)
    assert "6 characters predicted" in describe(result) and "the last 1 not read" in describe(result)
    assert "every character but the first of each stream" in describe(result)


class PositionModel:
    """Probability 0.5 + 0.1 k on token ``k % 3`` at the k-th position of a stream (the rest shared
    evenly by the other two tokens); the state is each stream's position count."""

    calls = []

    def begin_state(self, batch):
        return np.zeros(batch, np.int64)

    def predict(self, X, state):
        self.calls.append(X.shape)
        batch, steps = X.shape
        k = state[:, None] + np.arange(steps)  # (batch, steps) positions
        p = 0.5 + 0.1 * k
        probs = np.repeat(((1 - p) / 2)[..., None], 3, axis=-1)
        np.put_along_axis(probs, (k % 3)[..., None], p[..., None], axis=-1)
        return np.log(probs), state + steps


def test_known_per_position_probabilities_state_carried_and_reset_per_stream():
    # Both streams' targets are 0 1 2 0: the model's token k % 3 at position k, with probability 0.5 + 0.1 k.
    tokens = np.array([2, 0, 1, 2, 0] + [1, 0, 1, 2, 0] + [1])
    model = PositionModel()
    model.calls.clear()
    result = evaluate(tokens, model.predict, model.begin_state, streams=2, num_steps=3)
    expected = -(math.log(0.5) + math.log(0.6) + math.log(0.7) + math.log(0.8)) / 4
    assert result["nats"] == pytest.approx(expected, rel=1e-12)
    assert result["predicted"] == 8 and result["left_out"] == 1
    assert model.calls == [(2, 3), (2, 1)]  # chunks of num_steps, the state carried across them


def test_cross_entropy_sum_and_cut():
    logits = np.log(np.array([[[0.25, 0.75], [0.5, 0.5]]]))
    assert cross_entropy_sum(logits, np.array([[1, 0]])) == pytest.approx(-math.log(0.75) - math.log(0.5))
    assert cross_entropy_sum(logits + 100.0, np.array([[0, 0]])) == pytest.approx(-math.log(0.25 * 0.5))
    rows, left_out = cut_streams(np.arange(10), 3)
    np.testing.assert_array_equal(rows, [[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    assert left_out == 1
    with pytest.raises(ValueError, match="use fewer streams"):
        cut_streams(np.arange(5), 3)


def test_wrong_logits_shape_is_refused():
    with pytest.raises(ValueError, match=r"expected \(batch, steps, vocab\)"):
        evaluate(np.arange(20) % 3, lambda X, s: (np.zeros((X.shape[1], X.shape[0], 3)), s), lambda b: None,
                 streams=2, num_steps=4)


# ------------------------------------------------------------------ d2lrnn's side (the active backend)


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_d2lrnn_predict_matches_its_eval_step(kind, rng):
    vocab, streams, steps = 7, 3, 4
    net = d2l.make_model(kind, vocab, 8, cell="lstm")
    tokens = rng.integers(1, vocab, streams * (2 * steps + 1) + 2)
    result = evaluate(tokens, bench_lm.d2lrnn_predict(net), net.begin_state, streams, steps)
    rows, _ = cut_streams(tokens, streams)
    step, state, total = d2l.make_eval_step(net), net.begin_state(streams), 0.0
    for i in range(0, rows.shape[1] - 1, steps):
        X = d2l.ops.from_numpy(rows[:, i:i + steps].astype(np.int64))
        Y = d2l.ops.from_numpy(rows[:, i + 1:i + 1 + steps].astype(np.int64))
        loss, state = step(net.params, X, Y, state)
        total += float(d2l.ops.to_numpy(loss)) * streams * steps
    assert result["predicted"] == streams * 2 * steps
    assert result["nats"] == pytest.approx(total / result["predicted"], rel=1e-5)


def test_d2lrnn_run_learns():
    minutes = 0.025  # 1.5 s of a clock that moves 0.01 s per step (and per epoch end): 150 moves
    # Adam at 2e-2 reaches in 150 steps what 1e-2 does in 300 (measured on numpy: 2.21 and 2.19 nats)
    result = bench_lm.run_d2lrnn("timemachine", "scratch", minutes, [minutes / 2], hidden=32, batch=16,
                                 num_steps=32, lr=2e-2, output_dropout=0.1, max_tokens=30000,
                                 now=ticking_clock(0.01))
    vocab = result["vocab_size"]
    assert vocab == 28 and result["val_size"] == 3000
    # every step and every epoch's end moves the clock: about 150 steps, a few epochs of about 52
    assert 140 < result["steps"] < 150 and result["tokens"] == result["steps"] * 16 * 32
    assert len(result["curve"]) == 2
    (m1, _, t1), (m2, nats, t2) = result["curve"]
    assert minutes / 2 <= m1 < m2 and m2 >= minutes and 0 < t1 < t2 == result["tokens"]
    assert result["train_seconds"] == pytest.approx(m2 * 60)
    assert nats < math.log(vocab) - 0.35, result["curve"]
    assert result["eval"]["predicted"] == 16 * (3000 // 16 - 1)
    assert result["tokens_per_s"] == pytest.approx(result["tokens"] / result["train_seconds"])


def test_train_argv_passes_dropout_between_layers_only_with_two_or_more():
    one = bench_lm.train_argv("tinyshakespeare", "out", backend="torch", raw=True, epochs=3, dropout=0.1)
    two = bench_lm.train_argv("tinyshakespeare", "out", backend="torch", epochs=3, dropout=0.1, layers=2)
    assert "--dropout" not in one and one[-1] == "--raw"
    assert two[two.index("--dropout") + 1] == "0.1" and "--raw" not in two
    with pytest.raises(BenchError, match="needs epochs=N"):
        bench_lm.train_argv("tinyshakespeare", "out", backend="torch")


def test_train_runs_take_weight_drop_averaged_weights_and_precision_other_runs_do_not():
    backend, kind, overrides = bench_lm.parse_run("torch:train:epochs=13,weight_drop=0.1,ema=0.999,"
                                                  "precision=bfloat16,hidden=640")
    config = bench_lm.resolve("tinyshakespeare", kind, None, overrides)
    config.pop("warmup")  # seconds: run_train makes it steps
    argv = bench_lm.train_argv("tinyshakespeare", "out", backend=backend, **config)
    assert [argv[argv.index(flag) + 1] for flag in ("--weight-drop", "--ema", "--precision", "--hidden")] == \
        ["0.1", "0.999", "bfloat16", "640"]
    plain = bench_lm.train_argv("tinyshakespeare", "out", backend="torch", epochs=3)
    assert not {"--weight-drop", "--ema", "--precision"} & set(plain)
    with pytest.raises(BenchError, match="weight_drop"):
        bench_lm.parse_run("torch:concise:weight_drop=0.1")


def test_marks_of_takes_the_last_epoch_finished_by_each_time():
    curve = [[0.9, 2.0, 100], [2.1, 1.8, 200], [3.0, 1.7, 300]]
    assert bench_lm.marks_of(curve, [0.5, 1, 3, 5]) == [None, curve[0], curve[2], curve[2]]


def test_a_train_run_is_the_d2lrnn_train_command_and_reads_its_metrics(capsys, monkeypatch):
    """BACKEND:train runs `d2lrnn train` itself; its curve is the run's metrics.csv, per epoch."""
    # The training loop's clock moves a second per reading: an epoch takes a few such seconds, so what
    # has finished by 0.001 and by 5 minutes does not depend on the machine's speed.
    monkeypatch.setattr(d2lrnn.training.metrics, "time", as_time_module(ticking_clock(1.0)))
    result = bench_lm.run_train("timemachine", 5, [0.001, 5], hidden=16, batch=8, num_steps=16, lr=1e-2,
                                output_dropout=0.1, max_tokens=20000, epochs=2, warmup=30.0, model="scratch",
                                cell="gru", init="uniform", layers=1, dropout=0.0, input_dropout=0.0,
                                weight_decay=0.0, clip=1.0, seed=0)
    assert capsys.readouterr().out == ""  # the command's printing goes to stderr: stdout is the JSON line's
    argv = result["argv"]
    assert argv[:2] == ["train", "--backend"] and "--raw" not in argv and "--dropout" not in argv  # one layer
    for flag, value in (("--cell", "gru"), ("--init", "uniform"), ("--epochs", "2"), ("--optimizer", "adam"),
                        ("--schedule", "cosine"), ("--patience", "0"), ("--max-tokens", "20000")):
        assert argv[argv.index(flag) + 1] == value, flag
    train_iter, val_iter, vocab = d2l.load_data_lm("timemachine", 8, 16, False, 20000, 0.1, seed=0)
    steps = len(train_iter)
    assert result["warmup_steps"] == round(30 / 300 * 2 * steps)  # a tenth of the 5-minute budget
    (m1, nats1, t1), (m2, nats2, t2) = result["epochs_curve"]
    assert 0 < m1 < m2 and (t1, t2) == (steps * 128, 2 * steps * 128) == (t1, result["tokens"])
    assert nats2 < nats1 < math.log(len(vocab))
    assert result["curve"] == [result["epochs_curve"][-1]]  # nothing finished by 0.001 min; both by 5
    assert result["train_seconds"] == pytest.approx(m2 * 60)


# ------------------------------------------------------------------ the reference (torch)


def test_reference_eval_matches_one_pass():
    torch = pytest.importorskip("torch")
    from bench.lm_reference import CharLSTM, validation_loss

    torch.manual_seed(0)
    model = CharLSTM(9, 8, 16, dropout=0.5)
    tokens = np.random.default_rng(0).integers(1, 9, 500)
    result = validation_loss(model, tokens, streams=4, num_steps=7)
    assert model.training  # back to training mode
    rows, _ = cut_streams(tokens, 4)
    model.eval()
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(rows[:, :-1].astype(np.int64)))
        direct = torch.nn.functional.cross_entropy(logits.reshape(-1, 9),
                                                   torch.from_numpy(rows[:, 1:].astype(np.int64)).reshape(-1))
    assert result["nats"] == pytest.approx(float(direct), rel=1e-5)


def test_reference_learns():
    pytest.importorskip("torch")
    from bench import lm_reference

    train, val, vocab = bench_lm.load_tokens("timemachine", False, 30000)
    assert vocab == 28 and len(val) == 3000
    result = lm_reference.train(train, val, vocab, 0.04, [0.02, 0.04], emb=16, hidden=32, batch=16,
                                num_steps=32, lr=1e-2, threads=1)
    (m1, _, t1), (m2, nats, t2) = result["curve"]
    assert 0.02 <= m1 < m2 and m2 >= 0.04 and 0 < t1 < t2 == result["tokens"]
    assert nats < math.log(vocab) - 0.35, result["curve"]
    assert result["framework"].startswith("torch ")


def test_cosine_lr():
    pytest.importorskip("torch")
    from bench import lm_reference

    assert lm_reference.cosine_lr(1.0, 0, 100) == 1.0
    assert lm_reference.cosine_lr(1.0, 50, 100) == pytest.approx(0.5)
    assert lm_reference.cosine_lr(1.0, 100, 100) == pytest.approx(0.0)
    assert lm_reference.cosine_lr(1.0, 5, 100, warmup=10) == pytest.approx(0.5)
    schedule = d2l.Schedule(1.0, total=100, warmup=10, decay="cosine")  # d2lrnn's side: the same curve
    for x in (5, 10, 40, 99):
        assert lm_reference.cosine_lr(1.0, x, 100, warmup=10) == pytest.approx(schedule(x))


# ------------------------------------------------------------------ run names, settings, report


def test_parse_run_and_resolve():
    assert parse_run("torch:concise") == ("torch", "concise", {})
    assert parse_run("reference") == ("torch", "reference", {})
    assert parse_run("numpy:scratch:cell=gru,hidden=64,input-dropout=0.2") == (
        "numpy", "scratch", {"cell": "gru", "hidden": 64, "input_dropout": 0.2})
    assert parse_run("reference:emb=128") == ("torch", "reference", {"emb": 128})
    for bad, match in (("jax:scratch", "unknown run"), ("torch:deep", "unknown run"),
                       ("reference:cell=gru", "not key=value with a key of"),
                       ("torch:scratch:emb=3", "not key=value"), ("torch:scratch:hidden=x", "must be a int")):
        with pytest.raises(BenchError, match=match):
            parse_run(bad)
    ts = resolve("tinyshakespeare", "scratch")
    assert (ts["hidden"], ts["batch"], ts["num_steps"], ts["lr"]) == (512, 64, 64, 3e-3)
    assert (ts["dropout"], ts["output_dropout"], ts["input_dropout"], ts["cell"]) == (0.1, 0.1, 0.0, "lstm")
    assert ts["init"] == "uniform" and parse_run("numpy:scratch:init=normal")[2] == {"init": "normal"}
    tm = resolve("timemachine", "reference", {"hidden": 128, "lr": None}, {"dropout": 0.2})
    assert tm == {"emb": 64, "hidden": 128, "layers": 1, "dropout": 0.2, "lr": 3e-3, "weight_decay": 0.0,
                  "warmup": 0.0, "batch": 32, "num_steps": 64, "clip": 1.0, "seed": 0}
    assert bench_lm.default_raw("tinyshakespeare") and not bench_lm.default_raw("timemachine")
    assert bench_lm.eval_points(10, [5, 1, 3]) == [1, 3, 5, 10]
    with pytest.raises(BenchError, match="every time must be in"):
        bench_lm.eval_points(10, [1, 12])


def test_child_command_is_the_exact_run():
    args = bench_lm.parser().parse_args(["--corpus", "timemachine", "--minutes", "10", "--eval-at", "1", "5",
                                         "--hidden", "300"])
    env, argv, command = child_command(args, "torch:scratch:cell=gru,hidden=64", bench_lm.ROOT / ".tox")
    assert env["D2LRNN_BACKEND"] == "torch" and env["OMP_NUM_THREADS"] == "2"
    words = shlex.split(command)
    assert words[:len(env)] == [f"{k}={v}" for k, v in env.items()]
    assert words[len(env):len(env) + 2] == [".tox/torch/bin/python", "bench/bench_lm.py"]
    again = bench_lm.parser().parse_args(words[len(env) + 2:])
    assert again.single == "torch:scratch" and again.label == "torch:scratch:cell=gru,hidden=64"
    assert (again.minutes, again.eval_at, again.raw) == (10, [1, 5, 10], False)
    assert resolve("timemachine", "scratch", vars(again)) == resolve(
        "timemachine", "scratch", vars(args), {"cell": "gru", "hidden": 64})
    _, argv, _ = child_command(args, "torch:train:epochs=13,model=concise", bench_lm.ROOT / ".tox")
    again = bench_lm.parser().parse_args(argv[2:])
    assert again.single == "torch:train" and (again.epochs, again.model) == (13, "concise")
    assert resolve("timemachine", "train", vars(again))["epochs"] == 13
    env, _, command = child_command(args, "reference", bench_lm.ROOT / ".tox")
    assert env["D2LRNN_BACKEND"] == "numpy" and "--single reference" in command and "--emb 64" in command


def _fake_result(args, spec, curve, tps=12345.0):
    backend, kind, overrides = parse_run(spec)
    return {"run": spec, "backend": backend, "kind": kind, "config": resolve(args.corpus, kind, vars(args),
                                                                              overrides),
            "curve": curve, "tokens": curve[-1][2], "tokens_per_s": tps, "raw": False, "vocab_size": 28,
            "train_size": 153522, "val_size": 17058, "threads": 2, "framework": "torch 2.13.0",
            "eval": {"nats": curve[-1][1], "predicted": 17040, "streams": 16, "stream_length": 1066,
                     "left_out": 2, "seconds": 1.0},
            "command": child_command(args, spec, bench_lm.ROOT / ".tox")[2]}


def test_report_writes_table_commands_and_plot(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text("# Results\n\n<!-- section:other -->\nkept\n<!-- /section:other -->\n")
    results_md = (bench_lm.ROOT / "bench" / "RESULTS.md")
    before = results_md.read_bytes() if results_md.exists() else None
    argv = ["--corpus", "timemachine", "--minutes", "10", "--eval-at", "1", "5", "--out", str(out)]
    args = bench_lm.parser().parse_args(argv)
    results = [_fake_result(args, "torch:concise", [[1.01, 1.5, 1000], [5.0, 1.4, 5000], [10.0, 1.3, 9000]]),
               _fake_result(args, "reference", [[1.0, 1.6, 900], [5.02, 1.45, 4500], [10.0, 1.35, 8800]]),
               {"run": "mxnet:scratch", "error": "exit status 1", "command": "MXNET-COMMAND"}]
    body = bench_lm.report(args, results, "python bench/bench_lm.py " + " ".join(argv))
    text = out.read_text()
    assert "<!-- section:other -->\nkept" in text and "<!-- section:lm-timemachine -->" in text
    assert body.strip() in text
    assert "| run | model and training | 1 min | 5 min | 10 min | tokens/s | tokens trained |" in body
    assert f"| 1.500 ({math.exp(1.5):.2f}) | 1.400 ({math.exp(1.4):.2f}) | 1.300 ({math.exp(1.3):.2f}) | " \
           "12,345 | 9,000 |" in body
    assert "| mxnet:scratch | failed (exit status 1) |" in body
    assert "perplexity" in body and "17,040 characters predicted" in body
    assert "python bench/bench_lm.py --corpus timemachine --minutes 10" in body
    for r in results:
        assert f"- {r['run']}: `{r['command']}`" in body
    assert "--single torch:concise" in body and "Machine: " in body and "cores" in body
    assert "![validation loss against training minutes](lm_timemachine.png)" in body
    assert (tmp_path / "lm_timemachine.png").stat().st_size > 1000
    # Written again: the section is replaced, not repeated.
    bench_lm.report(args, results[:1], "again")
    assert out.read_text().count("<!-- section:lm-timemachine -->") == 1 and "kept" in out.read_text()
    assert (results_md.read_bytes() if results_md.exists() else None) == before
    # A `d2lrnn train` row: each cell the last epoch finished by then.
    epochs = [[0.9, 1.7, 100], [4.0, 1.5, 200], [9.5, 1.4, 300]]
    train = dict(_fake_result(args, "torch:train:epochs=3", epochs), epochs_curve=epochs, warmup_steps=12)
    body = bench_lm.report(args, [train, results[1]], "cmd")
    assert (f"| 1.700 ({math.exp(1.7):.2f}) (epoch 1, at 0.90) | 1.500 ({math.exp(1.5):.2f}) (epoch 2, at "
            f"4.00) | 1.400 ({math.exp(1.4):.2f}) (epoch 3, at 9.50) |") in body
    assert "`d2lrnn train` scratch LSTM 1x256 on torch, init uniform" in body and ", 3 epochs;" in body
    assert "each cell is the last epoch finished by that time" in body
    assert bench_lm.plot_label(train) == "d2lrnn train scratch LSTM on torch, per epoch"
    assert bench_lm.plot_label(results[0]) == "d2lrnn concise LSTM on torch"
    book = dict(results[0], config=dict(results[0]["config"], init="normal"))
    assert bench_lm.plot_label(book) == "d2lrnn concise LSTM on torch, init normal"
    assert bench_lm.plot_label(results[1]) == "reference: plain torch nn.LSTM"
    # Two `d2lrnn train` rows of one model kind: the legend tells them apart (one plot had two alike).
    wide = dict(train, run="torch:train:epochs=8,hidden=640",
                config=dict(train["config"], hidden=640, epochs=8))
    decayed = dict(wide, run="torch:train:epochs=8,hidden=640,weight_decay=0.1")
    assert bench_lm.plot_labels([train, wide, results[1], {"run": "x", "error": "exit status 1"}]) == [
        "d2lrnn train scratch LSTM on torch, per epoch (1x256, 3 epochs)",
        "d2lrnn train scratch LSTM on torch, per epoch (1x640, 8 epochs)",
        "reference: plain torch nn.LSTM", None]
    assert bench_lm.plot_labels([wide, decayed]) == [  # the same size and epochs: the run's spec as well
        "d2lrnn train scratch LSTM on torch, per epoch (1x640, 8 epochs): torch:train:epochs=8,hidden=640",
        "d2lrnn train scratch LSTM on torch, per epoch (1x640, 8 epochs): torch:train:epochs=8,hidden=640,"
        "weight_decay=0.1"]
    # Not Time Machine: no perplexity.
    args = bench_lm.parser().parse_args(["--corpus", "tinyshakespeare", "--minutes", "10", "--out", str(out),
                                         "--plot", str(tmp_path / "p.png")])
    body = bench_lm.report(args, [_fake_result(args, "numpy:scratch", [[10.0, 1.61, 100]])], "cmd")
    assert "| 1.610 | 12,345 | 100 |" in body and "(p.png)" in body and (tmp_path / "p.png").exists()


def test_main_refuses_bad_arguments(capsys, tmp_path):
    assert bench_lm.main(["--runs", "jax:scratch", "--out", "/nonexistent/x.md"]) == 2
    assert "unknown run 'jax:scratch'" in capsys.readouterr().err
    assert bench_lm.main(["--minutes", "1", "--eval-at", "2", "--out", "/nonexistent/x.md"]) == 2
    no_tox = ["--runs", "torch:scratch", "--tox", "/nonexistent", "--out", str(tmp_path / "x.md")]
    assert bench_lm.main(no_tox) == 2
    assert "tox --notest -e torch" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--out", "--plot"])
def test_a_missing_output_folder_is_refused_before_any_run_trains(flag, capsys, tmp_path, monkeypatch):
    """Found after the runs, a missing folder lost their minutes of training: it is checked first."""
    monkeypatch.setattr(bench_lm, "run_all", lambda args: pytest.fail("a run started"))
    paths = {"--out": str(tmp_path / "x.md"), "--plot": str(tmp_path / "p.png")}
    paths[flag] = str(tmp_path / "missing" / "file")
    argv = ["--runs", "reference", "--out", paths["--out"], "--plot", paths["--plot"]]
    assert bench_lm.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} {tmp_path / 'missing' / 'file'}: the folder {tmp_path / 'missing'} does not exist" in err
    assert not list(tmp_path.iterdir())


def test_a_plot_folder_takes_the_default_name_and_a_plot_file_needs_an_image_suffix(capsys, tmp_path,
                                                                                 monkeypatch):
    """--plot FOLDER went to FOLDER.png (matplotlib adds the suffix) and the section linked the folder."""
    monkeypatch.setattr(bench_lm, "run_all", lambda args: pytest.fail("a run started"))
    args = bench_lm.parser().parse_args(["--corpus", "timemachine", "--out", str(tmp_path / "x.md"),
                                         "--plot", str(tmp_path)])
    assert bench_lm.output_paths(args) == (tmp_path / "x.md", tmp_path / "lm_timemachine.png")
    assert bench_lm.main(["--runs", "reference", "--out", str(tmp_path / "x.md"), "--plot",
                          str(tmp_path / "curves")]) == 2
    assert (f"--plot {tmp_path / 'curves'}: name a .png or .svg file, or a folder for lm_tinyshakespeare.png"
            in capsys.readouterr().err)
    assert not list(tmp_path.iterdir())
