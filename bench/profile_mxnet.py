"""Where a training step of the scratch RNN goes on MXNet: time, engine operations and memory.

    cd /work/main && D2LRNN_BACKEND=mxnet PYTHONPATH=. OMP_NUM_THREADS=2 \\
        .tox/mxnet/bin/python bench/profile_mxnet.py [--sections step,ops,micro,shim,settings]

The book's configuration: vocabulary 28, 512 hidden units, batch 32, 35 steps, SGD lr 1, clip 1,
token indices from The Time Machine. Sections (all by default, about a minute):

- ``step``: one training step and its parts (scan forward, scan backward, the graph around the scan,
  clipping and the update), the custom_vjp overhead, and the plain Gluon loop (hybridized
  gluon.rnn.RNN + Dense + Trainer, as bench/reference.py) with its fused kernel alone;
- ``ops``: engine operations per step and the kernel time MXNet's profiler gives each operator;
- ``micro``: single operators at the scan's sizes (push cost, product kernels, bias forms, copies);
- ``shim``: the training step with the shim as it was before (commit b518518) and with each lever;
- ``settings``: child processes, one per process-wide setting (engine, OpenMP, malloc, the old
  custom_vjp): the scratch model's RSS over ``--steps`` steps, then both steps interleaved.

The machine is shared and its speed drifts within seconds, so comparisons run their alternatives
interleaved in rounds inside one process, and report the best round (the code's cost on a quiet
machine) next to the median. Ratios are meaningful within one table, absolute times less so.
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("D2LRNN_BACKEND", "mxnet")
os.environ.setdefault("OMP_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import d2lrnn as d2l  # noqa: E402
from d2lrnn import ops  # noqa: E402
from d2lrnn.backends import mxnet as shim  # noqa: E402
from d2lrnn.models import bptt  # noqa: E402
from d2lrnn.models.rnn import output_layer  # noqa: E402
from d2lrnn.train import grad_clipping, lm_loss, sgd  # noqa: E402

mx, nd, autograd = shim.mx, shim.nd, shim.autograd
VOCAB, HIDDEN, BATCH, STEPS = 28, 512, 32, 35
TOKENS = BATCH * STEPS
SECTIONS = ("step", "ops", "micro", "shim", "settings")


# -- measuring ----------------------------------------------------------------------------------


def rss_mb():
    """The resident set size now, in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb():
    """This process's peak RSS in MB: VmHWM, which (unlike ru_maxrss) a child does not inherit."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def interleaved(cases, rounds=5, reps=3, warmup=1):
    """``{name: (best, median)}`` in ms per call of each ``cases[name]()`` (which syncs itself), the
    cases taking turns: every case runs ``reps`` times in round r before any runs in round r + 1.
    A case made by :func:`per_call` is reported per call of its inner function."""
    times = {name: [] for name in cases}
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    for _ in range(rounds):
        for name, fn in cases.items():
            for _ in range(reps):
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) / getattr(fn, "n", 1))
    return {name: (1e3 * min(t), 1e3 * float(np.median(t))) for name, t in times.items()}


def synced(fn):
    """``fn`` followed by waiting for every queued engine operation."""
    def run():
        fn()
        nd.waitall()
    return run


def per_call(fn, n):
    """``n`` calls of ``fn`` and a waitall, reported per call by :func:`interleaved`."""
    def run():
        for _ in range(n):
            fn()
        nd.waitall()
    run.n = n
    return run


def table(title, rows, header=("", "best", "median")):
    print(f"\n{title}")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  " + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))


def ms(x):
    return f"{x:.2f} ms"


# -- the models ---------------------------------------------------------------------------------


def data():
    d2l.manual_seed(0)
    train_iter, _, vocab = d2l.load_data_lm("timemachine", BATCH, STEPS, False, seed=0, val_fraction=0.1)
    assert len(vocab) == VOCAB
    return list(train_iter)


class Scratch:
    """d2lrnn's scratch model and training step, as bench/bench_train.py runs them."""

    def __init__(self, batches):
        self.batches, self.i = batches, 0
        self.net = d2l.make_model("scratch", VOCAB, HIDDEN)
        self.step_fn = d2l.make_train_step(self.net, 1.0, 1.0)
        self.state = self.net.begin_state(BATCH)

    def step(self):
        X, Y = self.batches[self.i % len(self.batches)]
        self.i += 1
        l, self.net.params, self.state = self.step_fn(self.net.params, X, Y, self.state)
        return float(ops.to_numpy(l))  # the training loop syncs on the loss every step


class Gluon:
    """The plain Gluon loop (as bench/reference.py's GluonReference): hybridized one-hot ->
    gluon.rnn.RNN -> Dense, SoftmaxCrossEntropyLoss, clip_global_norm, Trainer SGD."""

    def __init__(self, batches):
        gluon = mx.gluon

        class LanguageModel(gluon.HybridBlock):
            def __init__(self):
                super().__init__()
                with self.name_scope():
                    self.rnn = gluon.rnn.RNN(HIDDEN, activation="tanh", input_size=VOCAB)
                    self.dense = gluon.nn.Dense(VOCAB, flatten=False, in_units=HIDDEN)

            def hybrid_forward(self, F, X, *state):
                outputs, state = self.rnn(F.one_hot(F.transpose(X), VOCAB), list(state))
                return (self.dense(outputs), *state)

        mx.random.seed(0)
        self.model = LanguageModel()
        self.model.initialize(ctx=mx.cpu())
        self.model.hybridize()
        self.params = list(self.model.collect_params().values())
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(self.model.collect_params(), "sgd", {"learning_rate": 1.0})
        self.state = self.model.rnn.begin_state(batch_size=BATCH, ctx=mx.cpu())
        self.batches = [(nd.array(ops.to_numpy(X), dtype="int64"), nd.array(ops.to_numpy(Y), dtype="int64"))
                        for X, Y in batches]
        self.i = 0

    def step(self):
        X, Y = self.batches[self.i % len(self.batches)]
        self.i += 1
        with autograd.record():
            logits, *state = self.model(X, *self.state)
            loss = self.loss_fn(logits, Y.T).mean()
        loss.backward()
        mx.gluon.utils.clip_global_norm([p.grad() for p in self.params], 1.0)
        self.trainer.step(1)
        self.state = [s.detach() for s in state]
        return float(loss.asscalar())


def scan_functions():
    """The tanh scan's forward and backward (the ``fwd``, ``bwd`` of its custom_vjp)."""
    if hasattr(bptt, "_SCANS"):
        return bptt._SCANS["rnn"]
    return bptt._forward, bptt._backward


def _fwd(net, params, X, state):
    return net.forward(params, X, state, training=True)


def _chain(x, n):
    for _ in range(n):
        x = x * 1.0001
    return x


def _fused_rnn(X):
    """Gluon's fused kernel alone (nd.RNN, oneDNN) on one-hot inputs: forward and backward."""
    params = nd.random.normal(scale=0.01, shape=(HIDDEN * VOCAB + HIDDEN * HIDDEN + 2 * HIDDEN,))
    params.attach_grad()
    inputs = nd.one_hot(nd.array(ops.to_numpy(X).T), VOCAB)
    H0 = nd.zeros((1, BATCH, HIDDEN))

    def run():
        with autograd.record():
            Y = nd.RNN(inputs, params, H0, state_size=HIDDEN, num_layers=1, mode="rnn_tanh")
        Y.backward(nd.ones_like(Y))
    return run


# -- sections -----------------------------------------------------------------------------------


def section_step(batches, rounds):
    """The training step and its parts, each synced, interleaved with the plain Gluon loop."""
    scratch, gluon = Scratch(batches), Gluon(batches)
    net, params = scratch.net, scratch.net.params
    X, Y = batches[0]
    state = net.begin_state(BATCH)
    vag = ops.value_and_grad(lambda p, X, Y, s: (lm_loss(_fwd(net, p, X, s)[0], Y), None), has_aux=True)
    fwd, bwd = scan_functions()
    W_xh, W_hh, b_h, W_hq, b_q = params
    XW = ops.take(W_xh + b_h, ops.transpose(X))
    H0 = state[0]
    (Hs, H_T), residuals = fwd(XW, H0, W_hh)
    dHs, dH_T = nd.random.normal(shape=Hs.shape), nd.zeros_like(H_T)
    grads = vag(params, X, Y, state)[1]

    def rest():  # the graph around the scan (gather, output layer, loss), with the scan as the identity
        leaves = [p.detach() for p in (W_xh, b_h, W_hq, b_q)]
        for p in leaves:
            p.attach_grad()
        with autograd.record():
            xw = ops.take(leaves[0] + leaves[1], ops.transpose(X))  # (steps, batch, hiddens), as Hs
            loss = lm_loss(output_layer(xw, leaves[2], leaves[3]), Y)
        loss.backward()

    def function_overhead(custom):  # 35 elementwise ops forward and backward, in a Function or recorded
        f = ops.custom_vjp(lambda x: ((_chain(x, 35),), None), lambda r, g: (_chain(g, 35),))
        x = H0.detach()
        x.attach_grad()

        def run():
            with autograd.record():
                y = f(x)[0] if custom else _chain(x, 35)
                s = nd.sum(y)
            s.backward()
        return run

    cases = {
        "train step (3 steps synced on the loss)": per_call(scratch.step, 3),
        "  value_and_grad": synced(lambda: vag(params, X, Y, state)),
        "    forward only (not recorded)": synced(lambda: _fwd(net, params, X, state)),
        "      scan forward (fwd)": synced(lambda: fwd(XW, H0, W_hh)),
        "    scan backward (bwd)": synced(lambda: bwd(residuals, dHs, dH_T)),
        "    rest: gather + output + loss, fwd+bwd": synced(rest),
        "  clipping + SGD update": synced(lambda: sgd(params, grad_clipping(grads, 1.0), 1.0)),
        "35 chained ops, recorded, fwd+bwd": synced(function_overhead(False)),
        "the same inside a custom_vjp": synced(function_overhead(True)),
        "Gluon: hybridized RNN+Dense+Trainer step (3 steps)": per_call(gluon.step, 3),
        "  its fused kernel alone: nd.RNN fwd+bwd": synced(_fused_rnn(X)),
    }
    res = interleaved(cases, rounds=rounds)
    rows = [(name, ms(b), ms(m)) for name, (b, m) in res.items()]
    s = res["train step (3 steps synced on the loss)"]
    g = res["Gluon: hybridized RNN+Dense+Trainer step (3 steps)"]
    rows += [("scratch tokens/s", f"{TOKENS / s[0] * 1e3:,.0f}", f"{TOKENS / s[1] * 1e3:,.0f}"),
             ("Gluon tokens/s", f"{TOKENS / g[0] * 1e3:,.0f}", f"{TOKENS / g[1] * 1e3:,.0f}"),
             ("scratch / Gluon", f"{g[0] / s[0]:.2f}x", f"{g[1] / s[1]:.2f}x")]
    table("One training step and its parts (ms per call, interleaved; scan parts called directly)", rows)
    print(f"  autograd.Function registry after these steps: {len(autograd.Function._registry.ref_holder)} "
          "entries (one per Function still alive)")
    return scratch, gluon


def section_ops(scratch, gluon, top=12):
    """Engine operations pushed per step and the kernel time MXNet's profiler gives each operator."""
    rows, tops, n = [], {}, 5
    for name, model in (("scratch", scratch), ("Gluon", gluon)):
        for _ in range(2):
            model.step()
        nd.waitall()
        mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename="/tmp/d2lrnn_mx_profile.json")
        mx.profiler.set_state("run")
        start = time.perf_counter()
        for _ in range(n):
            model.step()
        nd.waitall()
        wall = (time.perf_counter() - start) / n * 1e3
        mx.profiler.set_state("stop")
        stats = json.loads(mx.profiler.dumps(reset=True, format="json"))
        count, kernel_ms, tops[name], api = _engine_ops(stats, n)
        rows.append((name, f"{count:.0f}", f"{api:.0f}", f"{kernel_ms:.1f}", f"{wall:.1f}"))
    table(f"Engine operations per step (MXNet profiler, {n} steps; its wall time includes the profiler's)",
          rows, ("", "engine ops", "C API calls", "kernel ms", "wall ms"))
    for name, per_op in tops.items():
        table(f"{name}: the operators with the most kernel time per step", [
            (k, f"{c:.0f}", f"{t:.2f}", f"{t / c * 1e3:.0f}") for k, c, t in per_op[:top]],
            ("operator", "count", "ms", "us each"))


def _engine_ops(stats, n):
    skip = {"DeleteVariable", "WaitForVar", "pure_python"}
    per_op = {}
    for domain, entries in stats.get("Time", {}).items():
        if domain.startswith("MXNET_C_API"):
            continue
        for name, e in entries.items():
            name = name.lstrip(":")
            if name in skip or name.startswith("_backward_CustomFunction"):
                continue  # waits, and the Function's own op (whose time contains the ops it pushes)
            c, t = per_op.get(name, (0, 0.0))
            per_op[name] = (c + e["Count"] / n, t + e["Total"] / n)
    top = sorted(((k, c, t) for k, (c, t) in per_op.items()), key=lambda r: -r[2])
    api = sum(e["Count"] for d, entries in stats.get("Time", {}).items() if d.startswith("MXNET_C_API")
              for k, e in entries.items() if not k.startswith("MXNet C API")) / n
    return sum(c for c, _ in per_op.values()), sum(t for _, t in per_op.values()), top, api


def section_micro(rounds):
    """Single operators at the scan's sizes: push cost, product kernels, bias forms, copies, sums."""
    r = np.random.default_rng(0)

    def a(*shape):
        return nd.array(r.standard_normal(shape).astype(np.float32))

    x, W, Bm, bv, one = a(BATCH, HIDDEN), a(HIDDEN, HIDDEN), a(BATCH, HIDDEN), nd.zeros(HIDDEN), nd.ones(1)
    XW, H_flat = a(STEPS, BATCH, HIDDEN), a(STEPS * BATCH, HIDDEN)
    W_hq, dO = a(HIDDEN, VOCAB), a(TOKENS, VOCAB)
    xs = [x + i for i in range(STEPS)]
    logits, labels = a(TOKENS, VOCAB), nd.array(r.integers(0, VOCAB, TOKENS), dtype="int64")

    def recorded(f, *inputs):  # forward and backward of f(*inputs) with the given output gradient
        leaves = [i.copy() for i in inputs]
        for i in leaves:
            i.attach_grad()

        def run():
            with autograd.record():
                y = f(*leaves)
            y.backward(dO if y.shape == dO.shape else nd.ones_like(y))
        return run

    def ce_before(z):
        return -nd.pick(shim.log_softmax(z, -1), labels, axis=-1)

    n, k = 40, 4
    cases = {
        "1-element add (the cost of a push)": per_call(lambda: one + one, n),
        "FullyConnected 32x512x512 (oneDNN)": per_call(
            lambda: nd.FullyConnected(x, W, num_hidden=HIDDEN, no_bias=True), n),
        "  + vector bias (in the op)": per_call(lambda: nd.FullyConnected(x, W, bv, num_hidden=HIDDEN), n),
        "  + matrix bias (FC, then add)": per_call(
            lambda: nd.FullyConnected(x, W, num_hidden=HIDDEN, no_bias=True) + Bm, n),
        "dot 32x512x512 (OpenBLAS)": per_call(lambda: nd.dot(x, W, transpose_b=True), n),
        "  + matrix bias (linalg.gemm, one op)": per_call(
            lambda: nd.linalg.gemm(x, W, Bm, transpose_b=True), n),
        "  + matrix bias (dot, then add)": per_call(lambda: nd.dot(x, W, transpose_b=True) + Bm, n),
        "tanh (Activation)": per_call(lambda: nd.Activation(x, act_type="tanh"), n),
        "tanh_grad: _backward_tanh (one op)": per_call(lambda: nd._internal._backward_tanh(Bm, x), n),
        "tanh_grad: dY * (1 - Y * Y) (three ops)": per_call(lambda: Bm * (1.0 - x * x), n),
        "unstack 35 steps: nd.split": per_call(
            lambda: nd.split(XW, num_outputs=STEPS, axis=0, squeeze_axis=True), k),
        "unstack 35 steps: views (x._at(t))": per_call(lambda: [XW._at(t) for t in range(STEPS)], k),
        "stack 35 steps (nd.stack)": per_call(lambda: nd.stack(*xs), k),
        "transpose 1120x512": per_call(lambda: nd.transpose(H_flat), k),
        "dW 512x1120x512: FC of two transposes": per_call(
            lambda: nd.FullyConnected(nd.transpose(H_flat), nd.transpose(H_flat), num_hidden=HIDDEN,
                                      no_bias=True), k),
        "dW 512x1120x512: dot of a transpose": per_call(lambda: nd.dot(nd.transpose(H_flat), H_flat), k),
        "output layer 1120x512x28 fwd+bwd: FC": per_call(recorded(
            lambda h, w: nd.FullyConnected(h, nd.transpose(w), num_hidden=VOCAB, no_bias=True),
            H_flat, W_hq), k),
        "output layer 1120x512x28 fwd+bwd: dot": per_call(
            recorded(lambda h, w: nd.dot(h, w), H_flat, W_hq), k),
        "sum of 512x512: nd.sum": per_call(lambda: nd.sum(W), k),
        "sum of 512x512: shim.sum (products with ones)": per_call(lambda: shim.sum(W), k),
        "cross-entropy 1120x28 fwd+bwd: before": per_call(recorded(ce_before, logits), k),
        "cross-entropy 1120x28 fwd+bwd: shim now": per_call(
            recorded(lambda z: shim.softmax_cross_entropy(z, labels), logits), k),
    }
    res = interleaved(cases, rounds=rounds, reps=2)
    flops = 2 * BATCH * HIDDEN * HIDDEN
    rows = [(name, f"{b * 1e3:.0f} us", f"{m * 1e3:.0f} us",
             f"{flops / (b * 1e-3) / 1e9:.0f}" if "32x512x512" in name else "")
            for name, (b, m) in res.items()]
    table("Single operators, per call (interleaved; best and median of rounds)", rows,
          ("", "best", "median", "GFLOP/s"))


# The shim's functions as they were before this profile (commit b518518), to compare against.


def _unstack_split(x, axis=0):
    axis = shim._axis(x, axis)
    n = x.shape[axis]
    if n == 1:
        return [x.squeeze(axis=axis)]
    return list(nd.split(x, num_outputs=n, axis=axis, squeeze_axis=True))


def _matmul_fc(a, b):
    if a.ndim == 3 and b.ndim == 3:
        return nd.batch_dot(a, b)
    if a.ndim == 2 and b.ndim == 2:
        return nd.FullyConnected(a, nd.transpose(b), num_hidden=b.shape[1], no_bias=True)
    return nd.dot(a, b)


def _linear_fc(X, W, b=None):
    if b is not None and b.ndim == 1:
        return nd.FullyConnected(X, W, b, num_hidden=W.shape[0])
    Y = nd.FullyConnected(X, W, num_hidden=W.shape[0], no_bias=True)
    return Y if b is None else Y + b


def _sum_reduce(x, axis=None, keepdims=False):
    return shim._reduce(nd.sum, x, axis, keepdims)


def _softmax_cross_entropy_before(logits, labels):
    return -nd.pick(shim.log_softmax(logits, -1), labels.reshape((-1,)), axis=-1)


def _custom_vjp_keeping_outputs(fwd, bwd):
    """custom_vjp as it was: the Function keeps the residuals as fwd returned them, the outputs'
    recorded nodes included, and those hold the Function: a reference cycle through C++."""
    class Function(autograd.Function):
        def forward(self, *args):
            outputs, self.residuals = fwd(*args)
            return tuple(outputs)

        def backward(self, *gs):
            return tuple(bwd(self.residuals, *gs))

    def call(*args):
        if autograd.is_recording():
            args = [a if shim._in_graph(a) else shim._leaf(a) for a in args]
        return Function()(*args)

    return call


BEFORE = {"unstack": _unstack_split, "matmul": _matmul_fc, "linear": _linear_fc, "sum": _sum_reduce,
          "softmax_cross_entropy": _softmax_cross_entropy_before}


def section_shim(batches, rounds):
    """The training step with the shim as it was, with each lever alone, and as it is: interleaved."""
    variants = {
        "before (FC products, nd.split, nd.sum, 2-broadcast CE)": BEFORE,
        "  + unstack as views": dict(BEFORE, unstack=shim.unstack),
        "  + OpenBLAS products (linear, matmul)": dict(BEFORE, linear=shim.linear, matmul=shim.matmul),
        "  + sum as products with ones": dict(BEFORE, sum=shim.sum),
        "  + cross-entropy picked before the 2nd subtraction": dict(
            BEFORE, softmax_cross_entropy=shim.softmax_cross_entropy),
        "shim as it is (all of them)": {},
    }
    scratch = Scratch(batches)
    cases = {name: _patched(patch, per_call(scratch.step, 3)) for name, patch in variants.items()}
    res = interleaved(cases, rounds=rounds, reps=1)
    base = res[next(iter(res))]
    rows = [(name, ms(b), ms(m), f"{TOKENS / b * 1e3:,.0f}", f"{base[0] / b:.2f}x")
            for name, (b, m) in res.items()]
    table(f"Training step with the shim's levers (interleaved; ms per step, 3 steps synced on the loss; "
          f"products: {'OpenBLAS' if shim.BLAS_PRODUCTS else 'oneDNN'} on this CPU)", rows,
          ("", "best", "median", "tokens/s", "vs before"))


def _patched(patch, fn):
    def run():
        with _patch(shim, patch):
            return fn()
    run.n = getattr(fn, "n", 1)
    return run


@contextlib.contextmanager
def _patch(module, attrs):
    saved = {k: getattr(module, k) for k in attrs}
    for k, v in attrs.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


SETTINGS = {
    "as started": {},
    "custom_vjp as before (residuals kept with their nodes)": {"PROFILE_MXNET_LEAKY": "1"},
    "MXNET_ENGINE_TYPE=NaiveEngine": {"MXNET_ENGINE_TYPE": "NaiveEngine"},
    "MXNET_EXEC_BULK_EXEC_TRAIN=0": {"MXNET_EXEC_BULK_EXEC_TRAIN": "0"},
    "MXNET_CPU_WORKER_NTHREADS=2": {"MXNET_CPU_WORKER_NTHREADS": "2"},
    "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"},
    "OMP_WAIT_POLICY=passive": {"OMP_WAIT_POLICY": "passive"},
    "D2LRNN_MALLOC=default (glibc trims and unmaps)": {"D2LRNN_MALLOC": "default"},
}
DEFAULT_SETTINGS = ("as started", "custom_vjp as before (residuals kept with their nodes)")


def section_settings(steps, names):
    """Per process-wide setting, a child process: the scratch model alone for ``steps`` steps (its
    RSS), then the scratch and Gluon steps interleaved (their speed in that process)."""
    rows = []
    for name in names:
        try:
            out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(steps)],
                                 env=dict(os.environ, **SETTINGS[name]), capture_output=True, text=True,
                                 timeout=120)
        except subprocess.TimeoutExpired:
            rows.append((name, "no result in 120 s (hung)", "", "", "", "", "", "", ""))
            continue
        if out.returncode:
            last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
            rows.append((name, "failed: " + last[:60], "", "", "", "", "", "", ""))
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((name, f"{r['rss_start']:.0f}", f"{r['rss_early']:.0f}", f"{r['rss_end']:.0f}",
                     f"{r['peak']:.0f}", str(r["functions"]), ms(r["scratch_ms"]), ms(r["gluon_ms"]),
                     f"{r['gluon_ms'] / r['scratch_ms']:.2f}x"))
    table(f"Process-wide settings, one child process each: the scratch model's RSS over {steps} steps (MB), "
          "then both steps interleaved (best)", rows,
          ("", "RSS before", "after 5 steps", f"after {steps}", "peak", "Functions alive", "scratch",
           "Gluon", "ratio"))


def child(steps):
    if os.environ.get("PROFILE_MXNET_LEAKY"):
        shim.custom_vjp = _custom_vjp_keeping_outputs
    batches = data()
    start_rss = rss_mb()
    scratch = Scratch(batches)
    early = None
    for i in range(steps):
        scratch.step()
        if i == 4:
            early = rss_mb()
    nd.waitall()
    result = {"rss_start": start_rss, "rss_early": early, "rss_end": rss_mb(), "peak": peak_rss_mb(),
              "functions": len(autograd.Function._registry.ref_holder)}
    gluon = Gluon(batches)
    res = interleaved({"scratch": per_call(scratch.step, 3), "gluon": per_call(gluon.step, 3)},
                      rounds=4, reps=1)
    result.update(scratch_ms=res["scratch"][0], gluon_ms=res["gluon"][0])
    print(json.dumps(result))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="comma-separated: " + ",".join(SECTIONS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30, help="steps of the scratch model per setting")
    parser.add_argument("--settings", default=",".join(DEFAULT_SETTINGS),
                        help="for the settings section, comma-separated, from: " + "; ".join(SETTINGS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.steps)
    sections = args.sections.split(",")
    print(f"MXNet {mx.__version__}, {os.cpu_count()} cores ({shim._cpu_vendor() or 'unknown vendor'}), "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"engine {os.environ.get('MXNET_ENGINE_TYPE', 'ThreadedEnginePerDevice')}, "
          f"load average {os.getloadavg()[0]:.1f}")
    batches = data()
    if "step" in sections or "ops" in sections:
        scratch, gluon = section_step(batches, args.rounds)
        if "ops" in sections:
            section_ops(scratch, gluon)
    if "micro" in sections:
        section_micro(args.rounds)
    if "shim" in sections:
        section_shim(batches, args.rounds + 1)
    if "settings" in sections:
        section_settings(args.steps, args.settings.split(","))
    print(f"\npeak RSS of this process: {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
