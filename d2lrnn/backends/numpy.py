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
    return _common.normal_numpy(mean, std, shape)


def uniform(low, high, shape, device=None):
    return _common.uniform_numpy(low, high, shape)


def zeros(shape, dtype=None, device=None):
    return np.zeros(shape, dtype=_common.numpy_dtype(dtype or _common.FLOAT))


def ones(shape, dtype=None, device=None):
    return np.ones(shape, dtype=_common.numpy_dtype(dtype or _common.FLOAT))


def zeros_like(x):
    return np.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    return _common.arange_numpy(start, stop, step, dtype)


def tensor(data, dtype=None, device=None):
    return _common.as_numpy(data, dtype)


def from_numpy(array, device=None):
    return _common.as_numpy(array)


def to_numpy(x):
    while hasattr(x, "_value"):  # an autograd box, possibly nested
        x = x._value
    return np.asarray(x)


def astype(x, dtype):
    if hasattr(x, "_value"):  # an autograd box: its astype has a gradient, anp.asarray has none
        return x.astype(dtype)
    return np.asarray(x).astype(_common.numpy_dtype(dtype))


def shape(x):
    return tuple(anp.shape(x))


def size(x):
    return int(anp.size(x))


def is_tensor(x):
    return isinstance(x, np.ndarray) or hasattr(x, "_value")


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    return anp.reshape(x, shape)


def transpose(x, axes=None):
    return anp.transpose(x, axes)


def concat(tensors, axis=0):
    return anp.concatenate(tuple(tensors), axis=axis)


def stack(tensors, axis=0):
    return anp.stack(tuple(tensors), axis=axis)


def unstack(x, axis=0):
    if axis == 0:
        return [x[i] for i in range(anp.shape(x)[0])]
    return [anp.squeeze(t, axis) for t in anp.split(x, anp.shape(x)[axis], axis)]


def take(x, indices, axis=0):
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
    if anp.ndim(a) > 2 and anp.ndim(b) == 2:
        # (..., k) @ (k, n) as one 2-D product: NumPy's stacked matmul makes one small BLAS call per
        # leading index, and autograd's gradient for b a (..., k, n) array summed afterwards.
        shape = anp.shape(a)
        return anp.reshape(anp.matmul(anp.reshape(a, (-1, shape[-1])), b), shape[:-1] + anp.shape(b)[-1:])
    return anp.matmul(a, b)


def dense(X, W, b):
    return matmul(X, W) + b


def linear(X, W, b=None):
    if to_numpy(W).flags.f_contiguous:  # W is a transposed view: W^T is a plain row-major matrix
        Y = anp.matmul(X, anp.transpose(W))
    else:
        # (W X^T)^T: OpenBLAS runs this ~1.6x faster than X @ W.T for a batch of 32 rows
        # (measured on this build; the result is a transposed view, which later ops accept).
        Y = anp.transpose(anp.matmul(W, anp.transpose(X)))
    return Y if b is None else Y + b


def prepack_linear(W):
    return W


def tanh(x):
    return anp.tanh(x)


def tanh_grad(Y, dY):
    if isinstance(Y, np.ndarray) and isinstance(dY, np.ndarray):
        out = np.multiply(Y, Y)  # not being differentiated: one buffer, updated in place
        np.subtract(1.0, out, out=out)
        return np.multiply(out, dY, out=out)
    return dY * (1.0 - Y * Y)


def sigmoid_grad(Y, dY):
    if isinstance(Y, np.ndarray) and isinstance(dY, np.ndarray):
        out = np.multiply(Y, Y)  # not being differentiated: one buffer, updated in place
        np.subtract(Y, out, out=out)
        return np.multiply(out, dY, out=out)
    return dY * (Y - Y * Y)


def sigmoid(x):
    # Elementwise 1 / (1 + exp(-x)), computed as (tanh(x/2) + 1) / 2 to avoid overflow.
    return 0.5 * (anp.tanh(0.5 * x) + 1.0)


def relu(x):
    return anp.maximum(x, 0.0)


def exp(x):
    return anp.exp(x)


def sin(x):
    return anp.sin(x)


def log(x):
    return anp.log(x)


def sqrt(x):
    return anp.sqrt(x)


def abs(x):  # noqa: A001 - the shim's name
    return anp.abs(x)


def maximum(x, y):
    return anp.maximum(x, y)


def minimum(x, y):
    return anp.minimum(x, y)


# -- reductions ------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return anp.sum(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
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
    return np.argmax(to_numpy(x), axis=axis).astype(np.int64)


def sum_of_squares(tensors):
    return _common.sum_of_squares(tensors, sum)


def nonfinite_probe(tensors):
    return _common.nonfinite_probe(tensors, sum)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    params, grads, Ms, Vs = list(params), list(grads), list(Ms), list(Vs)
    if all(type(T) is np.ndarray for T in (*params, *grads, *Ms, *Vs)):  # not autograd's boxes
        P, M, V = ([T.copy() for T in arrays] for arrays in (params, Ms, Vs))  # the inputs stay as they are
        return _common.adam_update_in_place(P, grads, M, V, scalars, beta1, beta2, eps, weight_decay)
    return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return np.eye(depth, dtype=_common.FLOAT)[to_numpy(indices)]


def softmax(x, axis=-1):
    return anp.exp(log_softmax(x, axis))


def _logsumexp(x, axis=-1, keepdims=False):
    # The shift is a constant (no gradient): its contribution to the gradient cancels anyway.
    shift = np.max(to_numpy(x), axis=axis, keepdims=True)
    out = anp.log(anp.sum(anp.exp(x - shift), axis=axis, keepdims=True)) + shift
    return out if keepdims else anp.squeeze(out, axis)


def log_softmax(x, axis=-1):
    return x - _logsumexp(x, axis=axis, keepdims=True)


def softmax_cross_entropy(logits, labels):
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
    return None


def in_place_hooks():
    return None


_dropout_rng = np.random.default_rng(0)


def dropout(x, p):
    # The mask comes from a generator of its own, reset by ``manual_seed``, so dropout does not
    # shift the numbers the shared generator gives to parameters and data.
    keep = (_dropout_rng.random(anp.shape(x)) >= p).astype(anp.result_type(x))
    return x * (keep / keep.dtype.type(1 - p))


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    global _dropout_rng
    _common.seed(seed)
    _dropout_rng = np.random.default_rng(int(seed))


def detach(x):
    return to_numpy(x)


def value_and_grad(f, has_aux=False):
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


def custom_vjp(fwd, bwd, differentiable=False):
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


def scan(step, carry, xs, reverse=False, unroll=False):
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def compile(fn, calls="many", key=None):  # noqa: A001
    return fn


def autocast(dtype, device=None):
    return None  # NumPy's products are float32 or float64 only


def try_gpu(i=0):
    # NumPy runs on the CPU only: always ``cpu()``.
    return cpu()


def cpu():
    return "cpu"


def num_gpus():
    return 0


def to_device(x, device):
    # NumPy arrays always live on the CPU: ``x`` unchanged.
    return x


def device_of(x):
    return None


def set_num_threads(n):
    os.environ.setdefault("OMP_NUM_THREADS", str(int(n)))
