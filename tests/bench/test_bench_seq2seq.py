"""bench/bench_seq2seq.py and bench/seq2seq_reference.py: the reference trains the same model as d2lrnn,
and the benchmark measures and reports on a tiny configuration.

- d2lrnn's seq2seq loss (scratch and concise) equals the model written out in NumPy (float64): GRU
  layers of the reset-after form, the context concatenated at every decoder step, teacher forcing,
  cross-entropy per valid target token (every backend);
- on torch, tensorflow and mxnet, the framework's plain reference loaded with d2lrnn's weights
  (the book's per-gate matrices packed into the layer's own layout and gate order) computes the
  same loss on the same batch to 1e-5, also as the loss its training step returns, and its steps
  learn;
- the benchmark's rows, table, target line and section (written to a temporary file, never to
  bench/RESULTS.md, keeping the file's other sections), in this process and through the driver's
  fresh processes of this interpreter.
The reference tests exist only on the backends that have a reference; nothing here is skipped.
"""

import json
import sys

import numpy as np
import pytest

import d2lrnn as d2l
from bench import bench_seq2seq
from bench.results import section, sections
from bench.seq2seq_reference import FRAMEWORKS, make_seq2seq_reference
from d2lrnn import ops
from d2lrnn.seq2seq.train import seq2seq_objective

SRC_V, TGT_V, EMBED, HIDDEN, LAYERS, BATCH, STEPS, BOS = 7, 9, 4, 5, 2, 3, 6, 2
GRU_NAMES = ("W_xz", "W_hz", "b_z", "W_xr", "W_hr", "b_r", "W_xh", "W_hh", "b_h", "b_hh")
TINY = {"embed_size": 8, "num_hiddens": 8, "num_layers": 2, "dropout": 0.2, "batch_size": 16, "num_steps": 6,
        "lr": 0.002, "clip": 1.0, "warmup": 1, "steps": 3, "num_examples": 200}
BACKEND = d2l.backend_name()


def d2lrnn_net(rnn, std=0.5):
    """d2lrnn's model with every parameter (biases too) drawn from a seeded NumPy generator, and the
    parameters as ``{name: float64 array}``."""
    net = d2l.make_seq2seq(SRC_V, TGT_V, EMBED, HIDDEN, LAYERS, 0.0, rnn=rnn)
    r = np.random.default_rng(0)
    values = [(std * r.standard_normal(ops.shape(p))).astype(np.float32) for p in net.params]
    net.params = [ops.from_numpy(v) for v in values]
    return net, {name: v.astype(np.float64) for name, v in zip(net.param_names, values)}


def random_batch():
    """(X, X_valid_len, Y, Y_valid_len): padded rows with valid lengths from 1 to STEPS."""
    r = np.random.default_rng(1)
    X, Y = r.integers(0, SRC_V, (BATCH, STEPS)), r.integers(0, TGT_V, (BATCH, STEPS))
    return X, np.array([STEPS, 3, 1]), Y, np.array([2, STEPS, 4])


def d2lrnn_loss(net, batch):
    objective = seq2seq_objective(net, BOS, training=False)
    loss, _ = objective(net.params, *(ops.from_numpy(a) for a in batch))
    return float(ops.to_numpy(loss))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def slot(named, side, layer):
    prefix = f"{side}.{f'l{layer}.' if layer else ''}"
    return {name: named[prefix + name] for name in GRU_NAMES}


def gru_layer(inputs, H, p):
    """The reset-after GRU over (steps, batch, inputs) from H: (all states, the last)."""
    outputs = []
    for x in inputs:
        Z = sigmoid(x @ p["W_xz"] + H @ p["W_hz"] + p["b_z"])
        R = sigmoid(x @ p["W_xr"] + H @ p["W_hr"] + p["b_r"])
        H_tilde = np.tanh(x @ p["W_xh"] + p["b_h"] + R * (H @ p["W_hh"] + p["b_hh"]))
        H = Z * H + (1 - Z) * H_tilde
        outputs.append(H)
    return np.stack(outputs), H


def numpy_loss(named, batch):
    """The model written out in NumPy: the loss per valid target token with teacher forcing."""
    X, _, Y, Y_valid_len = batch
    inputs, state = named["encoder.embedding"][X.T], []
    for layer in range(LAYERS):
        inputs, H = gru_layer(inputs, np.zeros((BATCH, HIDDEN)), slot(named, "encoder", layer))
        state.append(H)
    dec_X = np.concatenate([np.full((BATCH, 1), BOS), Y[:, :-1]], 1)
    embs = named["decoder.embedding"][dec_X.T]
    inputs = np.concatenate([embs, np.broadcast_to(state[-1], (STEPS, BATCH, HIDDEN))], 2)
    for layer in range(LAYERS):
        inputs, _ = gru_layer(inputs, state[layer], slot(named, "decoder", layer))
    logits = inputs @ named["decoder.W_hq"] + named["decoder.b_q"]  # (steps, batch, vocab)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    losses = -np.take_along_axis(logp, Y.T[..., None], -1)[..., 0].T  # (batch, steps)
    mask = np.arange(STEPS)[None, :] < Y_valid_len[:, None]
    return (losses * mask).sum() / mask.sum()


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
def test_d2lrnn_loss_is_the_model_written_out(rnn):
    net, named = d2lrnn_net(rnn)
    batch = random_batch()
    expected = numpy_loss(named, batch)
    assert d2lrnn_loss(net, batch) == pytest.approx(expected, rel=1e-5)
    # padding counts for nothing, and the context matters
    X, Xv, Y, Yv = batch
    assert numpy_loss(named, (X, Xv, np.where(np.arange(STEPS) >= Yv[:, None], 0, Y), Yv)) == \
        pytest.approx(expected, rel=1e-12)
    assert numpy_loss(named, ((X + 1) % SRC_V, Xv, Y, Yv)) != pytest.approx(expected, rel=1e-3)


def reference_weights(framework, named):
    """d2lrnn's parameters (book layout: per-gate (inputs, hiddens) matrices) in the reference's names,
    layout and gate order. d2lrnn's GRU has a recurrent bias for the candidate only (b_hh): the
    layers' recurrent biases of the two gates are zero."""
    order = "zrh" if framework == "tensorflow" else "rzh"
    out = {}
    for side, short in (("encoder", "enc"), ("decoder", "dec")):
        emb = named[f"{side}.embedding"]
        name = f"{short}_embedding/embeddings" if framework == "tensorflow" else f"{short}_embedding.weight"
        out[name] = emb
        for layer in range(LAYERS):
            p = slot(named, side, layer)
            W_x = np.concatenate([p[f"W_x{g}"] for g in order], 1)
            W_h = np.concatenate([p[f"W_h{g}"] for g in order], 1)
            b_x = np.concatenate([p[f"b_{g}"] for g in order])
            b_h = np.concatenate([p["b_hh"] if g == "h" else np.zeros(HIDDEN) for g in order])
            if framework == "tensorflow":
                out.update({f"{short}_rnn{layer}/kernel": W_x, f"{short}_rnn{layer}/recurrent_kernel": W_h,
                            f"{short}_rnn{layer}/bias": np.stack([b_x, b_h])})
            elif framework == "torch":
                out.update({f"{short}_rnn.weight_ih_l{layer}": W_x.T,
                            f"{short}_rnn.weight_hh_l{layer}": W_h.T,
                            f"{short}_rnn.bias_ih_l{layer}": b_x, f"{short}_rnn.bias_hh_l{layer}": b_h})
            else:
                out.update({f"{short}_rnn.l{layer}_i2h_weight": W_x.T,
                            f"{short}_rnn.l{layer}_h2h_weight": W_h.T,
                            f"{short}_rnn.l{layer}_i2h_bias": b_x, f"{short}_rnn.l{layer}_h2h_bias": b_h})
    W_hq, b_q = named["decoder.W_hq"], named["decoder.b_q"]
    if framework == "tensorflow":
        out.update({"dense/kernel": W_hq, "dense/bias": b_q})
    else:
        out.update({"dense.weight": W_hq.T, "dense.bias": b_q})
    return out


def make_reference(lr=0.002, dropout=0.0):
    return make_seq2seq_reference(BACKEND, SRC_V, TGT_V, EMBED, HIDDEN, LAYERS, dropout, BOS, lr=lr, clip=1.0)


def test_reference_refuses_unknown_frameworks():
    with pytest.raises(ValueError, match="framework"):
        make_seq2seq_reference("jax", SRC_V, TGT_V, EMBED, HIDDEN, LAYERS, 0.0, BOS)


if BACKEND in FRAMEWORKS:  # the reference tests, on the backends that have one

    @pytest.mark.parametrize("rnn", ["scratch", "concise"])
    def test_reference_computes_d2lrnn_loss_from_the_same_weights(rnn):
        net, named = d2lrnn_net(rnn)
        ref = make_reference()
        weights = reference_weights(BACKEND, named)
        assert sorted(weights) == sorted(ref.get_weights())  # every weight of the reference is set
        ref.set_weights(weights)
        batch = ref.to_batch(*random_batch())
        expected = d2lrnn_loss(net, random_batch())
        assert ref.loss(batch) == pytest.approx(expected, rel=1e-5)
        assert ref.step(batch) == pytest.approx(expected, rel=1e-5)  # training mode, dropout 0: the same
        after = ref.get_weights()
        assert all(not np.allclose(after[name], weights[name]) for name in after if "embedding" not in name)
        assert ref.loss(batch) < expected

    def test_reference_steps_learn():
        ref = make_reference(lr=0.03, dropout=0.2)
        batch = ref.to_batch(*random_batch())
        first = ref.loss(batch)
        losses = [ref.step(batch) for _ in range(40)]
        assert np.isfinite(losses).all() and ref.loss(batch) < 0.5 * first

    def test_reference_rows_in_process():
        rows = [bench_seq2seq.measure(model, TINY, framework=BACKEND) for model in ("scratch", "reference")]
        assert [r["backend"] for r in rows] == [BACKEND, BACKEND]
        assert rows[0]["tokens_timed"] == rows[1]["tokens_timed"]  # the same batches
        assert all(r["tokens_per_sec"] > 0 and r["steps_timed"] == TINY["steps"] for r in rows)
        ratios = bench_seq2seq.vs_reference(rows)
        expected = rows[0]["tokens_per_sec"] / rows[1]["tokens_per_sec"]
        assert ratios[BACKEND, "scratch"] == pytest.approx(expected)


def test_rows_count_target_tokens_of_the_timed_batches():
    row = bench_seq2seq.measure("concise", TINY)
    batches, info, _ = bench_seq2seq.load_batches(TINY)
    start, stop = TINY["warmup"], TINY["warmup"] + TINY["steps"]
    assert row["tokens_timed"] == sum(int(b[3].sum()) for b in batches[start:stop])
    assert all(len(b[0]) == TINY["batch_size"] for b in batches)  # full batches only: one shape
    assert (row["backend"], row["model"], row["steps_timed"]) == (BACKEND, "concise", TINY["steps"])
    assert row["tgt_vocab"] == info["tgt_vocab"] and row["bos"] == 2
    assert np.isfinite([row["first_loss"], row["last_loss"]]).all()


def test_time_steps_cycles_and_counts():
    seen = []
    times, tokens, _, losses = bench_seq2seq.time_steps(lambda b: seen.append(b) or float(b), [0, 1, 2],
                                                        [10, 20, 30], warmup=2, steps=4)
    assert seen == [0, 1, 2, 0, 1, 2] and losses == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert len(times) == 4 and tokens == 30 + 10 + 20 + 30


def fake_row(backend, model, tokens_per_sec, **extra):
    return {"backend": backend, "model": model, "tokens_per_sec": tokens_per_sec, "ms_per_step": 100.0,
            "steps_timed": 100, "tokens_timed": 35000, "warmup_seconds": 1.5, "first_loss": 8.1,
            "last_loss": 5.0, "peak_rss_mb": 400.0, "train_pairs": 16259, "src_vocab": 2196,
            "tgt_vocab": 3324, "bos": 2, **extra}


def test_best_of_rounds_ratios_and_target():
    rounds = [fake_row("torch", "scratch", 3000.0, peak_rss_mb=500.0), fake_row("torch", "scratch", 3300.0)]
    best = bench_seq2seq.best_of(rounds)
    assert (best["tokens_per_sec"], best["slowest_round"], best["peak_rss_mb"], best["rounds"]) == \
        (3300.0, 3000.0, 500.0, 2)
    rows = [best, fake_row("torch", "reference", 3000.0), fake_row("numpy", "scratch", 2000.0)]
    assert bench_seq2seq.vs_reference(rows) == {("torch", "scratch"): pytest.approx(1.1)}
    assert bench_seq2seq.target_line(rows).endswith("loop: 1.10x yes")
    rows[0] = fake_row("torch", "scratch", 2700.0)
    assert bench_seq2seq.target_line(rows).endswith(": 0.90x no")
    assert bench_seq2seq.target(rows[1:]) == (bench_seq2seq.TARGET, "not measured", None)


def test_issue_33_lines_compare_each_backends_faster_model_and_memory():
    rows = [fake_row("torch", "scratch", 3000.0, peak_rss_mb=540.0), fake_row("torch", "concise", 4000.0),
            fake_row("torch", "reference", 3800.0, peak_rss_mb=500.0),
            fake_row("mxnet", "scratch", 1500.0, peak_rss_mb=900.0), fake_row("mxnet", "concise", 2100.0),
            fake_row("mxnet", "reference", 6000.0, peak_rss_mb=600.0)]
    speed, memory = bench_seq2seq.issue_33_lines(rows)
    # each backend by its faster d2lrnn model; the plain loops are not d2lrnn's rows
    assert speed.endswith("over torch's 4,000 tokens/s: mxnet 0.53 (concise), torch 1.00 (concise) yes")
    assert memory.endswith("mxnet concise 0.67x, mxnet scratch 1.50x, torch concise 0.80x, "
                           "torch scratch 1.08x; worst mxnet scratch no")
    rows[4] = fake_row("mxnet", "concise", 1900.0)
    assert bench_seq2seq.issue_33_lines(rows)[0].endswith("mxnet 0.47 (concise), torch 1.00 (concise) no")
    assert bench_seq2seq.issue_33_lines(rows[:3]) == [
        "Target (issue 33): every backend within 2x of the fastest: fewer than two backends measured",
        "Target (issue 33): peak RSS <= 1.2x the plain loop's: torch concise 0.80x, torch scratch 1.08x; "
        "worst torch scratch yes"]


def test_report_table_and_section(tmp_path):
    rows = [fake_row("numpy", "concise", 2000.0), fake_row("torch", "scratch", 3300.0),
            fake_row("torch", "concise", 2400.0), fake_row("torch", "reference", 3000.0),
            fake_row("mxnet", "scratch", 900.0)]
    text = bench_seq2seq.report(rows, bench_seq2seq.defaults(), 2, 2, "python bench/bench_seq2seq.py", 11.6)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(rows)
    cells = {(c[1], c[2]): c for c in ([x.strip() for x in line.split("|")] for line in table[1:])}
    assert cells["torch", "scratch"][3] == "d2lrnn GRU from scratch (hand-written BPTT)"
    assert cells["torch", "scratch"][4] == "3,300" and cells["torch", "scratch"][7] == "1.10x"
    assert cells["torch", "concise"][3] == "torch.nn.GRU through d2lrnn"
    assert cells["torch", "concise"][7] == "0.80x"
    assert cells["torch", "reference"][3].startswith("plain loop: nn.Embedding + nn.GRU + nn.Linear")
    assert cells["torch", "reference"][7] == "1 (reference)"
    assert cells["numpy", "concise"][3] == "d2lrnn GRU from scratch (NumPy has no layer)"
    assert cells["mxnet", "scratch"][7] == cells["numpy", "concise"][7] == "-"  # no reference measured
    assert ("Target (issue 14): torch scratch >= 1.0x the plain torch nn.Embedding + nn.GRU + nn.Linear "
            "loop: 1.10x yes") in text
    assert "all English-French training pairs (16,259 training pairs" in text and "took 12 minutes" in text
    assert "\n\nTarget (issue 33): every backend within 2x of the fastest: each backend's faster model " \
        "over torch's 3,300 tokens/s: mxnet 0.27 (scratch), numpy 0.61 (concise), torch 1.00 (scratch) " \
        "no\n\nTarget (issue 33): peak RSS <= 1.2x" in text

    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\nkept text\n\n" + section("lm-notes", "notes by hand"))
    bench_seq2seq.write_section(bench_seq2seq.SECTION, text, out)
    bench_seq2seq.write_section(bench_seq2seq.SECTION, text.replace("1.10x yes", "1.20x yes"), out)
    written = out.read_text()
    assert written.startswith("# Benchmark results\n\nkept text\n") and "notes by hand" in written
    assert list(sections(written)) == ["lm-notes", "seq2seq-speed"]
    assert written.count("Target (issue 14)") == 1
    assert "1.20x yes" in written


def test_driver_runs_fresh_processes_and_writes_the_section(tmp_path, capsys):
    out = tmp_path / "RESULTS.md"
    out.write_text(section("other", "someone else's"))
    flags = [arg for name, value in TINY.items() for arg in ("--" + name.replace("_", "-"), str(value))]
    # One child process: the reference's rows are made in this process above (a second child would
    # import the framework again for nothing the driver does differently).
    rows = bench_seq2seq.main([*flags, "--rounds", "1", "--backends", BACKEND, "--models", "scratch",
                               "--python", sys.executable, "--threads", "1", "--out", str(out)])
    assert [(r["backend"], r["model"]) for r in rows] == [(BACKEND, "scratch")]
    assert rows[0]["config"] == TINY and rows[0]["tokens_timed"] > 0
    written = out.read_text()
    assert "someone else's" in written and "seq2seq-speed" in sections(written)
    how = "MXNet's autograd over the scans" if BACKEND == "mxnet" else "hand-written BPTT"
    assert f"| {BACKEND} | scratch | d2lrnn GRU from scratch ({how}) |" in written
    assert "--num-examples 200" in written and "first 200 English-French pairs" in written
    target = bench_seq2seq.target_line(rows)
    assert target in written and target.endswith("not measured")
    assert "round 1/1" in capsys.readouterr().err


def test_child_prints_one_json_row_and_its_profile(capfd):
    bench_seq2seq.main(["--single", "scratch", "--backend", BACKEND, "--threads", "1", "--profile",
                        *[a for n, v in TINY.items() for a in ("--" + n.replace("_", "-"), str(v))]])
    out, err = capfd.readouterr()
    row = json.loads(out.strip().splitlines()[-1])
    assert (row["backend"], row["model"], row["config"]) == (BACKEND, "scratch", TINY)
    assert f"{BACKEND} scratch: 3 steps profiled" in err
    assert ("aten::mm" if BACKEND == "torch" else "function calls") in err
