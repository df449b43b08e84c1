"""What only the MXNet backend does: on MXNet's CPU build it starts MXNet's engine as ``NaiveEngine``
(operations on the caller's thread) unless the user chose an engine, and leaves the variable unset after;
Adam's update runs as one cached graph.

Checked in fresh interpreters (MXNet reads the setting once, when its engine starts), where mxnet is
installed. Which engine runs shows in where a ``Function``'s backward is called: on the caller's thread
under the naive engine, on a worker thread under the threaded one.

The hand-written scans' forward passes (``d2lrnn/models/bptt.py``) run as one cached graph per input signature
(``d2lrnn/backends/_mxnet_graphs.py``), with the bits of the same operators run one by one.
"""

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import d2lrnn as d2l
from tests.conftest import HANG_GUARD_SECONDS, ROOT

pytest.importorskip("mxnet", reason="the mxnet backend's own behaviour; mxnet is installed in the mxnet env")

SCRIPT = """
import json, os, sys, threading
import d2lrnn as d2l
d2l.set_backend("mxnet")
d2l.ones((1,))  # loads the backend, which imports MXNet
import mxnet as mx

threads = []


class Double(mx.autograd.Function):
    def forward(self, x):
        return x * 2

    def backward(self, dy):
        threads.append(threading.get_ident())
        return dy * 2


x = mx.nd.ones((2,))
x.attach_grad()
with mx.autograd.record():
    y = Double()(x)
y.backward()
mx.nd.waitall()
print(json.dumps({"backward_on_caller_thread": threads == [threading.get_ident()],
                  "grad": x.grad.asnumpy().tolist(), "variable": os.environ.get("MXNET_ENGINE_TYPE"),
                  "openblas": d2l.backends.load_backend("mxnet").BLAS_PRODUCTS}))
"""


def run_fresh(**env):
    full_env = {k: v for k, v in os.environ.items() if k != "MXNET_ENGINE_TYPE"}
    full_env.update(PYTHONPATH=str(ROOT), D2LRNN_BACKEND="mxnet", **env)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=full_env,
                       cwd=ROOT, timeout=HANG_GUARD_SECONDS)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_the_cpu_build_runs_operations_on_the_callers_thread_and_leaves_no_variable_behind():
    result, stderr = run_fresh()
    assert result == {"backward_on_caller_thread": True, "grad": [2.0, 2.0], "variable": None,
                      "openblas": False}
    assert "start using engine" not in stderr  # MXNet's notice of the engine d2lrnn chose is not shown


def test_an_engine_the_user_chose_is_kept():
    result, stderr = run_fresh(MXNET_ENGINE_TYPE="ThreadedEnginePerDevice")
    assert result == {"backward_on_caller_thread": False, "grad": [2.0, 2.0],
                      "variable": "ThreadedEnginePerDevice", "openblas": False}
    assert "start using engine: ThreadedEnginePerDevice" in stderr  # MXNet's own notice of the user's choice


def test_products_run_on_openblas_only_where_the_user_asks():
    assert run_fresh(D2LRNN_MXNET_PRODUCTS="OpenBLAS")[0]["openblas"] is True  # unset: False (above)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adams_update_computes_the_formula_to_the_bit_in_numpy_on_the_cpu_and_as_one_graph_elsewhere(
        rng, weight_decay):
    import mxnet as mx

    from d2lrnn.backends import _common

    with d2l.use_backend("mxnet") as backend:
        shapes = [(7, 5), (5, 5), (5,), (5, 7), (7,)]
        P, G, M = ([mx.nd.array(rng.standard_normal(s).astype(np.float32)) for s in shapes] for _ in range(3))
        V = [mx.nd.array(np.abs(rng.standard_normal(s)).astype(np.float32)) for s in shapes]
        given = [[a.asnumpy() for a in arrays] for arrays in (P, G, M, V)]
        scalars = mx.nd.array(np.array([0.01, 1 / (1 - 0.9 ** 3), 1 / (1 - 0.999 ** 3)], np.float32))
        backend._adam_graph.cache_clear()
        on_host = backend.adam_update(P, G, M, V, scalars, 0.9, 0.999, 1e-8, weight_decay)
        assert backend._adam_graph.cache_info().currsize == 0  # on the CPU: NumPy, no graph
        graph = backend._adam_graph(tuple(shapes), str(mx.cpu()), 0.9, 0.999, 1e-8, weight_decay)
        as_graph = graph(scalars, *P, *G, *M, *V)  # what a GPU runs
        with mx.util.np_array(False):
            formula = _common.adam_update(P, G, M, V, scalars, 0.9, 0.999, 1e-8, weight_decay, backend.sqrt)
        for got, graphs, expected in zip(on_host, (as_graph[:5], as_graph[5:10], as_graph[10:]), formula):
            for a, b, c in zip(got, graphs, expected):
                np.testing.assert_array_equal(a.asnumpy(), c.asnumpy())
                np.testing.assert_array_equal(b.asnumpy(), c.asnumpy())
        for arrays, values in zip((P, G, M, V), given):  # the inputs stay as they were
            for a, b in zip(arrays, values):
                np.testing.assert_array_equal(a.asnumpy(), b)
        kept = [[a.asnumpy() for a in arrays] for arrays in on_host]
        backend.adam_update(on_host[0], G, on_host[1], on_host[2], scalars, 0.9, 0.999, 1e-8, weight_decay)
        for arrays, values in zip(on_host, kept):  # a call's outputs are its own: the next keeps them
            for a, b in zip(arrays, values):
                np.testing.assert_array_equal(a.asnumpy(), b)
        with mx.autograd.record():  # recorded, the operators run (NumPy has no gradient)
            recorded = backend.adam_update(P, G, M, V, scalars, 0.9, 0.999, 1e-8, weight_decay)
        np.testing.assert_array_equal(recorded[0][0].asnumpy(), on_host[0][0].asnumpy())
        as_floats = [float(v) for v in scalars.asnumpy()]  # numbers as a reader may pass them: the operators
        from_floats = backend.adam_update(P, G, M, V, as_floats, 0.9, 0.999, 1e-8, weight_decay)
        np.testing.assert_allclose(from_floats[0][0].asnumpy(), on_host[0][0].asnumpy(), rtol=1e-6)
        assert backend._adam_graph.cache_info().currsize == 1  # only the graph built above


T, B = 5, 3  # steps, rows


def scan_inputs(kind, H):
    """The shapes of each hand-written scan's inputs (d2lrnn/models/bptt.py) for H hidden units."""
    return {"rnn": [(T, B, H), (B, H), (H, H)],
            "lstm": [(T, B, 4 * H), (B, H), (B, H), (H, 4 * H)],
            "gru": [(T, B, 2 * H), (T, B, H), (B, H), (H, 2 * H), (H, H)],
            "gru_reset_after": [(T, B, 2 * H), (T, B, H), (B, H), (H, 2 * H), (H, H), (H,)]}[kind]


def _forward_and_grads(fn, inputs, weights):
    """fn's outputs and the gradients of sum_i <output_i, weight_i> with respect to every input."""
    import mxnet as mx

    inputs = [x.copy() for x in inputs]
    for x in inputs:
        x.attach_grad()
    with mx.autograd.record():
        outputs = fn(*inputs)
        loss = sum((y * w).sum() for y, w in zip(outputs, weights))
    loss.backward()
    return [y.asnumpy() for y in outputs], [x.grad.asnumpy() for x in inputs]


# Each choice of products picks its own operators for products of 128 columns and more
# (test_a_product_runs_...): FullyConnected's, OpenBLAS's where asked for, AMD's with AVX-512.
@pytest.mark.parametrize("cpu, H", [(0, 4), (1, 128), (2, 128)], ids=["onednn", "openblas", "amd-avx512"])
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "gru_reset_after"])
def test_the_hand_written_scans_run_as_one_cached_graph_with_the_operators_values(monkeypatch, rng, kind, cpu,
                                                                                   H):
    import mxnet as mx

    from d2lrnn.backends import load_backend
    from d2lrnn.models import bptt

    monkeypatch.setattr(load_backend("mxnet"), "BLAS_PRODUCTS", cpu == 1)
    monkeypatch.setattr(load_backend("mxnet"), "AVX512", cpu == 2)
    monkeypatch.setattr(bptt, "_scans", {})  # graphs traced under this CPU's products
    with d2l.use_backend("mxnet"):
        scan, (forward, _) = bptt._scan(kind), bptt._SCANS[kind]
        inputs = [mx.nd.array(rng.standard_normal(s).astype(np.float32)) for s in scan_inputs(kind, H)]
        weights = [mx.nd.array(rng.standard_normal(s).astype(np.float32)) for s in [(T, B, H)] + [(B, H)] * 2]
        built = scan.graphs_built()
        graph = _forward_and_grads(scan, inputs, weights)
        assert scan.graphs_built() == built + 1  # traced, not run operator by operator
        eager = _forward_and_grads(lambda *args: forward(*args)[0], inputs, weights)
        # the same operators: the same bits
        for got, expected in zip(graph[0] + graph[1], eager[0] + eager[1]):
            np.testing.assert_array_equal(got, expected)

        kept = [y.copy() for y in scan(*inputs)]
        assert scan.graphs_built() == built + 2  # unrecorded: its own graph (linear picks other products)
        later = scan(*[x * 2 for x in inputs])
        assert scan.graphs_built() == built + 2  # the same signature: the same graph
        first = scan(*inputs)  # a call's outputs are its own: the next call does not write over them
        for a, b, c in zip(first, kept, later):
            np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
            assert not np.array_equal(c.asnumpy(), b.asnumpy())
        shorter = scan(*[x[:2] if len(x.shape) == 3 else x for x in inputs])
        assert scan.graphs_built() == built + 3 and shorter[0].shape == (2, B, H)  # a new shape: a new graph


def test_a_function_the_graph_cannot_take_runs_operator_by_operator(rng):
    import mxnet as mx

    from d2lrnn.backends._mxnet_graphs import TracedFunction

    with d2l.use_backend("mxnet") as backend:
        X = mx.nd.array(rng.standard_normal((3, 4)).astype(np.float32))
        traceable = TracedFunction(lambda X: (backend.tanh(X) * 2.0 - X, backend.reshape(X, (-1, 2))))
        untraceable = TracedFunction(lambda X: (backend.exp(X), X[0]))
        for fn in (traceable, untraceable):
            got = fn([X])
            assert [y.shape for y in got] == [(3, 4), (6, 2) if fn is traceable else (4,)]
        assert traceable.graphs_built == 1 and untraceable.graphs_built == 0
        np.testing.assert_array_equal(traceable([X])[0].asnumpy(), (backend.tanh(X) * 2.0 - X).asnumpy())
        np.testing.assert_array_equal(untraceable([X])[0].asnumpy(), backend.exp(X).asnumpy())


# (rows, inner, columns, recorded) -> the operator ``linear`` runs by default (oneDNN's FullyConnected
# throughout), with D2LRNN_MXNET_PRODUCTS=openblas (OpenBLAS but for narrow products) and on AMD's CPUs
# with AVX-512 (FullyConnected, with the operands' roles swapped for few rows: "swapped"). ``matmul`` runs
# a swapped one as FullyConnected.
PRODUCTS = [
    ((32, 256, 256, False), ("FullyConnected", "dot", "swapped")),
    ((32, 256, 256, True), ("FullyConnected", "dot", "swapped")),
    ((32, 64, 256, True), ("FullyConnected", "FullyConnected", "swapped")),  # narrow inner, recorded
    ((32, 256, 28, False), ("FullyConnected", "FullyConnected", "FullyConnected")),  # narrow output
    ((64, 256, 256, False), ("FullyConnected", "dot", "FullyConnected")),
    ((160, 256, 256, True), ("FullyConnected", "dot", "FullyConnected")),
]


@pytest.mark.parametrize("cpu", [0, 1, 2], ids=["onednn", "openblas", "amd-avx512"])
@pytest.mark.parametrize("shape", [p[0] for p in PRODUCTS],
                         ids=lambda s: "x".join(map(str, s[:3])) + "-recorded" * s[3])
def test_a_product_runs_on_the_operator_its_cpu_runs_fastest(monkeypatch, rng, cpu, shape):
    import mxnet as mx

    from d2lrnn.backends import load_backend

    backend = load_backend("mxnet")
    monkeypatch.setattr(backend, "BLAS_PRODUCTS", cpu == 1)
    monkeypatch.setattr(backend, "AVX512", cpu == 2)
    rows, k, n, recorded = shape
    called = []

    def counted(name):
        operator = getattr(mx.nd, name)

        def call(*args, **kwargs):  # FullyConnected's first operand is its data: W where roles are swapped
            called.append("swapped" if name == "FullyConnected" and args[0].shape[0] != rows else name)
            return operator(*args, **kwargs)

        return call

    for name in ("FullyConnected", "dot"):
        monkeypatch.setattr(mx.nd, name, counted(name))
    X, W = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    x, w = mx.nd.array(X), mx.nd.array(W)
    if recorded:
        x.attach_grad()
    with d2l.use_backend("mxnet"), mx.autograd.record() if recorded else contextlib.nullcontext():
        products = [backend.linear(x, w), backend.matmul(x, w.T), backend.linear(x, w, mx.nd.ones((rows, n))),
                    backend.dense(x, w.T, mx.nd.ones((n,)))]
    by_linear = dict(PRODUCTS)[shape][cpu]
    by_matmul = "FullyConnected" if by_linear == "swapped" else by_linear  # dense: matmul's, its bias fused
    # linear with a full addend on OpenBLAS is one gemm, which is neither operator
    assert called == [by_linear, by_matmul] + ([] if by_linear == "dot" else [by_linear]) + [by_matmul]
    expected = X.astype(np.float64) @ W.T.astype(np.float64)
    bound = 4 * k * np.finfo(np.float32).eps * (np.abs(X) @ np.abs(W.T))  # float32 sums of k products
    for product, addend in zip(products, (0, 0, 1, 1)):
        assert np.all(np.abs(product.asnumpy() - addend - expected) <= bound + 4 * np.finfo(np.float32).eps)


def test_the_cross_entropy_runs_in_numpy_on_a_cpu_with_the_operators_numbers(monkeypatch, rng):
    import mxnet as mx

    from d2lrnn.backends import load_backend

    backend = load_backend("mxnet")
    X = (3 * rng.standard_normal((50, 300))).astype(np.float32)
    labels = rng.integers(0, 300, 50)
    logits = mx.nd.array(X)
    assert backend._on_host(logits)  # the naive engine, float32 rows on a CPU
    assert not backend._on_host(logits.as_np_ndarray())  # a reader's npx.set_np() arrays: the operators
    assert not backend._on_host(mx.nd.array(X[None]))
    monkeypatch.setattr(backend, "ENGINE", "ThreadedEnginePerDevice")
    assert not backend._on_host(logits)  # a Function's backward on a worker thread: the operators
    monkeypatch.undo()

    def loss_and_grad():
        x = logits.copy()
        x.attach_grad()
        with mx.autograd.record():
            loss = backend.softmax_cross_entropy(x, mx.nd.array(labels, dtype="int32"))
            total = (loss * mx.nd.arange(50)).sum()  # a different gradient for every row
        total.backward()
        return loss.asnumpy(), x.grad.asnumpy()

    on_host = loss_and_grad()
    monkeypatch.setattr(backend, "_on_host", lambda logits: False)
    by_operators = loss_and_grad()
    shifted = X.astype(np.float64) - X.max(axis=1, keepdims=True)
    expected = np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(50), labels]
    U = np.finfo(np.float32).eps / 2
    log_Z = np.log(np.exp(shifted).sum(axis=1))
    bound = 8 * U * (log_Z + np.abs(X).max())  # the log's and the shift's roundings, with a margin
    for loss in (on_host[0], by_operators[0]):
        assert np.all(np.abs(loss - expected) <= bound)
    softmax = np.exp(shifted - log_Z[:, None])
    softmax[np.arange(50), labels] -= 1
    weights = np.arange(50)[:, None]  # each entry within a few roundings of 1, times its row's weight
    for grad in (on_host[1], by_operators[1]):
        assert np.all(np.abs(grad - softmax * weights) <= 8 * U * weights)
