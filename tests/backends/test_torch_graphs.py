"""The torch backend's CUDA-graph replay (``d2lrnn/backends/_torch_graphs.py``), its bookkeeping checked on
the CPU: a stand-in for CUDA's graph API captures by recording the call on the fixed input buffers and
replays by running it again into the fixed output buffers, which is what a CUDA graph does with its
kernels. So these tests check what d2lrnn adds: buffers filled and read at the right times, one capture
per signature, outputs that survive the next call, eager fallbacks. That real CUDA graphs give the eager
numbers is checked on a GPU machine (``bench/gpu_check.py --graphs``).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch backend's code; torch is installed in the torch env")

from d2lrnn.backends import _torch_graphs  # noqa: E402
from d2lrnn.backends._torch_graphs import Graphed, flatten  # noqa: E402


class StandIn:
    """CUDA's graph API as far as the wrapper can tell, on the CPU."""

    device_type = "cpu"

    def __init__(self):
        self.warm_ups = self.replays = 0

    def warm_up(self, fn, args):
        self.warm_ups += 1
        return fn(*args)

    def capture(self, fn, args):
        out = fn(*args)
        outputs, _ = flatten(out)
        for t in outputs:  # a capture computes nothing: the buffers hold garbage until a replay
            t.detach().fill_(float("nan")) if t.is_floating_point() else t.detach().fill_(-7)

        def replay():
            for buffer, value in zip(outputs, flatten(fn(*args))[0]):
                buffer.copy_(value)

        return replay, out

    def replay(self, graph):
        self.replays += 1
        graph()


def sgd_step(params, X, Y, lr):
    """One SGD step of a tanh layer's squared error, through torch.autograd: (loss, new params)."""
    leaves = [p.detach().requires_grad_(True) for p in params]
    W, b = leaves
    loss = ((torch.tanh(X @ W + b) - Y) ** 2).mean()
    grads = torch.autograd.grad(loss, leaves)
    return loss.detach(), [p.detach() - lr * g for p, g in zip(leaves, grads)]


def batches(n, rows=8, seed=0):
    r = np.random.default_rng(seed)
    return [(torch.tensor(r.standard_normal((rows, 3)), dtype=torch.float32),
             torch.tensor(r.standard_normal((rows, 2)), dtype=torch.float32)) for _ in range(n)]


def initial_params():
    r = np.random.default_rng(1)
    return [torch.tensor(r.standard_normal((3, 2)), dtype=torch.float32), torch.zeros(2)]


def train(step, data, lr=0.1):
    params, losses, history = initial_params(), [], []
    for X, Y in data:
        loss, params = step(params, X, Y, lr)
        losses.append(loss)
        history.append(params)
    return losses, history


def test_replayed_steps_give_the_eager_numbers_and_keep_every_output():
    api = StandIn()
    step = Graphed(sgd_step, api)
    data = batches(6)
    losses, history = train(step, data)
    eager_losses, eager_history = train(sgd_step, data)
    assert (api.warm_ups, step.captures, api.replays) == (_torch_graphs.WARMUP, 1, 6 - _torch_graphs.WARMUP)
    # every step's outputs, kept by the caller, are still that step's: the replays wrote into buffers the
    # caller never holds
    for got, want in zip(losses + sum(history, []), eager_losses + sum(eager_history, [])):
        assert torch.equal(got, want)


def test_each_signature_is_captured_once():
    api = StandIn()
    step = Graphed(sgd_step, api)
    data = batches(4) + batches(4, rows=5)  # a short last minibatch: its own shapes
    train(step, data)
    train(step, data, lr=0.1)
    assert step.captures == 2
    losses, _ = train(step, data, lr=0.2)  # a new number is a new signature
    assert step.captures == 4
    assert all(torch.equal(a, b) for a, b in zip(losses, train(sgd_step, data, lr=0.2)[0]))


def test_a_function_that_cannot_be_captured_runs_eagerly_from_then_on():
    class Refusing(StandIn):
        def capture(self, fn, args):
            raise RuntimeError("operation not permitted when stream is capturing")

    api = Refusing()
    step = Graphed(sgd_step, api)
    data = batches(5)
    losses, _ = train(step, data)
    assert step.eager and step.captures == 0 and api.warm_ups == _torch_graphs.WARMUP
    assert all(torch.equal(a, b) for a, b in zip(losses, train(sgd_step, data)[0]))


def test_calls_that_a_graph_cannot_take_run_eagerly(monkeypatch):
    api = StandIn()
    step = Graphed(sgd_step, api)
    X, Y = batches(1)[0]
    params = [p.requires_grad_(True) for p in initial_params()]  # a gradient wanted through the call
    for _ in range(4):
        step(params, X, Y, 0.1)
    step(initial_params(), X, Y, np.float32(0.1))  # a value that is not part of a signature: eager
    assert (api.warm_ups, step.captures) == (0, 0)
    monkeypatch.setenv("D2LRNN_CUDA_GRAPHS", "0")
    off = Graphed(sgd_step, StandIn())
    train(off, batches(4))
    assert off.eager and off.captures == 0 and off.api.warm_ups == 0


def test_a_function_called_with_ever_new_numbers_runs_eagerly_after_a_bounded_number_of_them():
    api = StandIn()
    step = Graphed(sgd_step, api)
    X, Y = batches(1)[0]
    limit = _torch_graphs.MAX_SIGNATURES
    outputs = [step(initial_params(), X, Y, 0.01 * (i + 1)) for i in range(limit + 5)]
    assert step.eager and len(step.calls) == limit and api.warm_ups == limit
    for i, (loss, _) in enumerate(outputs):
        assert torch.equal(loss, sgd_step(initial_params(), X, Y, 0.01 * (i + 1))[0])


def test_nesting_and_values_come_back_in_place():
    tensors, rebuild = flatten((torch.ones(2), [None, (torch.zeros(1), 3)], "x"))
    assert len(tensors) == 2
    back = rebuild([torch.full((2,), 5.0), torch.full((1,), 6.0)])
    assert isinstance(back, tuple) and isinstance(back[1], list) and isinstance(back[1][1], tuple)
    assert back[0].tolist() == [5.0, 5.0] and back[1][0] is None and back[1][1][0].tolist() == [6.0]
    assert back[1][1][1] == 3 and back[2] == "x"


def test_the_cpu_build_compiles_nothing():
    from d2lrnn.backends import torch as backend

    def fn(x):
        return x

    assert not torch.cuda.is_available() and backend.compile(fn) is fn
