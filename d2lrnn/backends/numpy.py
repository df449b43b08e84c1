"""NumPy backend: tensors are ``numpy.ndarray``; gradients come from HIPS ``autograd``.

Every operation goes through ``autograd.numpy`` so it can be differentiated.
This is the reference the other backends are tested against.
"""

import os

import autograd
import autograd.numpy as anp
import numpy as np
from autograd.extend import primitive

from . import _common

# -- creating and converting -------------------------------------------------------------


def normal(mean, std, shape, device=None):
    """Samples of N(mean, std^2) with the given shape, float32, from the shared NumPy generator."""
    return _common.normal_numpy(mean, std, shape)


def uniform(low, high, shape, device=None):
    """Samples of U(low, high) with the given shape, float32, from the shared NumPy generator."""
    return _common.uniform_numpy(low, high, shape)


def zeros(shape, dtype=None, device=None):
    """A float32 (or ``dtype``) tensor of zeros."""
    return np.zeros(shape, dtype=dtype or _common.FLOAT)


def ones(shape, dtype=None, device=None):
    """A float32 (or ``dtype``) tensor of ones."""
    return np.ones(shape, dtype=dtype or _common.FLOAT)


def zeros_like(x):
    """Zeros with the shape and dtype of ``x``."""
    return np.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    """``start, start+step, ...`` below ``stop``: int64 for integer arguments, else float32."""
    return _common.arange_numpy(start, stop, step, dtype)


def tensor(data, dtype=None, device=None):
    """A tensor from Python data or an array: floats become float32, integers int64."""
    return _common.as_numpy(data, dtype)


def from_numpy(array, device=None):
    """A tensor holding a NumPy array (float32/int64 by d2lrnn's rules)."""
    return _common.as_numpy(array)


def to_numpy(x):
    """A NumPy array with the values of ``x`` (no gradient attached)."""
    while hasattr(x, "_value"):  # an autograd box, possibly nested
        x = x._value
    return np.asarray(x)


def astype(x, dtype):
    """``x`` converted to ``dtype`` (a NumPy dtype or its name, e.g. ``'float32'``)."""
    if hasattr(x, "_value"):  # an autograd box: its astype has a gradient, anp.asarray has none
        return x.astype(dtype)
    return np.asarray(x).astype(dtype)


def shape(x):
    """The shape of ``x`` as a tuple of ints."""
    return tuple(anp.shape(x))


def size(x):
    """The number of elements of ``x``."""
    return int(anp.size(x))


def is_tensor(x):
    """True if ``x`` is a tensor of this backend."""
    return isinstance(x, np.ndarray) or hasattr(x, "_value")


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    """``x`` with a new shape (one entry may be -1)."""
    return anp.reshape(x, shape)


def transpose(x, axes=None):
    """``x`` with its axes permuted (reversed when ``axes`` is None)."""
    return anp.transpose(x, axes)


def concat(tensors, axis=0):
    """Join tensors along an existing axis."""
    return anp.concatenate(tuple(tensors), axis=axis)


def stack(tensors, axis=0):
    """Join tensors along a new axis."""
    return anp.stack(tuple(tensors), axis=axis)


def unstack(x, axis=0):
    """Split ``x`` along ``axis`` into a list of tensors with that axis removed."""
    if axis == 0:
        return [x[i] for i in range(anp.shape(x)[0])]
    return [anp.squeeze(t, axis) for t in anp.split(x, anp.shape(x)[axis], axis)]


def take(x, indices, axis=0):
    """Gather entries of ``x`` along ``axis`` (rows of a weight matrix, for an embedding)."""
    indices = to_numpy(indices)
    axis = axis % len(anp.shape(x))
    if axis == 0 and anp.ndim(x) == 2:
        return _take_rows(x, indices)
    return x[(slice(None),) * axis + (indices,)]


@primitive
def _take_rows(W, indices):
    return W[indices]


def _take_rows_vjp(ans, W, indices):
    # The gradient of a row gather scatters rows back: one_hot(indices)^T g, one small matmul
    # (autograd's default for indexing uses np.add.at, ~100x slower here).
    def vjp(g):
        flat = indices.reshape(-1)
        one_hot_t = np.zeros((W.shape[0], flat.size), dtype=g.dtype)
        one_hot_t[flat, np.arange(flat.size)] = 1
        return one_hot_t @ g.reshape(flat.size, -1)

    return vjp


autograd.extend.defvjp(_take_rows, _take_rows_vjp, None)


# -- arithmetic ------------------------------------------------------------------------------


def matmul(a, b):
    """Matrix product (batched over leading axes)."""
    return anp.matmul(a, b)


def linear(X, W, b=None):
    """X W^T (+ b) for a 2-D ``X`` and a weight ``W`` of shape (out, in); ``b`` broadcasts to it."""
    if to_numpy(W).flags.f_contiguous:  # W is a transposed view: W^T is a plain row-major matrix
        Y = anp.matmul(X, anp.transpose(W))
    else:
        # (W X^T)^T: OpenBLAS runs this ~1.6x faster than X @ W.T for a batch of 32 rows
        # (measured on this build; the result is a transposed view, which later ops accept).
        Y = anp.transpose(anp.matmul(W, anp.transpose(X)))
    return Y if b is None else Y + b


def prepack_linear(W):
    """``W`` laid out for fast repeated ``linear(X, W)`` (weight prepacking); the same values.

    ``linear`` itself picks the faster product form for either layout: unchanged.
    """
    return W


def tanh(x):
    """Elementwise tanh."""
    return anp.tanh(x)


def tanh_grad(Y, dY):
    """dY * (1 - Y^2), the gradient through Y = tanh(X) given Y: for hand-written backward passes."""
    if isinstance(Y, np.ndarray) and isinstance(dY, np.ndarray):
        out = np.multiply(Y, Y)  # not being differentiated: one buffer, updated in place
        np.subtract(1.0, out, out=out)
        return np.multiply(out, dY, out=out)
    return dY * (1.0 - Y * Y)


def sigmoid(x):
    """Elementwise 1 / (1 + exp(-x)), computed as (tanh(x/2) + 1) / 2 to avoid overflow."""
    return 0.5 * (anp.tanh(0.5 * x) + 1.0)


def relu(x):
    """Elementwise max(x, 0)."""
    return anp.maximum(x, 0.0)


def exp(x):
    """Elementwise e^x."""
    return anp.exp(x)


def log(x):
    """Elementwise natural logarithm."""
    return anp.log(x)


def sqrt(x):
    """Elementwise square root."""
    return anp.sqrt(x)


def abs(x):  # noqa: A001 - the shim's name
    """Elementwise |x|."""
    return anp.abs(x)


def maximum(x, y):
    """Elementwise maximum (either argument may be a Python number)."""
    return anp.maximum(x, y)


def minimum(x, y):
    """Elementwise minimum (either argument may be a Python number)."""
    return anp.minimum(x, y)


# -- reductions ------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (all axes when None)."""
    return anp.sum(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (all axes when None)."""
    # sum / count rather than anp.mean: autograd's mean gradient divides by a NumPy int64,
    # which under NumPy 2's promotion rules turns float32 gradients into float64 (and every
    # product downstream of the loss into a slow mixed-precision one).
    shape = anp.shape(x)
    axes = range(len(shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    count = 1
    for a in axes:
        count *= shape[a]
    dtype = anp.result_type(x)
    if dtype.kind == "f":
        count = dtype.type(count)  # a Python int would still promote a float32 scalar on NumPy 1.x
    return anp.sum(x, axis=axis, keepdims=keepdims) / count


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis`` (all axes when None)."""
    return _max(x, axis, keepdims)


@primitive
def _max(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims)


def _max_vjp(ans, x, axis, keepdims):
    # As autograd's rule (tied maxima share the gradient equally), but in x's dtype: autograd
    # divides by an integer count, which makes float32 gradients float64 on NumPy 2.
    def vjp(g):
        winners = (x == np.max(x, axis=axis, keepdims=True)).astype(x.dtype)
        winners /= winners.sum(axis=axis, keepdims=True)
        if axis is not None and not keepdims:
            g = np.expand_dims(g, axis)
        return g * winners

    return vjp


autograd.extend.defvjp(_max, _max_vjp, None, None)


def argmax(x, axis=None):
    """Index (int64) of the largest entry along ``axis``."""
    return np.argmax(to_numpy(x), axis=axis).astype(np.int64)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    """float32 one-hot vectors: shape ``indices.shape + (depth,)``."""
    return np.eye(depth, dtype=_common.FLOAT)[to_numpy(indices)]


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``."""
    return anp.exp(log_softmax(x, axis))


def _logsumexp(x, axis=-1, keepdims=False):
    # The shift is a constant (no gradient): its contribution to the gradient cancels anyway.
    shift = np.max(to_numpy(x), axis=axis, keepdims=True)
    out = anp.log(anp.sum(anp.exp(x - shift), axis=axis, keepdims=True)) + shift
    return out if keepdims else anp.squeeze(out, axis)


def log_softmax(x, axis=-1):
    """x - log(sum(exp(x))) along ``axis``, computed stably."""
    return x - _logsumexp(x, axis=axis, keepdims=True)


def softmax_cross_entropy(logits, labels):
    """Per-example -log softmax(logits)[label]; ``logits`` is (n, classes), ``labels`` (n,) ints."""
    labels = to_numpy(labels).reshape(-1)
    return _logsumexp(logits, axis=-1) - _pick(logits, labels)


@primitive
def _pick(logits, labels):
    return logits[np.arange(len(labels)), labels]


def _pick_vjp(ans, logits, labels):
    def vjp(g):
        out = np.zeros(np.shape(logits), dtype=np.result_type(g, logits))
        out[np.arange(len(labels)), labels] = g
        return out

    return vjp


autograd.extend.defvjp(_pick, _pick_vjp, None)


# -- recurrent layers, dropout ----------------------------------------------------------------


def native_rnn():
    """NumPy has no recurrent layers of its own: the cells' recurrences (d2lrnn.models) serve."""
    return None


def imperative():
    """NumPy arrays carry no gradients and HIPS autograd is functional: the book's in-place forms do not
    apply (``d2l.value_and_grad`` gives the gradients, ``d2l.sgd(params, grads, lr)`` new parameters)."""
    return None


_dropout_rng = np.random.default_rng(0)


def dropout(x, p):
    """Each element zeroed with probability ``p``, the rest scaled by 1 / (1 - p) (inverted dropout).

    The mask comes from a generator of its own, reset by ``manual_seed``, so dropout does not
    shift the numbers the shared generator gives to parameters and data.
    """
    keep = (_dropout_rng.random(anp.shape(x)) >= p).astype(anp.result_type(x))
    return x * (keep / keep.dtype.type(1 - p))


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    """Seed the shared NumPy generator (parameters and data come from it) and dropout's own."""
    global _dropout_rng
    _common.seed(seed)
    _dropout_rng = np.random.default_rng(int(seed))


def detach(x):
    """``x`` without gradient tracking."""
    return to_numpy(x)


def value_and_grad(f, has_aux=False):
    """``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with HIPS autograd.

    ``params`` is a list of tensors and ``grads`` a list of the same shapes. With
    ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is ``((value, aux), grads)``.
    """
    if has_aux:
        # grad_and_aux differentiates the first output and hands back the second unboxed.
        def value_then_aux(params, *args):
            value, aux = f(params, *args)
            return value, (value, aux)

        grad_aux = autograd.grad_and_aux(value_then_aux)

        def wrapped(params, *args):
            grads, (value, aux) = grad_aux(list(params), *args)
            # Tensors nested in aux are still autograd boxes: unbox them so that a carried
            # state does not keep this step's graph alive.
            return (to_numpy(value), _common.tree_map(to_numpy, aux)), list(grads)

        return wrapped
    vg = autograd.value_and_grad(f)

    def wrapped(params, *args):
        value, grads = vg(list(params), *args)
        return value, list(grads)

    return wrapped


def custom_vjp(fwd, bwd):
    """A function with a hand-written gradient: ``custom_vjp(fwd, bwd)(*args) -> outputs``.

    ``fwd(*args) -> (outputs, residuals)`` computes a tuple of outputs without gradient
    tracking; ``bwd(residuals, *output_grads) -> input_grads`` returns one gradient per
    argument (an output that was not used gets a zero gradient).
    """
    last = {}

    @primitive
    def f(*args):
        outputs, last["residuals"] = fwd(*args)
        last["outputs"] = outputs = tuple(outputs)
        return outputs

    def vjp_maker(argnums, ans, args, kwargs):
        # autograd builds the node right after calling f, so the stored residuals are this call's.
        residuals = last["residuals"] if ans is last.get("outputs") else fwd(*args)[1]

        def vjp(gs):
            grads = bwd(residuals, *gs)
            return tuple(grads[i] for i in argnums)

        return vjp

    autograd.extend.defvjp_argnums(f, vjp_maker)
    # While tracing, f returns autograd's SequenceBox; callers get a plain tuple of outputs.
    return lambda *args: tuple(f(*args))


def scan(step, carry, xs, reverse=False):
    """Run ``step`` over the steps of ``xs`` (its leading axis), carrying a state: ``(carry_T, ys)``.

        carry_t, y_t = step(carry_{t-1}, x_t)   for t = 1..T,   ys = [y_1; ...; y_T] (stacked on axis 0)

    ``xs`` is a tensor or a tuple of tensors (sliced together, one length T >= 1), the carry a tensor or
    a tuple of tensors, and ``y_t`` a tensor or a tuple of tensors (``()`` for none); ``ys`` mirrors it.
    ``reverse=True`` runs t = T..1 and still returns ``ys`` in the steps' order (``jax.lax.scan``'s
    meaning). A Python loop: each input unstacked once (views), each output stacked once.
    """
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def compile(fn):  # noqa: A001
    """NumPy has no compiler: the function is returned unchanged."""
    return fn


def try_gpu(i=0):
    """NumPy runs on the CPU only: always ``cpu()``."""
    return cpu()


def cpu():
    """The CPU device."""
    return "cpu"


def num_gpus():
    """NumPy sees no GPUs."""
    return 0


def to_device(x, device):
    """NumPy arrays always live on the CPU: ``x`` unchanged."""
    return x


def set_num_threads(n):
    """BLAS threads are fixed when NumPy starts (set OMP_NUM_THREADS); recorded for reference."""
    os.environ.setdefault("OMP_NUM_THREADS", str(int(n)))
