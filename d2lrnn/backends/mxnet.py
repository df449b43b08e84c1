"""MXNet backend: tensors are ``mxnet.nd.NDArray``; gradients come from ``autograd.record()``.

The book's MXNet cells turn on ``npx.set_np()`` and compute on ``mxnet.np`` arrays. Every function here
takes either kind and, while that mode is on, returns ``mxnet.np`` arrays (see ``_np_aware``): the same
memory seen through another class, so a reader's ``np.dot`` and d2lrnn's operators mix in one graph.

MXNet 1.9.1 is the framework's last release; it uses ``np.bool``, which NumPy 1.24
removed, so this backend refuses to load on a newer NumPy with a message that says so.
"""

import atexit
import contextlib
import functools
import importlib.metadata
import os

import numpy as np

from ..errors import ArgumentError, BackendError
from . import _common

if tuple(int(p) for p in np.__version__.split(".")[:2]) >= (1, 24):
    raise BackendError(
        f"backend 'mxnet' needs numpy<1.24 (mxnet 1.9.1 uses np.bool, removed in numpy 1.24) but "
        f'numpy {np.__version__} is installed: run pip install "numpy<1.24" in a separate '
        f"environment (tox -e mxnet makes one)"
    )


def _import_mxnet():
    """Import MXNet; on its CPU build, unless the user chose an engine, start it with ``NaiveEngine``.

    MXNet's default engine hands every operation to a worker thread and returns; for the small matrices of
    these models the handoff costs more than the operation (measured on 2 cores: a seq2seq training run
    1.7x faster, the from-scratch GRU's step 1.2-1.5x, without it). The naive engine runs each operation
    on the caller's thread, still with its OpenMP threads. A GPU build (``mxnet-cu*``) keeps the threaded
    engine, which overlaps Python with the GPU. MXNet reads the variable once, when its first operation
    starts the engine, so it is set for that moment only: processes this one starts choose for themselves.

    Returns MXNet and the name of the engine it runs (``ThreadedEnginePerDevice``, its default, where unset).
    """
    builds = importlib.metadata.packages_distributions().get("mxnet", [])
    gpu_build = any(name.lower().startswith("mxnet-cu") for name in builds)
    if "MXNET_ENGINE_TYPE" in os.environ or not builds or gpu_build:
        engine = os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")
        return _common.require("mxnet", "mxnet"), engine
    os.environ["MXNET_ENGINE_TYPE"] = "NaiveEngine"
    try:
        with _common.native_stderr_filtered(_without_engine_notice):
            mxnet = _common.require("mxnet", "mxnet")
            mxnet.nd.zeros((1,)).wait_to_read()  # starts the engine, and logs its notice, here
    finally:
        del os.environ["MXNET_ENGINE_TYPE"]
    return mxnet, "NaiveEngine"


def _without_engine_notice(text):
    """What MXNet wrote to stderr, less the line it logs when it starts an engine other than its default."""
    return "".join(line for line in text.splitlines(True) if "start using engine" not in line)


mx, ENGINE = _import_mxnet()
nd = mx.nd
autograd = mx.autograd
# NumPy shape semantics: 0-d arrays exist, so a full reduction can be a scalar as on every
# other backend (legacy MXNet would give shape (1,)).
mx.util.set_np_shape(True)

# (they import MXNet: after the engine's choice above)
from . import _mxnet_graphs as _graphs  # noqa: E402
from ._mxnet_graphs import CachedGraph, Traced, TracedFunction  # noqa: E402


@atexit.register  # after MXNet's own exit handler, so it runs before it (atexit is last in, first out)
def _finish_pending_work():
    """Wait for the engine's queued work before MXNet shuts its engine down at exit.

    With work still queued (the last update's backward, through an ``autograd.Function``),
    MXNet's ``MXNotifyShutdown`` hangs now and then: about 1 exit in 15 of a short training
    script on MXNet 1.9.1, never once in 64 with this wait first.
    """
    with contextlib.suppress(Exception):
        nd.waitall()


def _axis(x, axis):
    return axis % x.ndim if axis is not None and axis < 0 else axis


# -- creating and converting -------------------------------------------------------------


def normal(mean, std, shape, device=None):
    return from_numpy(_common.normal_numpy(mean, std, shape), device)


def uniform(low, high, shape, device=None):
    return from_numpy(_common.uniform_numpy(low, high, shape), device)


def zeros(shape, dtype=None, device=None):
    return nd.zeros(shape, ctx=device, dtype=_common.numpy_dtype(dtype or _common.FLOAT))


def ones(shape, dtype=None, device=None):
    return nd.ones(shape, ctx=device, dtype=_common.numpy_dtype(dtype or _common.FLOAT))


def zeros_like(x):
    return nd.zeros_like(x)


def _book_dtype(a, dtype=None):
    """``a``'s dtype, except that under ``npx.set_np()`` integers become float32 unless ``dtype`` says
    otherwise: ``mxnet.np.array`` makes them so, and the book's MXNet cells (written for its data, whose
    token indices are float32) rely on it, e.g. concatenating ``np.array([bos] * n)`` with a batch."""
    if dtype is None and a.dtype == np.int64 and mx.util.is_np_array():
        return np.float32
    return a.dtype


def arange(start, stop=None, step=1, dtype=None, device=None):
    a = _common.arange_numpy(start, stop, step, dtype)
    return nd.array(a, ctx=device, dtype=_book_dtype(a, dtype))


def tensor(data, dtype=None, device=None):
    if isinstance(data, nd.NDArray):
        return data if dtype is None else data.astype(_common.numpy_dtype(dtype))
    a = _common.as_numpy(data, dtype)  # not through from_numpy, whose defaults would override ``dtype``
    return nd.array(a, ctx=device, dtype=_book_dtype(a, dtype))


def from_numpy(array, device=None):
    a = _common.as_numpy(array)
    return nd.array(a, ctx=device, dtype=_book_dtype(a))


def to_numpy(x):
    return x.asnumpy() if isinstance(x, nd.NDArray) else np.asarray(x)


def astype(x, dtype):
    return x.astype(_common.numpy_dtype(dtype))


def shape(x):
    return tuple(x.shape)


def size(x):
    return x.size


def is_tensor(x):
    return isinstance(x, nd.NDArray)


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    return x.reshape(tuple(shape))


def transpose(x, axes=None):
    if type(x) is Traced:
        return _graphs.transpose(x, axes)
    return nd.transpose(x, axes=tuple(axes) if axes is not None else ())


def concat(tensors, axis=0):
    tensors = list(tensors)
    if type(tensors[0]) is Traced:
        return _graphs.concat(tensors, axis)
    return nd.concat(*tensors, dim=_axis(tensors[0], axis))


def stack(tensors, axis=0):
    tensors = list(tensors)
    if type(tensors[0]) is Traced:
        return _graphs.stack(tensors, axis)
    return nd.stack(*tensors, axis=axis % (tensors[0].ndim + 1))


def unstack(x, axis=0):
    axis = _axis(x, axis)
    if type(x) is Traced:
        return _graphs.unstack(x, axis)
    n = x.shape[axis]
    if axis == 0 and not autograd.is_recording():
        # Views into x: no engine operation, no copy (nd.split's kernel took 0.6-2 ms for the 35
        # (32, 512) steps of an RNN minibatch). Not while recording: each recorded view's gradient
        # would be a zero-filled array of x's full size.
        return [x._at(i) for i in range(n)]  # x[i] makes the same view in 2.5x the Python time
    if n == 1:
        return [x.squeeze(axis=axis)]
    return list(nd.split(x, num_outputs=n, axis=axis, squeeze_axis=True))


def take(x, indices, axis=0):
    return nd.take(x, indices, axis=_axis(x, axis))


# -- arithmetic ------------------------------------------------------------------------------


#: Whether 2-D products go to the build's OpenBLAS (nd.dot, nd.linalg.gemm) rather than oneDNN's
#: FullyConnected: only where the user asks for it, ``D2LRNN_MXNET_PRODUCTS=openblas``. On Intel Xeons
#: FullyConnected was 2-5x faster (from 32x512x512 up to 2048^3). On AMD's CPUs it depends on the machine,
#: not on what /proc/cpuinfo says: on one 2-core AMD EPYC (2026-11-23) oneDNN 2.4's inner product ran the
#: RNN step's 32x512x512 at 25-45 GFLOP/s on 2 threads and OpenBLAS 0.3.13 (its Zen kernels) at 50-90; on
#: another, a Zen 3 with AVX2 only (2026-12-07), FullyConnected ran it in 230 us and OpenBLAS in 450
#: (32x512x2048: 0.81 against 1.12 ms), and the scratch GRU and LSTM trained at 0.84x and 0.82x the plain
#: Gluon loop's tokens/s with FullyConnected, 0.53x and 0.52x with OpenBLAS (bench/MXNET.md). So MXNet's own
#: operator by default, as a Gluon user has it. An environment setting, not a timing: runs are reproducible.
BLAS_PRODUCTS = os.environ.get("D2LRNN_MXNET_PRODUCTS", "").strip().lower() == "openblas"
#: Whether the CPU is AMD's with AVX-512. There a product of few rows ran faster with the operands' roles
#: swapped, (W X^T)^T (2 threads, 2026-12-07; 32x512x2048, the LSTM's step: forward 0.33 ms against
#: FullyConnected's 0.75 and OpenBLAS's 0.70; with the backward 1.13 against 1.64 and 2.99): FullyConnected
#: reorders its weight operand at every call, and X is the smaller one (bench/MXNET.md). On the Zen 3 without
#: AVX-512 it did not (32x512x2048: 0.85 against 0.81 ms).
AVX512 = _common.cpu_vendor() == "AuthenticAMD" and "avx512f" in _common.cpu_flags()
#: The fewest rows for which FullyConnected X W^T beats the swapped (W X^T)^T (64x256x768, the seq2seq
#: bench's step: 0.36 against 0.40 ms with the backward) where :data:`AVX512`.
ONEDNN_MIN_ROWS = 64


def _product(rows, k, n):
    """Which operator runs a product of ``rows()`` rows (a function: a shape costs a call into MXNet), inner
    size ``k`` and ``n`` output columns: "blas" (OpenBLAS's ``nd.dot``, ``nd.linalg.gemm``), "onednn"
    (``FullyConnected``) or "swapped" (``FullyConnected`` with X as its weight, transposed after).

    Narrow outputs (the 28 logits of a character model) always run on FullyConnected; swapped only where
    :data:`AVX512`; OpenBLAS only where :data:`BLAS_PRODUCTS`, and not for a narrow inner size while
    recording: there FullyConnected's fused backward is faster than nd.dot's two products.
    """
    if n < 128:
        return "onednn"
    if AVX512:
        return "onednn" if rows() >= ONEDNN_MIN_ROWS else "swapped"
    if BLAS_PRODUCTS:
        return "blas" if k >= 128 or not autograd.is_recording() else "onednn"
    return "onednn"


def _rows(a):
    """The rows of a stack of rows (..., k), as ``_product`` takes them: a function (a shape costs a call)."""
    return lambda: a.size // a.shape[-1]


def matmul(a, b):
    if a.ndim == 3 and b.ndim == 3:
        return nd.batch_dot(a, b)
    if a.ndim >= 2 and b.ndim == 2 and _product(_rows(a), *b.shape) != "blas":
        # oneDNN's FullyConnected computes a (b^T)^T, transposing b included; ``flatten=False`` multiplies
        # the last axis of a stack of rows (the decoder's (batch, steps, hidden) states by its output layer:
        # 20 against 100 ms forward and backward at the seq2seq bench's sizes, where ``nd.dot`` goes to
        # OpenBLAS).
        return nd.FullyConnected(a, nd.transpose(b), num_hidden=b.shape[1], no_bias=True, flatten=False)
    return nd.dot(a, b)


def dense(X, W, b):
    # FullyConnected with its bias: the bias's gradient comes out of its backward kernel, where the backward
    # of ``+ b`` (a broadcast add) sums over the rows on its own: the seq2seq decoder's output layer,
    # (64, 10, 256) x (256, 3324), forward and backward 22.5 -> 13.1 ms (2 threads, AVX-512 EPYC).
    if X.ndim < 2 or b.ndim != 1:
        return matmul(X, W) + b
    if _product(_rows(X), *W.shape) == "blas":
        return nd.dot(X, W) + b
    return nd.FullyConnected(X, nd.transpose(W), b, num_hidden=W.shape[1], flatten=False)


def linear(X, W, b=None):
    # One operator where it can: with OpenBLAS (see ``BLAS_PRODUCTS``), X W^T + B for a full (rows, out)
    # matrix B is its gemm with beta = 1 (``nd.linalg.gemm``); with oneDNN, X W^T + b for a vector b
    # is FullyConnected's bias.
    n, k = W.shape  # each shape, dtype or ndim costs a call into MXNet: this runs 70 times a minibatch
    product = _product(lambda: X.shape[0], k, n)
    if type(X) is Traced:
        return _graphs.linear(X, W, b, product)
    if product == "blas":
        if b is not None and b.shape == (X.shape[0], n):
            return nd.linalg.gemm(X, W, b, transpose_b=True)
        Y = nd.dot(X, W, transpose_b=True)
    elif b is not None and b.ndim == 1:
        return nd.FullyConnected(X, W, b, num_hidden=n)
    elif product == "swapped":
        Y = nd.transpose(nd.FullyConnected(W, X, num_hidden=X.shape[0], no_bias=True))
    else:
        Y = nd.FullyConnected(X, W, num_hidden=n, no_bias=True)
    return Y if b is None else Y + b


def prepack_linear(W):
    # MXNet arrays have one layout, which FullyConnected and OpenBLAS both read as it is: unchanged.
    return W


def tanh(x):
    # Elementwise tanh (oneDNN's vectorised kernel: ~3x faster than ``nd.tanh`` here).
    if type(x) is Traced:
        return _graphs.activation(x, "tanh")
    return nd.Activation(x, act_type="tanh")


def tanh_grad(Y, dY):
    if autograd.is_recording():  # MXNet cannot differentiate its own backward kernel
        return dY * (1.0 - Y * Y)
    return nd._internal._backward_tanh(dY, Y)  # one operator instead of three


def sigmoid(x):
    # Elementwise 1 / (1 + exp(-x)) (oneDNN's vectorised kernel, as for ``tanh``).
    if type(x) is Traced:
        return _graphs.activation(x, "sigmoid")
    return nd.Activation(x, act_type="sigmoid")


def sigmoid_grad(Y, dY):
    if autograd.is_recording():  # MXNet cannot differentiate its own backward kernel
        return dY * (Y - Y * Y)
    return nd._internal._backward_sigmoid(dY, Y)  # one operator instead of three


def relu(x):
    return nd.relu(x)


def exp(x):
    return nd.exp(x)


def sin(x):
    return nd.sin(x)


def log(x):
    return nd.log(x)


def sqrt(x):
    return nd.sqrt(x)


def abs(x):  # noqa: A001
    return nd.abs(x)


def maximum(x, y):
    return nd.maximum(x, y)


def minimum(x, y):
    return nd.minimum(x, y)


# -- reductions ------------------------------------------------------------------------------


def _reduce(op, x, axis, keepdims):
    if axis is None:
        return op(x).reshape((1,) * x.ndim if keepdims else ())
    return op(x, axis=_axis(x, axis), keepdims=keepdims)


_ones = {}  # (shape, device, dtype) -> a matrix of ones, for sums as products


def _ones_like_shape(shape, device, dtype):
    key = (shape, device, dtype)
    if key not in _ones:
        if len(_ones) >= 64:  # a bound, should a program sum arrays of very many sizes
            _ones.clear()
        _ones[key] = nd.ones(shape, ctx=device, dtype=dtype)
    return _ones[key]


def sum(x, axis=None, keepdims=False):  # noqa: A001
    if axis is None and x.size >= 8192 and x.dtype in (np.float32, np.float64):
        # Products with ones (BLAS matrix-vector, then a dot): nd.sum's reduction kernel adds about
        # 170 million floats a second (1.6 ms for a 512 x 512 gradient in clipping), these 0.2 ms.
        c = x.shape[-1] if x.ndim >= 2 else x.size
        r = x.size // c
        if r == 1 or c == 1:
            s = nd.dot(x.reshape((1, -1)), _ones_like_shape((x.size, 1), x.context, x.dtype))
        else:
            rows = nd.dot(x.reshape((r, c)), _ones_like_shape((c, 1), x.context, x.dtype))
            s = nd.dot(_ones_like_shape((1, r), x.context, x.dtype), rows)
        return s.reshape((1,) * x.ndim if keepdims else ())
    return _reduce(nd.sum, x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    return _reduce(nd.mean, x, axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _reduce(nd.max, x, axis, keepdims)


def argmax(x, axis=None):
    if axis is None:
        return nd.argmax(x.reshape((-1,)), axis=0).astype(np.int64).reshape(())
    return nd.argmax(x, axis=_axis(x, axis)).astype(np.int64)


def _fusable(tensors):
    """Whether MXNet's multi-tensor kernels take these: dense float32 arrays of at least one dimension and
    one entry, outside autograd's recording (the kernels have no gradient)."""
    return bool(tensors) and not mx.autograd.is_recording() and all(
        isinstance(T, nd.NDArray) and T.dtype == np.float32 and T.stype == "default" and T.ndim > 0
        and T.size > 0 for T in tensors)


def sum_of_squares(tensors):
    # One multi_sum_sq kernel for the whole list (what Gluon's clip_global_norm runs): 0.14 ms for the
    # 30 gradients of the book's seq2seq model, 3.5 ms as a product, a sum and an addition per tensor.
    tensors = list(tensors)
    if not _fusable(tensors):
        with mx.util.np_array(False):  # legacy arrays throughout (the wrapper converts in and out)
            return _common.sum_of_squares(tensors, sum)
    return nd.sum(nd.multi_sum_sq(*tensors, num_arrays=len(tensors))).reshape(())


def nonfinite_probe(tensors):
    # One multi_all_finite kernel (1 when all is finite, else 0), its log 0 or -inf: 0.5 ms for 44 tensors
    # where the product, sum and addition per tensor took 3.8.
    tensors = list(tensors)
    if not _fusable(tensors):
        with mx.util.np_array(False):
            return _common.nonfinite_probe(tensors, sum)
    return nd.log(nd.multi_all_finite(*tensors, num_arrays=len(tensors), init_output=True)).reshape(())


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    # The formula, not MXNet's adam_update kernel: the kernel computes 1 - beta in float32 (1 - 0.999 is
    # then 1.3e-5 smaller than 0.001), so its steps drift from every other backend's and from NumPy's. In
    # legacy arrays throughout, as the wrapper hands them in (a reader's npx.set_np() is on in the 1.0 face).
    # Outside autograd, the formula's operators for all parameters run in NumPy on a CPU (_adam_on_host),
    # elsewhere as one cached graph (_adam_graph): the same float32 operations in the same order either way.
    with mx.util.np_array(False):
        params, grads, Ms, Vs = list(params), list(grads), list(Ms), list(Vs)
        n = len(params)
        if not (_fusable([scalars, *params, *grads, *Ms, *Vs]) and scalars.shape == (3,)):
            return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt)
        if all(T.context.device_type == "cpu" for T in (scalars, *params, *grads, *Ms, *Vs)):
            return _adam_on_host(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay)
        graph = _adam_graph(tuple(P.shape for P in params), str(params[0].context), float(beta1),
                            float(beta2), float(eps), float(weight_decay))
        outputs = graph(scalars, *params, *grads, *Ms, *Vs)
        return list(outputs[:n]), list(outputs[n:2 * n]), list(outputs[2 * n:])


def _adam_on_host(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay):
    """``_common.adam_update_in_place`` on NumPy copies of the arrays: the bits of MXNet's operators, in
    fewer passes over memory. MXNet's CPU ``sqrt`` is not vectorised (3.8 ms for 851k floats on an Intel Xeon,
    NumPy's 0.36), and each operator of the graph writes a new array: the book's seq2seq model at 256 hidden
    units (4.6M parameters) took 99 ms an update as the graph and 42 ms this way, on two threads
    (bench/RESULTS.md)."""
    copies = [[T.asnumpy() for T in arrays] for arrays in (params, grads, Ms, Vs)]
    updated = _common.adam_update_in_place(*copies, scalars.asnumpy(), beta1, beta2, eps, weight_decay)
    return tuple([nd.from_numpy(A, zero_copy=True) for A in arrays] for arrays in updated)


@functools.lru_cache(maxsize=16)
def _adam_graph(shapes, context, beta1, beta2, eps, weight_decay):
    """``_common.adam_update`` traced into a graph (the same operators, so the same bits) for parameters of
    ``shapes`` (``context`` keeps graphs for different devices apart): inputs scalars, then the P, G, M and V
    lists.

    Measured on the book's seq2seq model at 256 hidden units (44 parameters): 58 ms an update one operator
    at a time, 30 ms as this graph."""
    sym, n = mx.sym, len(shapes)
    S = sym.var("scalars")
    numbers = [sym.slice_axis(S, axis=0, begin=i, end=i + 1) for i in range(3)]
    names = ["scalars"] + [f"{kind}{i}" for kind in "PGMV" for i in range(n)]
    P, G, M, V = ([sym.var(f"{kind}{i}") for i in range(n)] for kind in "PGMV")
    new_params, new_Ms, new_Vs = _common.adam_update(P, G, M, V, numbers, beta1, beta2, eps, weight_decay,
                                                     sym.sqrt, scale=sym.broadcast_mul)
    return CachedGraph(new_params + new_Ms + new_Vs, names)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return nd.one_hot(indices, depth, dtype="float32")


def softmax(x, axis=-1):
    return nd.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    # MXNet's own log_softmax loses ~1e-4 relative accuracy near 0; the shifted form does not.
    shifted = x - nd.max(x, axis=axis, keepdims=True).detach()
    return shifted - nd.log(nd.sum(nd.exp(shifted), axis=axis, keepdims=True))


def softmax_cross_entropy(logits, labels):
    # log_softmax's numbers, picked before the second subtraction: log sum exp(s) - s[label] for the
    # shifted logits s equals -(s - log sum exp(s))[label] bit for bit, with one (n, classes)
    # broadcast operation fewer to record and differentiate.
    labels = labels.reshape((-1,))
    if _on_host(logits):
        return _CrossEntropyOnHost()(logits, labels)
    shifted = logits - nd.max(logits, axis=-1, keepdims=True).detach()
    return nd.log(nd.sum(nd.exp(shifted), axis=-1)) - nd.pick(shifted, labels, axis=-1)


def _on_host(logits):
    """Whether :class:`_CrossEntropyOnHost` takes these logits: float32 rows in a legacy array on a CPU, with
    MXNet's operations on this thread (the threaded engine runs a Function's backward on a worker thread,
    where reading an array into NumPy would wait on the engine from inside it)."""
    return (ENGINE == "NaiveEngine" and type(logits) is nd.NDArray and logits.ndim == 2
            and logits.dtype == np.float32 and logits.context.device_type == "cpu")


class _CrossEntropyOnHost(autograd.Function):
    """The same formula in NumPy, with its gradient written out: dL/ds = g (exp(s) / sum exp(s) - onehot).

    MXNet's CPU ``exp``, ``max`` and ``sum`` are not vectorised: the seq2seq decoder's (640, 3324) logits took
    28.7 ms forward and backward through them and 7.8 ms this way (2 threads, AVX-512 EPYC), the loss as far
    from float64's as theirs and the gradient within 2e-7 (bench/RESULTS.md, section seq2seq-speed's notes).
    """

    def forward(self, logits, labels):
        shifted = logits.asnumpy()  # a copy
        shifted -= shifted.max(axis=-1, keepdims=True)
        picked = labels.asnumpy().astype(np.int64)
        E = np.exp(shifted)
        Z = E.sum(axis=-1)
        self.saved = (E, Z, picked, labels.dtype)
        loss = np.log(Z) - shifted[np.arange(len(picked)), picked]
        return nd.array(loss, ctx=logits.context, dtype=np.float32)

    def backward(self, dloss):
        E, Z, picked, label_dtype = self.saved
        g = dloss.asnumpy()
        E *= (g / Z)[:, None]
        E[np.arange(len(picked)), picked] -= g
        return nd.from_numpy(E, zero_copy=True), nd.zeros(picked.shape, dtype=label_dtype)


# -- the recurrent layer ---------------------------------------------------------------------


_MODES = {"rnn_tanh": "rnn", "gru": "gru", "lstm": "lstm"}


def _build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after):
    layers = {"rnn": mx.gluon.rnn.RNN, "gru": mx.gluon.rnn.GRU, "lstm": mx.gluon.rnn.LSTM}
    kwargs = {"activation": "tanh"} if cell == "rnn" else {}
    return layers[cell](num_hiddens, num_layers, dropout=dropout, bidirectional=bidirectional,
                        input_size=num_inputs, **kwargs)


def _describe(layer):
    if not isinstance(layer, mx.gluon.rnn.rnn_layer._RNNLayer):
        return None, []
    unsupported = [setting for setting, bad in (
        ("activation='relu'", layer._mode == "rnn_relu"),
        (f"layout={layer._layout!r}", layer._layout != "TNC"),
        (f"projection_size={layer._projection_size}", bool(layer._projection_size)),
        ("use_sequence_length=True", layer._use_sequence_length),
        ("state clipping", layer._lstm_state_clip_min is not None or layer._lstm_state_clip_max is not None))
        if bad]
    cell = _MODES.get(layer._mode, "rnn")
    return {"cell": cell, "num_inputs": layer._input_size or None, "num_hiddens": layer._hidden_size,
            "num_layers": layer._num_layers, "bidirectional": layer._dir == 2,
            "dropout": float(layer._dropout),
            "reset_after": cell == "gru"}, unsupported


def _one_layer_copies(layer, num_inputs):
    """One single-layer Gluon layer per layer of ``layer`` (made once, kept on it), without dropout."""
    if getattr(layer, "_d2lrnn_layers", None) is None:
        D, h = layer._dir, layer._hidden_size
        cell = _MODES[layer._mode]
        layer._d2lrnn_layers = [_build(cell, num_inputs if i == 0 else D * h, h, 1, D == 2, 0.0, True)
                                for i in range(layer._num_layers)]
    return layer._d2lrnn_layers


def _call(layer, weights, X, states, training):
    if training and layer._dropout and layer._num_layers > 1:
        # The CPU build's oneDNN RNN kernel ignores the dropout between layers, so run the layers
        # one at a time and drop out between them here (the same fused kernel per layer).
        D, new_states = layer._dir, []
        for i, one in enumerate(_one_layer_copies(layer, X.shape[-1])):
            if i:
                X = dropout(X, layer._dropout)
            X, s = _call(one, weights[i * D:(i + 1) * D], X, states[i * D:(i + 1) * D], training)
            new_states.extend(s)
        return X, new_states
    D, params = layer._dir, {}
    for slot, (W_x, W_h, b_x, b_h) in enumerate(weights):
        prefix = f"{'lr'[slot % D]}{slot // D}_"
        params.update({prefix + "i2h_weight": W_x, prefix + "h2h_weight": W_h,
                       prefix + "i2h_bias": b_x, prefix + "h2h_bias": b_h})
    hx = [stack(s, axis=0) for s in zip(*states)]  # [H] or [H, C], each (layers * directions, B, h)
    # The layer's own fused kernel (F.RNN, or npx.rnn with npx.set_np() on: then it takes mxnet.np
    # arrays), fed our tensors instead of its Parameters; dropout between layers in training only.
    X, hx, params = _common.tree_map(_as_np if mx.util.is_np_array() else _as_nd, (X, hx, params))
    with autograd.train_mode() if training else autograd.predict_mode():
        Y, out = layer.hybrid_forward(nd, X, hx, **params)
    return Y, [tuple(s[slot] for s in out) for slot in range(len(weights))]


_NATIVE = _common.NativeRNN(
    layer_names="gluon.rnn.RNN, GRU or LSTM",
    gate_order=_common.CUDNN_GATE_ORDER, transposed=True, stacks_layers=True, gru_forms=(True,),
    build=_build, describe=_describe, call=_call)


def native_rnn():
    # Gluon's ``rnn.RNN``, ``GRU`` and ``LSTM``, declared for d2lrnn's adapter (see ``NativeRNN``).
    return _NATIVE


def _assign(param, value):
    param[:] = value


def _set_grad(param, g):
    param.grad[:] = g
    param._fresh_grad = True  # as a backward pass marks it: a Gluon Trainer updates only such gradients


def _trained(block):
    """The block's Parameters that train (grad_req not 'null'), in collect_params order."""
    return [p for p in block.collect_params().values() if p.grad_req != "null"]


def _is_module(obj):
    return isinstance(obj, mx.gluon.Block)


def _module_params(obj):
    if not _is_module(obj):
        return None
    try:
        return [p.data() for p in _trained(obj)]
    except mx.gluon.parameter.DeferredInitializationError:
        raise ArgumentError(f"the parameters of this {type(obj).__name__} have no shapes yet (Gluon infers "
                            "them on the first call): run the model once first, e.g. d2l.predict_ch8(...)"
                            ) from None


def _call_with(block, params, *args, training=None):
    """The block run with ``params`` as its Parameters' data: each Parameter holds one array per device
    in ``_data``, swapped for the call (MXNet 1.9.1, the last release, will not change it)."""
    owned = _trained(block)
    saved = [p._data for p in owned]
    mode = contextlib.nullcontext() if training is None else \
        autograd.train_mode() if training else autograd.predict_mode()
    try:
        for p, value in zip(owned, params):
            p._data = [value]
        with mode:
            return block(*args)
    finally:
        for p, data in zip(owned, saved):
            p._data = data


def _infer_shapes(block, *args):
    if any(p._deferred_init for p in block.collect_params().values()):
        with autograd.predict_mode():
            block(*args)


def _book_seq2seq_init(block, device):
    """The book's ``train_seq2seq`` on MXNet: every parameter drawn anew by ``init.Xavier()``."""
    block.initialize(mx.init.Xavier(), force_reinit=True, ctx=device)


def _book_lm_init(block, device):
    """The book's ``train_ch8`` on MXNet: every Gluon block's weights drawn anew by ``init.Normal(0.01)``."""
    block.initialize(mx.init.Normal(0.01), force_reinit=True, ctx=device)


def _parameter(x):
    x.attach_grad()
    return x


def _backward(fn):
    with autograd.record():
        loss = fn()
    loss.backward()
    # Wait for the backward pass before anything writes the parameters in place: otherwise MXNet 1.9.1's
    # engine deadlocks on the scratch RNN's hand-written backward (an autograd.Function, Python code run
    # by the engine) followed by the optimizer's writes.
    nd.waitall()
    return loss


def _dense(num_outputs, sigma=None):
    """Gluon's ``Dense``, its weights ~ N(0, sigma^2) where sigma is given (``initialize()``'s default
    otherwise); its bias starts at zero either way."""
    weight_init = None if sigma is None else mx.init.Normal(sigma)
    return mx.gluon.nn.Dense(num_outputs, flatten=False, weight_initializer=weight_init)


def _initialized(block):
    block.initialize()
    return block


def _run_layer(layer, inputs, H):
    """The book's MXNet ``RNN.forward``: Gluon's layer takes and gives its state as a list."""
    if H is None:
        H, = layer.begin_state(inputs.shape[1], ctx=inputs.ctx)
    outputs, (H,) = layer(inputs, (H,))
    return outputs, H


def _scratch_arrays(block):
    """The arrays a block keeps as attributes (the book's scratch parameters), then its sub-blocks', those
    kept in a list too (the deep-RNN section's stack of scratch layers, which Gluon does not register)."""
    arrays, children = [], list(block._children.values())
    for _, value in sorted(vars(block).items()):
        if isinstance(value, (mx.np.ndarray, nd.NDArray)):
            arrays.append(value)
        elif isinstance(value, (list, tuple)):
            children.extend(v for v in value if isinstance(v, mx.gluon.Block) and v not in children)
    for child in children:
        arrays.extend(_scratch_arrays(child))
    return arrays


def _book_parameters(block):
    """The book's MXNet ``Module.parameters()``: the Gluon parameters, or the scratch arrays where there are
    none."""
    params = block.collect_params()
    return params if len(params.keys()) else _scratch_arrays(block)


def _param_list(params):
    if isinstance(params, mx.gluon.ParameterDict):
        return [p.data() for p in params.values() if p.grad_req != "null"]
    return list(params)


_IN_PLACE_HOOKS = _common.InPlaceHooks(grad=lambda p: p.grad, set_grad=_set_grad,
                                 assign=_assign, is_variable=lambda x: False, is_module=_is_module,
                                 module_params=_module_params, call_with=_call_with, device_keyword="ctx",
                                 module_bases=(mx.gluon.Block, mx.gluon.Block, "forward"),
                                 infer_shapes=_infer_shapes, book_seq2seq_init=_book_seq2seq_init,
                                 book_lm_init=_book_lm_init, parameter=_parameter, backward=_backward,
                                 no_grad=contextlib.nullcontext, set_training=lambda block, mode: None,
                                 dense=_dense,
                                 embedding=mx.gluon.nn.Embedding, run_layer=_run_layer,
                                 initialize=_initialized, scratch_params=_scratch_arrays,
                                 book_parameters=_book_parameters, param_list=_param_list,
                                 squared_loss_factor=0.5,
                                 optimizer_step=lambda optimizer: optimizer.step(1))


def in_place_hooks():
    # ``attach_grad()`` and ``l.backward()`` put a gradient on every parameter; the book's ``sgd`` and
    # ``grad_clipping`` rewrite parameters and gradients in place (see ``InPlaceHooks``).
    return _IN_PLACE_HOOKS


def dropout(x, p):
    return nd.Dropout(x, p=p, mode="always")


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    # Seed the shared NumPy generator and MXNet's own (used by dropout).
    _common.seed(seed)
    mx.random.seed(int(seed))


def detach(x):
    return x.detach()


def value_and_grad(f, has_aux=False):
    # ``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with autograd.record().

    def wrapped(params, *args):
        leaves = [p.detach() for p in params]  # fresh handles: the caller's arrays keep no grad
        for p in leaves:
            p.attach_grad()
        with autograd.record():
            out = f(leaves, *args)
            value, aux = out if has_aux else (out, None)
        try:
            value.backward()
            grads = [p.grad for p in leaves]
        except mx.base.MXNetError:
            if _in_graph(value):
                raise
            # it depends on no parameter (all of them detached): zero gradients, as on NumPy
            grads = [zeros_like(p) for p in leaves]
        value = value.detach()
        if has_aux:
            return (value, _common.tree_map(detach, aux)), grads
        return value, grads

    return wrapped


def custom_vjp(fwd, bwd, differentiable=False):
    if differentiable:
        # Recorded, fwd's backward pass runs inside MXNet's engine; bwd's operations would each be dispatched
        # from Python (~20 us apiece): the scratch LSTM's training step 81 -> 69 ms, the tanh RNN's 24 -> 19,
        # 6 epochs of the chapter's seq2seq model on the book's 600 pairs 22% faster, and less memory kept.
        # The same gradient (finite-difference tests on every backend).
        # fwd runs as one cached graph per input signature (``_mxnet_graphs``): one call from Python instead
        # of one per operation, the LSTM scan's forward and backward 31 -> 11 ms at the book's sizes. The
        # graph's operators depend on whether autograd records (``linear``'s choice of product).
        forward = TracedFunction(lambda *args: fwd(*args)[0])

        def recorded(*args):
            if not mx.util.is_np_array():
                return forward(args, autograd.is_recording())
            # under a reader's npx.set_np(), in legacy arrays throughout (as Function's forward below), which
            # share memory and recorded history with the mxnet.np ones
            with mx.util.np_array(False):
                outputs = forward(_common.tree_map(_as_nd, args), autograd.is_recording())
            return tuple(_common.tree_map(_as_np, outputs))

        recorded.graphs_built = lambda: forward.graphs_built
        return recorded

    class Function(autograd.Function):
        def forward(self, *args):
            outputs, residuals = fwd(*args)
            outputs = _common.tree_map(_as_nd, outputs)  # MXNet's Function works in legacy arrays
            # Fresh handles: residuals that are outputs (the stacked states) would otherwise carry the
            # recorded node that holds this Function, a cycle through C++ that is never freed.
            self.residuals = _common.tree_map(_handle, residuals)
            return tuple(outputs)

        def backward(self, *gs):
            # Legacy arrays throughout, as forward made the residuals: MXNet's threaded engine calls this
            # on a thread of its own, where npx.set_np() is off; the NaiveEngine on the caller's thread,
            # where a reader's npx.set_np() would make mxnet.np arrays that legacy ones refuse to mix with.
            with mx.util.np_array(False):
                return tuple(_as_nd(g) for g in bwd(self.residuals, *(_as_nd(g) for g in gs)))

    def call(*args):
        if autograd.is_recording():
            # MXNet's Function misroutes gradients when an input is not part of the recorded graph
            # (a constant such as an initial state): such inputs enter as fresh leaf variables.
            args = [a if _in_graph(a) else _leaf(a) for a in args]
        # The arguments go in as they are (under npx.set_np(), fwd then computes on mxnet.np arrays
        # throughout, its arithmetic operators included); the outputs come back in the caller's kind.
        outputs = Function()(*args)
        return _common.tree_map(_as_np, outputs) if mx.util.is_np_array() else outputs

    return call


def _in_graph(x):
    """Whether ``x`` is a recorded result or a variable (MXNet exposes this only by raising)."""
    try:
        autograd.get_symbol(x)
    except mx.base.MXNetError:
        return False
    return True


def _handle(x):
    """A new (legacy) handle on the data of ``x`` (a tensor), with no autograd history; anything else as
    is. Legacy, because a Function's backward runs with ``npx.set_np()`` off (see ``custom_vjp``), and legacy
    operators refuse ``mxnet.np`` arrays."""
    return _as_nd(x.detach()) if isinstance(x, nd.NDArray) else x


def _leaf(x):
    x = x.detach()
    x.attach_grad()
    return x


def scan(step, carry, xs, reverse=False, unroll=False):
    # A Python loop: each input unstacked once, each output stacked once.
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def compile(fn, calls="many", key=None):  # noqa: A001
    # MXNet compiles Gluon blocks (``hybridize``), not free functions: returned unchanged.
    return fn


def autocast(dtype, device=None):
    return None  # MXNet's AMP is float16 on GPUs (contrib.amp), not a context d2lrnn uses


def try_gpu(i=0):
    return mx.gpu(i) if num_gpus() > i else cpu()


def cpu():
    return mx.cpu()


def num_gpus():
    # How many GPUs MXNet sees.
    return mx.context.num_gpus()


def to_device(x, device):
    return x if device is None else x.as_in_context(device)


def device_of(x):
    return x.context


def set_num_threads(n):
    # MXNet fixes its thread pool at start-up (set OMP_NUM_THREADS); nothing to change here.
    pass


# -- the book's mxnet.np arrays --------------------------------------------------------------


def _as_nd(x):
    """A legacy ``NDArray`` handle on the memory of an ``mxnet.np`` array (anything else as it is);
    ``mxnet.np.ndarray`` is the subclass of ``NDArray`` here, told apart by one type check."""
    if type(x) is nd.NDArray or not isinstance(x, nd.NDArray):
        return x
    return x.as_nd_ndarray()


def _as_np(x):
    """An ``mxnet.np`` handle on the memory of a legacy ``NDArray`` (anything else as it is)."""
    return x.as_np_ndarray() if type(x) is nd.NDArray else x


def _np_aware(fn):
    """``fn`` taking ``mxnet.np`` arrays too and, under ``npx.set_np()``, returning them.

    Both views share memory and autograd history (a handle each, no copy), so parameters a reader made
    with ``np.random.normal`` and ``attach_grad()`` train through d2lrnn's legacy operators. Outside
    that mode the cost is one flag read per call.
    """

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not mx.util.is_np_array():
            return fn(*args, **kwargs)
        args = _common.tree_map(_as_nd, args)
        kwargs = {k: _common.tree_map(_as_nd, v) for k, v in kwargs.items()}
        return _common.tree_map(_as_np, fn(*args, **kwargs))

    return call


#: Shim functions that neither take nor make tensors (or, as value_and_grad, hand the caller's own
#: arrays to the caller's function; scan slices and stacks them with the np-aware unstack and stack),
#: left as they are.
_NOT_TENSOR_FUNCTIONS = ("native_rnn", "in_place_hooks", "value_and_grad", "custom_vjp", "scan", "compile",
                         "try_gpu", "cpu", "num_gpus", "manual_seed", "set_num_threads", "is_tensor", "shape",
                         "size", "to_numpy", "device_of")


def _make_np_aware():
    from . import SHIM_FUNCTIONS

    module = globals()
    for name in SHIM_FUNCTIONS:
        if name not in _NOT_TENSOR_FUNCTIONS:
            module[name] = _np_aware(module[name])


_make_np_aware()
