"""PyTorch's compiled functions on a CUDA device: each input signature captured once as a CUDA graph and
replayed (the torch backend's ``compile``).

Eagerly, a from-scratch recurrent step launches several kernels per time step forward and backward, each
from Python: on a GPU the book's LSTM step then waits on launches, not on arithmetic (0.22x of cuDNN's
layer on an H100). A CUDA graph records the kernels of one call and replays them all with one launch.

For one signature (the shapes, dtypes and devices of the tensor arguments, and every other argument's
value) the function runs eagerly ``WARMUP`` times (libraries set themselves up on first use, which a
capture must not see), then once under capture into fixed input and output buffers; every later call
copies its tensors into the input buffers, replays, and returns copies of the outputs (the next replay
overwrites the buffers, and a caller may keep a step's outputs, e.g. the best parameters so far).

Only for calls whose tensor arguments are all on one CUDA device and need no gradient (d2lrnn's training
and evaluation steps); anything else runs eagerly. A function
that cannot be captured (it reads a tensor's value on the host, e.g. ``.item()``) runs eagerly from then
on, the same numbers, as TensorFlow's compile falls back to eager; so does one called with more than
``MAX_SIGNATURES`` signatures. ``D2LRNN_CUDA_GRAPHS=0`` turns capturing off.
"""

import os

import torch

from ._common import tree_map

WARMUP = 2
MAX_SIGNATURES = 16  # a function called with ever new shapes or numbers gains nothing: eager after these
_VALUES = (bool, int, float, str, torch.dtype, torch.device)


class _Capture:
    """The real CUDA graph API (replaced by a stand-in in the CPU tests of the buffer handling)."""

    device_type = "cuda"

    def warm_up(self, fn, args):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        for t in flatten(out)[0]:
            t.record_stream(torch.cuda.current_stream())
        return out

    def capture(self, fn, args):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn(*args)
        return graph, out

    def replay(self, graph):
        graph.replay()


def flatten(tree):
    """The tensors of nested lists and tuples, in order, and a function that puts others in their
    places: ``rebuild(tensors)``."""
    tensors = []
    tree_map(lambda x: tensors.append(x) if torch.is_tensor(x) else None, tree)

    def rebuild(values):
        values = iter(values)
        return tree_map(lambda x: next(values) if torch.is_tensor(x) else x, tree)

    return tensors, rebuild


def signature(tree):
    """What a captured graph is specialised on: each tensor's shape, dtype and device, every other
    value (a number, string, None, dtype or device), and the nesting. Raises TypeError for anything else
    (an object's identity would make a new graph per call)."""
    if isinstance(tree, torch.Tensor):
        return tuple(tree.shape), tree.dtype, tree.device
    if isinstance(tree, (list, tuple)):
        return type(tree), tuple(signature(v) for v in tree)
    if tree is None or type(tree) in _VALUES:
        return type(tree), tree
    raise TypeError(f"{type(tree).__name__} is not part of a graph's signature")


class Graphed:
    """``fn`` captured per input signature and replayed; see the module's docstring."""

    def __init__(self, fn, api=None):
        self.fn, self.api = fn, api or _Capture()
        self.calls, self.graphs = {}, {}
        self.eager = os.environ.get("D2LRNN_CUDA_GRAPHS", "1") == "0"
        self.captures = 0  # graphs captured so far (for tests)

    def __call__(self, *args):
        if self.eager:
            return self.fn(*args)
        tensors, rebuild = flatten(args)
        if not tensors or any(t.device.type != self.api.device_type or t.device != tensors[0].device
                              or t.requires_grad for t in tensors):
            return self.fn(*args)  # a graph's inputs are fixed buffers: no gradient flows back through them
        try:
            key = signature(args)
        except TypeError:
            return self.fn(*args)
        entry = self.graphs.get(key)
        if entry is None:
            if key not in self.calls and len(self.calls) >= MAX_SIGNATURES:
                self.eager = True
                return self.fn(*args)
            self.calls[key] = self.calls.get(key, 0) + 1
            if self.calls[key] <= WARMUP:
                return self.api.warm_up(self.fn, args)
            entry = self._capture(tensors, rebuild)
            if entry is None:
                return self.fn(*args)
            self.graphs[key] = entry
        graph, inputs, outputs, rebuild_out = entry
        torch._foreach_copy_(inputs, tensors)
        self.api.replay(graph)
        return rebuild_out([t.clone() for t in outputs])

    def _capture(self, tensors, rebuild):
        inputs = [t.detach().clone() for t in tensors]
        try:
            graph, out = self.api.capture(self.fn, rebuild(inputs))
        except Exception:  # noqa: BLE001 -- any failure to capture means: run this function eagerly
            self.eager = True
            return None
        self.captures += 1
        outputs, rebuild_out = flatten(out)
        return graph, inputs, outputs, rebuild_out
