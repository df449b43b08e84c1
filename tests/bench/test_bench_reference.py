"""bench/reference.py trains the same model as the book, checked against NumPy on each framework.

The reference's weights are set to known values made in NumPy, then:
- step 1's loss equals a NumPy forward from a zero state (same cell equations, the framework's own
  weight layout and gate order converted here, mean cross-entropy over all tokens);
- the output layer moved by exactly ``-lr *`` its NumPy gradient (the update is small enough that
  clipping does not apply, which the size of the whole update shows);
- step 2's loss equals a NumPy forward with the weights read back after step 1, starting from the
  state NumPy reached at the end of batch 1 (the state is carried between batches);
- with large gradients, the update of all weights together has norm ``lr * clip`` (global clipping).
Runs on torch, tensorflow, mxnet, jax and paddle (D2LRNN_BACKEND); the numpy backend has no fused layer.
"""

import ast
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import d2lrnn as d2l
from bench.reference import CELLS, FRAMEWORKS, make_reference

VOCAB, HIDDEN, BATCH, STEPS = 6, 5, 3, 4
LAYER_NAMES = {
    "torch": {"rnn": "torch.nn.RNN", "gru": "torch.nn.GRU", "lstm": "torch.nn.LSTM"},
    "tensorflow": {"rnn": "keras SimpleRNN (tf.function)", "gru": "keras GRU (tf.function)",
                   "lstm": "keras LSTM (tf.function)"},
    "mxnet": {"rnn": "gluon.rnn.RNN (hybridized)", "gru": "gluon.rnn.GRU (hybridized)",
              "lstm": "gluon.rnn.LSTM (hybridized)"},
    "jax": {"rnn": "flax SimpleCell (jax.jit)", "gru": "flax GRUCell (jax.jit)",
            "lstm": "flax OptimizedLSTMCell (jax.jit)"},
    "paddle": {"rnn": "paddle.nn.SimpleRNN", "gru": "paddle.nn.GRU", "lstm": "paddle.nn.LSTM"},
}
#: Flax's Dense names for torch's gate order (GRU r, z, n; LSTM i, f, g, o).
FLAX_GATES = {"rnn": ("",), "gru": ("r", "z", "n"), "lstm": ("i", "f", "g", "o")}


@pytest.fixture
def framework(backend):
    if backend not in FRAMEWORKS:
        pytest.skip(f"the {backend} backend has no fused recurrent layer; the reference is for "
                    f"{', '.join(FRAMEWORKS)}")
    return backend


def known_weights(ref, rnn_std=0.4, dense_std=0.5):
    """Normals from a seeded NumPy generator, in the reference's own shapes: large enough that the
    state carried from the previous batch changes the loss well beyond the tolerance, small
    enough that the gradients' norm stays under 1 (no clipping)."""
    r = np.random.default_rng(0)
    return {name: ((dense_std if name.startswith("dense") else rnn_std)
                   * r.standard_normal(w.shape)).astype(np.float32)
            for name, w in ref.get_weights().items()}


def random_batches(count):
    r = np.random.default_rng(1)
    return [(r.integers(0, VOCAB, (BATCH, STEPS)), r.integers(0, VOCAB, (BATCH, STEPS)))
            for _ in range(count)]


def canonical(framework, cell, w):
    """The framework's weights as x @ Wx + bx, h @ Wh + bh with torch's gate order (GRU r, z, n;
    LSTM i, f, g, o) and logits = h @ Wq + bq, in float64."""
    w = {name: np.asarray(value, np.float64) for name, value in w.items()}
    if framework == "tensorflow":
        Wx, Wh, bias = w["rnn/kernel"], w["rnn/recurrent_kernel"], w["rnn/bias"]
        bx, bh = (bias[0], bias[1]) if cell == "gru" else (bias, np.zeros_like(bias))
        if cell == "gru":  # Keras (reset_after=True): z, r, h; n = tanh(x Wn + bn_x + r (h Un + bn_h))
            order = np.r_[HIDDEN:2 * HIDDEN, 0:HIDDEN, 2 * HIDDEN:3 * HIDDEN]
            Wx, Wh, bx, bh = Wx[:, order], Wh[:, order], bx[order], bh[order]
        return dict(Wx=Wx, Wh=Wh, bx=bx, bh=bh, Wq=w["dense/kernel"], bq=w["dense/bias"])
    if framework == "jax":  # one Dense per gate; a gate's bias is on its input or its recurrent Dense
        def gate(prefix, g, what):
            return w.get(f"rnn/{prefix}{g}/{what}", np.zeros(HIDDEN))

        gates = FLAX_GATES[cell]
        return dict(Wx=np.concatenate([gate("i", g, "kernel") for g in gates], axis=1),
                    Wh=np.concatenate([gate("h", g, "kernel") for g in gates], axis=1),
                    bx=np.concatenate([gate("i", g, "bias") for g in gates]),
                    bh=np.concatenate([gate("h", g, "bias") for g in gates]),
                    Wq=w["dense/kernel"], bq=w["dense/bias"])
    if framework == "paddle":  # torch's names, layout and gate orders; Paddle's Linear keeps (in, out)
        Wx, Wh, bx, bh = (w[name] for name in ("rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                                                "rnn.bias_hh_l0"))
        return dict(Wx=Wx.T, Wh=Wh.T, bx=bx, bh=bh, Wq=w["dense.weight"], bq=w["dense.bias"])
    if framework == "torch":
        names = ("rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0")
    else:
        names = ("rnn.l0_i2h_weight", "rnn.l0_h2h_weight", "rnn.l0_i2h_bias", "rnn.l0_h2h_bias")
    Wx, Wh, bx, bh = (w[name] for name in names)
    return dict(Wx=Wx.T, Wh=Wh.T, bx=bx, bh=bh, Wq=w["dense.weight"].T, bq=w["dense.bias"])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def cell_step(cell, p, x, state):
    """One time step of the cell on inputs x (batch, V); returns the new state (a tuple)."""
    gx, gh = x @ p["Wx"] + p["bx"], state[0] @ p["Wh"] + p["bh"]
    if cell == "rnn":
        return (np.tanh(gx + gh),)
    if cell == "gru":
        r, z = np.split(sigmoid(gx[:, :2 * HIDDEN] + gh[:, :2 * HIDDEN]), 2, axis=1)
        n = np.tanh(gx[:, 2 * HIDDEN:] + r * gh[:, 2 * HIDDEN:])
        return ((1 - z) * n + z * state[0],)
    i, f, g, o = np.split(gx + gh, 4, axis=1)
    c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
    return (sigmoid(o) * np.tanh(c), c)


def numpy_forward(cell, p, X, Y, state):
    """Mean cross-entropy over all tokens, d loss / d logits, the hidden outputs (tokens, h) and
    the final state; tokens in the order (b, t)."""
    onehot = np.eye(VOCAB)
    outputs = []
    for t in range(X.shape[1]):
        state = cell_step(cell, p, onehot[X[:, t]], state)
        outputs.append(state[0])
    H = np.stack(outputs, axis=1).reshape(-1, HIDDEN)
    logits = H @ p["Wq"] + p["bq"]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    labels = Y.reshape(-1)
    loss = -np.mean(np.log(probs[np.arange(labels.size), labels]))
    dlogits = (probs - onehot[labels]) / labels.size
    return loss, dlogits, H, state


def zero_state(cell):
    return tuple(np.zeros((BATCH, HIDDEN)) for _ in range(2 if cell == "lstm" else 1))


def update_norm(before, after):
    return np.sqrt(sum(np.sum((after[n].astype(np.float64) - before[n]) ** 2) for n in before))


@pytest.mark.parametrize("cell", CELLS)
def test_two_steps_match_numpy(framework, cell):
    ref = make_reference(framework, cell, VOCAB, HIDDEN, BATCH)  # lr 1, clip 1: the benchmark's
    assert ref.layer_name == LAYER_NAMES[framework][cell]
    (X1, Y1), (X2, Y2) = random_batches(2)
    w0 = known_weights(ref)
    ref.set_weights(w0)
    p0 = canonical(framework, cell, w0)

    loss1, dlogits, H, state = numpy_forward(cell, p0, X1, Y1, zero_state(cell))
    assert ref.step(ref.to_batch(X1, Y1)) == pytest.approx(loss1, rel=1e-4)

    w1 = ref.get_weights()
    assert update_norm(w0, w1) < 0.9  # below lr * clip: the gradients were not clipped
    p1 = canonical(framework, cell, w1)
    expected_dWq, expected_dbq = -(H.T @ dlogits), -dlogits.sum(axis=0)
    assert np.abs(expected_dWq).max() > 1e-3
    np.testing.assert_allclose(p1["Wq"] - p0["Wq"], expected_dWq, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(p1["bq"] - p0["bq"], expected_dbq, rtol=1e-4, atol=1e-6)
    assert not np.allclose(p1["Wx"], p0["Wx"])  # the recurrent layer is trained too

    loss2, *_ = numpy_forward(cell, p1, X2, Y2, state)  # the state carried over from batch 1
    assert loss2 != pytest.approx(numpy_forward(cell, p1, X2, Y2, zero_state(cell))[0], rel=1e-3)
    assert ref.step(ref.to_batch(X2, Y2)) == pytest.approx(loss2, rel=1e-4)


@pytest.mark.parametrize("cell", CELLS)
def test_large_gradients_are_clipped_to_global_norm(framework, cell):
    lr, clip = 0.5, 0.4
    ref = make_reference(framework, cell, VOCAB, HIDDEN, BATCH, lr=lr, clip=clip)
    weights = known_weights(ref, dense_std=10.0)  # large logits, large gradients everywhere
    ref.set_weights(weights)
    ((X, Y),) = random_batches(1)
    ref.step(ref.to_batch(X, Y))
    assert update_norm(weights, ref.get_weights()) == pytest.approx(lr * clip, rel=1e-4, abs=1e-5)


def test_reference_does_not_use_d2lrnn():
    source = (pathlib.Path(__file__).resolve().parents[2] / "bench" / "reference.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." if node.level else node.module.split(".")[0])
    assert imported <= {"numpy", "torch", "keras", "tensorflow", "mxnet", "jax", "flax", "optax",
                        "paddle"}  # no d2lrnn


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="framework"):
        make_reference("caffe", "gru", VOCAB, HIDDEN, BATCH)
    with pytest.raises(ValueError, match="cell"):
        make_reference("torch", "transformer", VOCAB, HIDDEN, BATCH)


def test_the_gpu_reference_is_torchs_and_jaxs_only():
    # bench/gpu_check.py times torch and JAX on a GPU; another framework's plain loop there is refused
    # before the framework is imported
    with pytest.raises(ValueError, match="the GPU reference runs torch and jax, not 'tensorflow'"):
        make_reference("tensorflow", "rnn", 28, 8, 2, gpu=True)


def test_bench_train_on_a_gpu_says_when_there_is_none():
    # this machine has no GPU: --gpu is refused with the fix, not run on the CPU under the GPU's name
    # (a child process: bench_train.py sets thread variables as it is imported)
    assert d2l.num_gpus() == 0, "the test machines have no GPU"
    script = pathlib.Path(__file__).resolve().parents[2] / "bench" / "bench_train.py"
    run = subprocess.run([sys.executable, str(script), "--gpu", "--seconds", "0.1"], capture_output=True,
                         text=True, env=dict(os.environ, D2LRNN_BACKEND=d2l.backend_name()),
                         timeout=300)  # a hang guard only: it takes about 3 s
    assert run.returncode == 2, run.stderr
    assert f"--gpu: {d2l.backend_name()} sees no GPU here; leave --gpu out" in run.stderr


def test_the_gpu_table_gives_each_row_over_its_plain_loop():
    from bench.gpu_check import table

    rows = [{"backend": "torch", "cell": "rnn", "model": "reference", "tokens_per_sec": 200_000.0},
            {"backend": "torch", "cell": "rnn", "model": "scratch", "tokens_per_sec": 50_000.0},
            {"backend": "torch", "cell": "rnn", "model": "concise", "error": ["cuDNN refused"]},
            {"backend": "torch", "cell": "gru", "model": "scratch", "tokens_per_sec": 1_234.0}]
    lines = table(rows).splitlines()
    assert lines[2] == "| torch | RNN | 200,000 | 50,000 | 0.25x | failed | — |"
    assert lines[3] == "| torch | GRU | not run | 1,234 | — | not run | — |"
    assert lines[4] == "| torch | LSTM | not run | not run | — | not run | — |"
    rows += [{"backend": "torch", "cell": "rnn", "model": "scratch-eager", "tokens_per_sec": 20_000.0}]
    lines = table(rows).splitlines()  # with CUDA graphs off as well: two more columns
    assert lines[0].endswith("| scratch-eager tokens/s | scratch-eager / plain |")
    assert lines[2] == "| torch | RNN | 200,000 | 50,000 | 0.25x | failed | — | 20,000 | 0.10x |"


def test_the_gpu_check_asks_for_autograd_before_timing_plain_loops_without_it(monkeypatch, tmp_path, capsys):
    # a GPU machine's image has PyTorch and JAX but not HIPS autograd, which the plain loops' batches need
    import importlib.util

    from bench import gpu_check

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "autograd" else
                        find_spec(name, *a))
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--out", str(tmp_path), "--skip-smoke"])
    assert exit_.value.code == 2
    assert "install its wheel, or leave the plain loops out with --bench-models scratch concise" in \
        capsys.readouterr().err


def test_bench_train_serves_one_reply_per_block_until_stop():
    import io
    import json

    from bench.blocks import serve_blocks

    ran = []
    commands = io.StringIO("block 0\nblock 0\nstop\nblock 0\n")  # a block of 0 s: its two steps at least
    replies = io.StringIO()
    first, medians, steps = serve_blocks(ran.append, ["a", "b", "c"], warmup=3, commands=commands,
                                         replies=replies)
    lines = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert lines[0]["ready"] is True and lines[0]["first_step_seconds"] == first
    assert [line["steps"] for line in lines[1:]] == [2, 2]  # nothing after stop
    assert (len(medians), steps) == (2, 4)
    assert ran == ["a", "b", "c", "a", "b", "c", "a"]  # the warm-up's 3, then the batches in turn
