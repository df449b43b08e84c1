"""Forward values of every shim function, on the active backend, against plain float64 NumPy formulas.

``test_shim.py`` compares each backend with the NumPy backend, so on NumPy it compares NumPy with
itself; ``test_gradients.py`` checks gradients against finite differences of the same backend's
forward pass, so a wrong forward value with a consistent gradient passes both. Here every backend,
NumPy included, is held to a formula written out in this file (never through d2lrnn's NumPy
backend), together with the output's shape and dtype.

Inputs are float32 (the shim's dtype) drawn from a seeded NumPy generator, and the formulas are
evaluated in float64 on those same float32 numbers, so the input is exact on both sides and the only
difference is the backend's float32 rounding. Tolerances are therefore elementwise error bounds of
float32 arithmetic, in units of the float32 unit roundoff ``U = 2**-24`` (6e-8, half the spacing of
floats just above 1), each derived beside its helper below. They hold whatever order a kernel sums
in, and each is still orders of magnitude tighter than a wrong formula (a halved sigmoid, a softmax
over the wrong axis, a sum missing a term).

Operations that only move, select or compare numbers (reshaping, gathering, max, relu, one-hot, ...)
must be exact.
"""

import os

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.backends import SHIM_FUNCTIONS
from tests.backends.shared import book_sgd_and_clip, framework_gpu_count, product_and_tanh_sum

U = 2.0 ** -24  # float32 unit roundoff: |fl(x) - x| <= U |x| for one correctly rounded operation
TINY = float(np.finfo(np.float32).tiny)  # below this float32 is subnormal and has no relative precision

# Elementwise transcendental kernels (tanh, exp, log, sigmoid) of float32 are not correctly rounded:
# vectorised implementations (MKL/SLEEF in torch, Eigen in TensorFlow, oneDNN in MXNet, the C
# library's in NumPy) are within 1-4 ulps, and an ulp is at most 2 U relative. 8 U (4 ulps) leaves
# margin over the largest error measured here (about 2 U) and is ~1e6 times smaller than a wrong
# constant in a formula.
KERNEL = 8 * U

_r = np.random.default_rng(20240702)


def f32(*shape, scale=1.0):
    return (_r.standard_normal(shape) * scale).astype(np.float32)


def ints(high, *shape):
    return _r.integers(0, high, shape).astype(np.int64)


def distinct(*shape):
    """float32 entries all different by at least 0.25 (no ties for max/argmax, whatever the axis)."""
    n = int(np.prod(shape))
    return ((_r.permutation(n) - n / 2) * 0.25).astype(np.float32).reshape(shape)


def t(a):
    """A NumPy array as a tensor of the active backend (float32 stays float32, int64 stays int64)."""
    return ops.from_numpy(a)


def f64(a):
    return np.asarray(a, np.float64)


def check(got, expected, bound=0.0, dtype=np.float32):
    """``got`` (a tensor) has ``expected``'s shape, ``dtype``, and is within ``bound`` of it elementwise.

    ``bound`` (a number or an array broadcasting to the output) is an absolute error bound; 0 means
    exact. Returns the values as a NumPy array.
    """
    a = ops.to_numpy(got)
    expected = np.asarray(expected)
    assert a.shape == expected.shape, f"shape {a.shape}, expected {expected.shape}"
    assert a.dtype == np.dtype(dtype), f"dtype {a.dtype}, expected {np.dtype(dtype)}"
    if np.all(np.asarray(bound) == 0):
        np.testing.assert_array_equal(a, expected)
        return a
    err = np.abs(f64(a) - f64(expected))
    bound = np.broadcast_to(bound, err.shape)
    bad = ~(err <= bound)  # NaN fails too
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} entries off by more than their bound: worst "
        f"{float(np.max(np.where(bad, err / np.maximum(bound, 1e-300), 0))):.3g} x bound; "
        f"got {a[bad][:4]}, expected {expected[bad][:4]}")
    return a


def dot_bound(A, B, k, extra=0.0):
    """Error bound of a float32 matrix product of inner dimension ``k`` (plus an added ``extra``).

    The classic forward error bound of a sum of k products in any order, k U sum_i |a_i b_i|, plus the
    rounding of an added bias (U |b|): ``(k + 2) U (|A| @ |B| + |extra|)``.
    """
    return (k + 2) * U * (np.abs(f64(A)) @ np.abs(f64(B)) + np.abs(f64(extra)))


# -- creating and converting ----------------------------------------------------------------------


def test_normal_follows_the_shared_generator():
    # docs/python-api.md: "Random numbers come from one NumPy Generator (d2l.manual_seed(seed) resets it) and
    # are converted", so every backend draws np.random.default_rng(seed)'s numbers, in float32.
    for seed in (0, 3, 2024):
        ops.manual_seed(seed)
        ref = np.random.default_rng(seed)
        check(ops.normal(0.5, 2.0, (3, 4)), ref.normal(0.5, 2.0, (3, 4)).astype(np.float32))
        check(ops.normal(0, 1, 5), ref.normal(0, 1, (5,)).astype(np.float32))  # the stream goes on
        check(ops.normal(-1.0, 0.1, (2, 1, 3), device=ops.cpu()),
              ref.normal(-1.0, 0.1, (2, 1, 3)).astype(np.float32))
    ops.manual_seed(3)  # reseeding starts the stream again
    check(ops.normal(0.5, 2.0, (3, 4)), np.random.default_rng(3).normal(0.5, 2.0, (3, 4)).astype(np.float32))


def test_uniform_follows_the_shared_generator_and_shares_its_stream_with_normal():
    for seed in (0, 9):
        ops.manual_seed(seed)
        ref = np.random.default_rng(seed)
        check(ops.uniform(-0.5, 0.25, (3, 4)), ref.uniform(-0.5, 0.25, (3, 4)).astype(np.float32))
        check(ops.normal(0, 1, 5), ref.normal(0, 1, (5,)).astype(np.float32))
        check(ops.uniform(0, 1, 5, device=ops.cpu()), ref.uniform(0, 1, (5,)).astype(np.float32))


@pytest.mark.parametrize("name, value", [("zeros", 0.0), ("ones", 1.0)])
def test_zeros_and_ones(name, value):
    make = getattr(ops, name)
    check(make((2, 3)), np.full((2, 3), value))
    check(make(4), np.full((4,), value))
    check(make(()), np.full((), value))
    check(make((2, 3), dtype="float64"), np.full((2, 3), value), dtype=np.float64)
    check(make((3,), dtype="int64"), np.full((3,), value), dtype=np.int64)
    check(make((2,), dtype=np.float32, device=ops.cpu()), np.full((2,), value))


def test_zeros_like_keeps_shape_and_dtype():
    check(ops.zeros_like(t(f32(2, 3))), np.zeros((2, 3)))
    check(ops.zeros_like(t(ints(5, 4))), np.zeros(4), dtype=np.int64)
    check(ops.zeros_like(ops.tensor(f32(3), dtype="float64")), np.zeros(3), dtype=np.float64)


# (arguments, keywords, expected values written out by hand, dtype): docs/shim.md and the docstring
# promise int64 for integer arguments and float32 once any argument is a float; with one bound it is
# the stop (as in range and np.arange), keyword step included.
ARANGE = [
    ((5,), {}, [0, 1, 2, 3, 4], np.int64),
    ((2, 11), {}, [2, 3, 4, 5, 6, 7, 8, 9, 10], np.int64),
    ((2, 11, 3), {}, [2, 5, 8], np.int64),
    ((5, 0, -2), {}, [5, 3, 1], np.int64),
    ((-3, 3), {"step": 2}, [-3, -1, 1], np.int64),
    ((5,), {"step": 2}, [0, 2, 4], np.int64),
    ((0.0, 1.0, 0.25), {}, [0.0, 0.25, 0.5, 0.75], np.float32),
    ((0, 1, 0.25), {}, [0.0, 0.25, 0.5, 0.75], np.float32),
    ((3.0,), {}, [0.0, 1.0, 2.0], np.float32),
    ((1.5, 3), {}, [1.5, 2.5], np.float32),
    ((4,), {"dtype": "float32"}, [0.0, 1.0, 2.0, 3.0], np.float32),
    ((0.0, 3.0), {"dtype": "int64"}, [0, 1, 2], np.int64),
    ((3,), {"device": "cpu"}, [0, 1, 2], np.int64),
]


@pytest.mark.parametrize("args, kwargs, expected, dtype", ARANGE)
def test_arange(args, kwargs, expected, dtype):
    if kwargs.get("device") == "cpu":
        kwargs = dict(kwargs, device=ops.cpu())
    check(ops.arange(*args, **kwargs), np.array(expected), dtype=dtype)


def test_tensor_and_from_numpy_dtypes():
    # floats become float32, integers int64, an explicit dtype is honoured (docs/architecture.md, "The shim")
    check(ops.tensor([[1.5, 2.0], [3.0, 4.0]]), [[1.5, 2.0], [3.0, 4.0]])
    check(ops.tensor([3, 1, 2]), [3, 1, 2], dtype=np.int64)
    check(ops.tensor(2.5), np.array(2.5))
    check(ops.tensor(7), np.array(7), dtype=np.int64)
    check(ops.tensor(np.array([1.25, -2.0])), [1.25, -2.0])  # float64 array
    check(ops.tensor(np.array([4, -1], np.int32)), [4, -1], dtype=np.int64)
    check(ops.tensor([1, 2], dtype="float32"), [1.0, 2.0])
    a = np.array([1.0 + 2.0 ** -40, -3.0])  # not a float32 number: float64 must keep it
    check(ops.tensor(a, dtype="float64"), a, dtype=np.float64)
    check(ops.tensor([1, 2], dtype="int32"), [1, 2], dtype=np.int32)
    check(ops.tensor(a), a.astype(np.float32))
    x = f32(2, 3)
    check(ops.tensor(t(x)), x)  # a tensor of this backend: same values and dtype
    check(ops.tensor(t(np.array([2, 5])), dtype="float32"), [2.0, 5.0])

    check(ops.from_numpy(x), x)
    check(ops.from_numpy(x.astype(np.float64)), x)  # float64 -> float32 (x holds float32 numbers)
    check(ops.from_numpy(np.array([[3, 0]], np.int32)), [[3, 0]], dtype=np.int64)
    check(ops.from_numpy(np.array([7, 8, 9])), [7, 8, 9], dtype=np.int64)
    strided = f32(4, 6)[::2, 1::2].T  # a non-contiguous view
    check(ops.from_numpy(strided), strided)
    check(ops.from_numpy(x, device=ops.cpu()), x)
    check(ops.from_numpy(np.array(2.5)), np.array(2.5))  # 0-d stays 0-d
    check(ops.from_numpy(np.zeros((0, 3), np.float32)), np.zeros((0, 3)))  # and empty stays empty


def test_to_numpy_returns_a_numpy_array_with_the_values():
    x, i = f32(2, 3), ints(9, 4)
    total = np.sum(f64(x))
    for tensor, expected, bound, dtype in [
            (t(x), x, 0.0, np.float32), (t(i), i, 0.0, np.int64),
            (ops.tensor(2.5), np.array(2.5), 0.0, np.float32),
            (ops.sum(t(x)), total, 7 * U * np.sum(np.abs(f64(x))), np.float32),  # a 0-d result (see sum)
            (ops.argmax(t(x)), np.array(np.argmax(x)), 0.0, np.int64)]:
        a = ops.to_numpy(tensor)
        assert type(a) is np.ndarray, type(a)  # an array, not a NumPy scalar
        check(tensor, expected, bound, dtype)


def test_astype():
    x = np.array([[-1.75, -0.5, 0.0], [0.5, 2.9, 3.0]], np.float32)
    check(ops.astype(t(x), "int64"), [[-1, 0, 0], [0, 2, 3]], dtype=np.int64)  # truncation toward 0
    check(ops.astype(t(x), "float64"), x, dtype=np.float64)
    check(ops.astype(t(x), np.float32), x)
    check(ops.astype(t(np.array([3, -4, 0])), "float32"), [3.0, -4.0, 0.0])
    a = np.array([1.0 + 2.0 ** -40, -3.0])
    check(ops.astype(ops.tensor(a, dtype="float64"), "float32"), [1.0, -3.0])  # rounds to float32


def test_astype_while_gradients_are_recorded():
    # inside value_and_grad the argument is a traced tensor (an autograd box on NumPy)
    a = np.array([1.0 + 2.0 ** -40, -3.0, 0.5])

    def f(p):
        y = ops.astype(p[0], "float32")
        return ops.sum(y), y

    (value, y), _ = ops.value_and_grad(f, has_aux=True)([ops.tensor(a, dtype="float64")])
    check(y, a.astype(np.float32))
    check(value, np.float32(-1.5))  # 1 - 3 + 0.5, exact in float32


def test_shape_and_size_are_python_ints():
    for shape in [(2, 3, 4), (5,), (1, 1), ()]:
        x = t(np.zeros(shape, np.float32))
        s = ops.shape(x)
        assert s == shape and type(s) is tuple and all(type(d) is int for d in s)
        n = ops.size(x)
        assert n == int(np.prod(shape)) and type(n) is int
    assert ops.shape(ops.sum(t(f32(3, 4)))) == () and ops.size(ops.sum(t(f32(3, 4)))) == 1


def test_is_tensor():
    x = t(f32(2, 3))
    assert ops.is_tensor(x) is True
    assert ops.is_tensor(ops.tanh(x)) and ops.is_tensor(ops.sum(x, 0)) and ops.is_tensor(t(ints(3, 2)))
    for other in ([1.0, 2.0], 1.5, 3, None, "x", (x,)):
        assert ops.is_tensor(other) is False, other
    # README.md's backend table: the numpy backend's tensors are numpy.ndarray; on every other
    # backend a NumPy array is data to convert, not a tensor.
    assert ops.is_tensor(np.ones(3, np.float32)) is (d2l.backend_name() == "numpy")
    # a parameter while gradients are recorded (an autograd box on NumPy) is a tensor too
    seen = []
    ops.value_and_grad(lambda p: (seen.append(ops.is_tensor(p[0])), ops.sum(p[0] * p[0]))[1])([x])
    assert seen == [True]


# -- shaping ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("new_shape, expected", [((4, -1), (4, 6)), ((-1,), (24,)), ((3, 8), (3, 8)),
                                                  ((2, 12, 1), (2, 12, 1))])
def test_reshape(new_shape, expected):
    x = f32(2, 3, 4)
    check(ops.reshape(t(x), new_shape), x.ravel().reshape(expected))  # row-major order


@pytest.mark.parametrize("axes", [None, (2, 0, 1), (1, 0, 2), (0, 2, 1), (0, 1, 2)])
def test_transpose(axes):
    x = f32(2, 3, 4)
    out = ops.transpose(t(x)) if axes is None else ops.transpose(t(x), axes)
    order = (2, 1, 0) if axes is None else axes
    expected = np.empty([x.shape[a] for a in order], np.float32)
    for i in np.ndindex(*x.shape):  # element by element: out[i permuted] = x[i]
        expected[tuple(i[a] for a in order)] = x[i]
    check(out, expected)


def test_transpose_of_a_matrix():
    x = f32(3, 5)
    check(ops.transpose(t(x)), [[x[i, j] for i in range(3)] for j in range(5)])


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3, None])
def test_concat(axis):
    shape = [2, 3, 4]
    parts = []
    for n in (1, 2, 3):
        s = list(shape)
        s[0 if axis is None else axis] = n
        parts.append(f32(*s))
    expected = np.concatenate(parts, axis=0 if axis is None else axis)
    if axis is None:  # the default is axis 0
        check(ops.concat([t(p) for p in parts]), expected)
    else:
        check(ops.concat(tuple(t(p) for p in parts), axis), expected)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3, None])
def test_stack(axis):
    parts = [f32(2, 3) for _ in range(4)]
    a = 0 if axis is None else axis % 3
    expected = np.empty([4, 2, 3][1:a + 1] + [4] + [2, 3][a:], np.float32)
    for k, p in enumerate(parts):
        expected[(slice(None),) * a + (k,)] = p
    out = ops.stack([t(p) for p in parts]) if axis is None else ops.stack([t(p) for p in parts], axis)
    check(out, expected)


@pytest.mark.parametrize("shape", [(3, 2, 4), (3, 2, 1), (1, 2, 1)])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3, None])
def test_unstack(shape, axis):
    # size-1 axes other than the split one must stay (a squeeze of every size-1 axis would drop them)
    x = distinct(*shape)
    a = 0 if axis is None else axis % 3
    pieces = ops.unstack(t(x)) if axis is None else ops.unstack(t(x), axis)
    assert len(pieces) == shape[a]
    for k, piece in enumerate(pieces):
        check(piece, x[(slice(None),) * a + (k,)])


TAKE = [
    # (x, indices, axis): rows of a matrix (the embedding path), with repeats and 2-D indices
    (f32(6, 3), np.array([[1, 3, 1], [5, 0, 3]]), 0),
    (f32(6, 3), np.array([4, 4, 4, 2]), 0),
    (f32(4, 3, 2), np.array([3, 0, 3]), 0),
    (f32(6, 3), np.array([2, 0, 2, 1]), 1),
    (f32(6, 3), np.array([[2, 2], [0, 1]]), 1),
    (f32(4, 3, 2), np.array([1, 1, 0]), 2),
    (f32(4, 3, 2), np.array([[1, 0], [1, 1]]), -1),
    (f32(6, 3), np.array([0, 2, 2]), -1),
    (f32(6, 3), np.array([5, 1]), -2),
]


@pytest.mark.parametrize("case", range(len(TAKE)))
def test_take(case):
    x, idx, axis = TAKE[case]
    a = axis % x.ndim
    expected = np.empty(x.shape[:a] + idx.shape + x.shape[a + 1:], np.float32)
    for j in np.ndindex(*idx.shape):  # by hand: out[..., j, ...] = x[..., idx[j], ...]
        expected[(slice(None),) * a + j] = x[(slice(None),) * a + (idx[j],)]
    check(ops.take(t(x), t(idx.astype(np.int64)), axis), expected)
    if axis == 0:
        check(ops.take(t(x), t(idx.astype(np.int64))), expected)  # the default axis is 0


# -- arithmetic ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", [((3, 5), (5, 4)), ((1, 7), (7, 1)), ((2, 3, 5), (2, 5, 4)),
                                    ((4, 2, 6), (4, 6, 3))])
def test_matmul(shapes):
    A, B = f32(*shapes[0]), f32(*shapes[1])
    k = shapes[0][-1]
    expected = np.zeros(A.shape[:-1] + B.shape[-1:])
    for i in range(k):  # sum over the inner index, written out
        expected += f64(A[..., :, i:i + 1]) * f64(B[..., i:i + 1, :])
    check(ops.matmul(t(A), t(B)), expected, dot_bound(A, B, k))


@pytest.mark.parametrize("rows", [(5,), (2, 3)], ids=["2-D", "stacked"])
def test_dense(rows):
    # X W + b over a stack of rows (on MXNet FullyConnected with its bias)
    X, W, b = f32(*rows, 3), f32(3, 4), f32(4)
    expected = np.einsum("...i,io->...o", f64(X), f64(W)) + f64(b)
    check(ops.dense(t(X), t(W), t(b)), expected, dot_bound(X, W, 3, b))


@pytest.mark.parametrize("bias", [None, "vector", "matrix", "row", "transposed weight"])
def test_linear(bias):
    X, W = f32(5, 3), f32(4, 3)
    b = {None: None, "vector": f32(4), "matrix": f32(5, 4), "row": f32(1, 4),
         "transposed weight": f32(5, 4)}[bias]
    expected = np.einsum("ni,oi->no", f64(X), f64(W)) + (0.0 if b is None else f64(b))
    bound = dot_bound(X, W.T, 3, 0.0 if b is None else b)
    if bias == "transposed weight":  # W given as a transposed view, as BPTT passes W_hh^T
        out = ops.linear(t(X), ops.transpose(t(np.ascontiguousarray(W.T))), t(b))
    elif b is None:
        out = ops.linear(t(X), t(W))
    else:
        out = ops.linear(t(X), t(W), t(b))
    check(out, expected, bound)


def test_prepack_linear_keeps_the_values():
    # A packed weight is whatever ``linear`` multiplies by fastest (W^T stored on TensorFlow): what it
    # must keep is the product.
    X, W, b = f32(5, 3), f32(4, 3), f32(5, 4)
    W_view = ops.transpose(t(np.ascontiguousarray(W.T)))
    expected = np.einsum("ni,oi->no", f64(X), f64(W)) + f64(b)
    for packed in (ops.prepack_linear(t(W)), ops.prepack_linear(W_view)):
        check(ops.linear(t(X), packed, t(b)), expected, dot_bound(X, W.T, 3, b))
        check(ops.linear(t(X), packed), expected - f64(b), dot_bound(X, W.T, 3))


def test_torch_prepacks_for_onednn_outside_autograd_only():
    # the fast path must engage where the hand-written scans use it (their loops run outside
    # autograd), and stay out of the way of a weight being differentiated
    if d2l.backend_name() != "torch":
        return  # oneDNN prepacking is torch's; the other backends' layouts are in the test above
    import torch

    from d2lrnn.backends.torch import PACK_MIN_ENTRIES

    W = torch.from_numpy(f32(PACK_MIN_ENTRIES // 128, 128))  # the smallest weight that is packed
    packed = ops.prepack_linear(W)
    assert packed.is_mkldnn == torch.backends.mkldnn.is_available()
    X, b = f32(4, 128), f32(4, W.shape[0])
    expected = np.einsum("ni,oi->no", f64(X), f64(W.numpy())) + f64(b)
    bound = dot_bound(X, W.numpy().T, 128, b)
    check(ops.linear(t(X), packed, t(b)), expected, bound)
    check(ops.linear(t(X), packed, t(b[:1])), expected - f64(b) + f64(b[:1]), bound)
    W.requires_grad_(True)
    assert ops.prepack_linear(W) is W  # differentiated: left to F.linear
    with torch.no_grad():
        assert ops.prepack_linear(W).is_mkldnn == torch.backends.mkldnn.is_available()
    small = torch.from_numpy(f32(PACK_MIN_ENTRIES // 128 - 1, 128))
    assert ops.prepack_linear(small) is small  # a packed product of a small weight is the slower one


@pytest.mark.parametrize("a_transposed", [False, True])
def test_torch_takes_large_products_outside_autograd_to_onednn(monkeypatch, a_transposed):
    # On CPUs not made by Intel the torch shim multiplies large float32 matrices with oneDNN, not MKL (the
    # scans' weight gradients, H^T dG: ``a`` a transposed view); forced on here, whatever this CPU is.
    if d2l.backend_name() != "torch":
        return  # torch's BLAS and oneDNN; every backend's products are in test_matmul
    import torch

    from d2lrnn.backends import torch as shim

    monkeypatch.setattr(shim, "ONEDNN_PRODUCTS", torch.backends.mkldnn.is_available())
    rows = shim.ONEDNN_MIN_ROWS
    A, B = f32(rows, 96), f32(96, 40)
    a = torch.from_numpy(np.ascontiguousarray(A.T)).t() if a_transposed else torch.from_numpy(A)
    expected, bound = f64(A) @ f64(B), dot_bound(A, B, 96)
    check(ops.matmul(a, t(B)), expected, bound)
    calls = []
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise",
                        lambda *args: calls.append(args) or torch.matmul(args[0], args[1].t()))
    ops.matmul(a, t(B))
    assert len(calls) == shim.ONEDNN_PRODUCTS  # taken there where oneDNN is built in
    ops.matmul(a[: rows - 1], t(B))  # fewer rows: MKL
    a.requires_grad_(True)
    product = ops.matmul(a, t(B))  # differentiated: torch.matmul, which autograd knows
    assert product.requires_grad and len(calls) == shim.ONEDNN_PRODUCTS


def test_autocast_runs_products_in_bfloat16_where_the_backend_has_it():
    assert ops.autocast("float32") is None  # nothing to change
    context = ops.autocast("bfloat16")
    if d2l.backend_name() != "torch":
        assert context is None  # the callers refuse bfloat16 in one line (tests/lm/test_train.py)
        return
    import torch

    A, B = f32(8, 64), f32(64, 5)
    with context:
        inside = ops.matmul(t(A), t(B))
    # the inputs rounded to bfloat16 (8 significant bits), then multiplied and summed exactly enough:
    # within the float32 bound of a product of the rounded inputs, and not the float32 product itself
    A16, B16 = (torch.from_numpy(M).bfloat16().float().numpy() for M in (A, B))
    assert inside.dtype == torch.bfloat16
    inside = inside.float().numpy()
    expected = f64(A16) @ f64(B16)
    check(inside, expected, dot_bound(A16, B16, 64) + 2 ** -8 * np.abs(expected))  # + the output's rounding
    assert not np.allclose(inside, f64(A) @ f64(B), rtol=0, atol=1e-5)
    assert ops.matmul(t(A), t(B)).dtype == torch.float32  # outside, float32 again


@pytest.mark.parametrize("onednn_bfloat16", [True, False], ids=["onednn-bf16", "no-onednn-bf16"])
def test_autocast_runs_torchs_lstm_where_onednn_has_no_bfloat16(monkeypatch, onednn_bfloat16):
    # On a CPU without AVX-512 oneDNN has no bfloat16 LSTM: autocast then turns oneDNN off for its step and
    # torch's own kernels run the layer. Forced both ways here, whatever this CPU is.
    if d2l.backend_name() != "torch":
        return  # the other backends have no autocast (test above)
    import torch

    lstm = torch.nn.LSTM(6, 8)
    X = torch.from_numpy(f32(5, 3, 6))
    enabled = torch._C._get_mkldnn_enabled()
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn_bfloat16)
    with ops.autocast("bfloat16"):
        assert torch._C._get_mkldnn_enabled() == (enabled and onednn_bfloat16)
        assert ops.matmul(t(f32(4, 6)), t(f32(6, 2))).dtype == torch.bfloat16  # the products still bfloat16
        if not onednn_bfloat16:
            Y, _ = lstm(X)  # oneDNN's bfloat16 LSTM would be refused on such a CPU
            expected, _ = lstm(X.bfloat16().float())
            np.testing.assert_allclose(Y.float().detach().numpy(), expected.detach().numpy(), atol=2 ** -6)
    assert torch._C._get_mkldnn_enabled() == enabled  # as it was after the step


# Inputs with zeros, tiny and large entries besides ordinary ones.
_SPECIAL = np.array([0.0, -0.0, 1e-30, -1e-6, 0.5, -3.0, 9.0, -17.0, 20.0, 45.0, -100.0, 1000.0],
                    np.float32)
_WIDE = np.concatenate([f32(3, 4, scale=3.0).ravel(), _SPECIAL]).reshape(4, 6)


def test_tanh():
    # elementwise kernel: KERNEL relative (tanh(1000) = 1 is reached well within float32)
    check(ops.tanh(t(_WIDE)), np.tanh(f64(_WIDE)), KERNEL * np.abs(np.tanh(f64(_WIDE))))


def test_tanh_grad():
    # dY (1 - Y^2) with |Y| < 1 and Y = +-1 exactly. In float32, Y*Y is rounded (error U Y^2), 1 - Y^2
    # is rounded (U |1 - Y^2|) and so is the product (U |result|): at most 3 U |dY| (Y^2 + |1 - Y^2|)
    # whatever the order or fusion; 4 U leaves a margin. (Near |Y| = 1 the cancellation in 1 - Y^2 is
    # what makes the bound absolute in |dY|.)
    Y = np.concatenate([np.tanh(f32(3, 4)).ravel(), [1.0, -1.0, 0.0, 0.9999999]]).astype(np.float32)
    dY = f32(16, scale=2.0)
    Y, dY = Y.reshape(4, 4), dY.reshape(4, 4)
    expected = f64(dY) * (1.0 - f64(Y) ** 2)
    bound = 4 * U * np.abs(f64(dY)) * (f64(Y) ** 2 + np.abs(1 - f64(Y) ** 2))
    check(ops.tanh_grad(t(Y), t(dY)), expected, bound)


def test_sigmoid_grad():
    # dY Y (1 - Y) with 0 < Y < 1 and Y = 0, 1/2, 1 exactly. Composed as dY (Y - Y*Y) or fused as
    # dY (1 - Y) Y, each of the three roundings is at most U of its result: at most
    # 3 U |dY| (Y^2 + Y |1 - Y| + |Y - Y^2|) whatever the order; 4 U leaves a margin.
    Y = np.concatenate([1 / (1 + np.exp(-f32(3, 4, scale=3.0).ravel())), [0.0, 0.5, 1.0, 0.9999999]])
    Y, dY = Y.astype(np.float32).reshape(4, 4), f32(16, scale=2.0).reshape(4, 4)
    expected = f64(dY) * f64(Y) * (1.0 - f64(Y))
    Y64 = f64(Y)
    bound = 4 * U * np.abs(f64(dY)) * (Y64**2 + Y64 * np.abs(1 - Y64) + np.abs(Y64 - Y64**2))
    check(ops.sigmoid_grad(t(Y), t(dY)), expected, bound)


def test_sigmoid():
    # 1 / (1 + exp(-x)) in float64 (it is 0 at x = -1000 and -100 in float64 as in float32, as the
    # true values are below both formats' range or resolution there).
    x = f64(_WIDE)
    with np.errstate(over="ignore"):
        expected = 1.0 / (1.0 + np.exp(-x))
    # KERNEL relative, plus 2 U absolute: a backend may compute it as (tanh(x/2) + 1) / 2 (NumPy's,
    # to avoid overflow), whose rounding of the sum tanh + 1 (<= 2) is absolute, ~U. Large negative
    # x then gives 0 for e^x ~ 1e-9 and below: that loss of relative precision in the tail is within
    # the bound, a wrong formula (a scale, an offset of 1/2) is not.
    check(ops.sigmoid(t(_WIDE)), expected, KERNEL * expected + 2 * U)
    check(ops.sigmoid(t(np.float32([0.0]))), [0.5])  # exactly 1/2 whichever formula


def test_relu_abs_exact():
    x = _WIDE
    check(ops.relu(t(x)), np.where(x > 0, x, 0.0).astype(np.float32))
    check(ops.abs(t(x)), np.where(x < 0, -x, x).astype(np.float32))
    check(ops.relu(t(np.float32([0.25, 0.999, 1.0, 1.5, -0.25]))), np.float32([0.25, 0.999, 1.0, 1.5, 0.0]))


def test_exp():
    x = np.concatenate([f32(20, scale=3.0), [0.0, -80.0, 80.0, 1e-7]]).astype(np.float32)
    expected = np.exp(f64(x))
    check(ops.exp(t(x)), expected, KERNEL * expected)


def test_sin():
    # the sine-wave data's arguments (0.01 t for t up to 1000) and points where sin is 0, 1 and -1
    x = np.concatenate([0.01 * np.arange(1, 1001), [0.0, np.pi / 2, -np.pi / 2]]).astype(np.float32)
    expected = np.sin(f64(x))
    check(ops.sin(t(x)), expected, KERNEL * np.abs(expected) + U)


@pytest.mark.parametrize("name", ["log", "sqrt"])
def test_log_and_sqrt(name):
    x = np.concatenate([_r.uniform(0.05, 5.0, 20), [1.0, 1.0 + 2 ** -20, 1e-30, 1e30]]).astype(np.float32)
    expected = getattr(np, name)(f64(x))
    # sqrt is correctly rounded (IEEE 754): U relative, 2 U to be safe about the last bit; but Paddle's CPU
    # kernel, which runs arrays of 15 floats or more through a vectorised approximation, up to 3.6 ulp off
    # (7.2 U relative; 38% of 4M uniform draws not correctly rounded on an AVX-512 EPYC, 2026-12-07; arrays
    # of up to 14 floats are correctly rounded): 8 U there. log: KERNEL relative plus U absolute, as log
    # near 1 is a small value whose kernel error is absolute.
    sqrt_units = 8 if d2l.backend_name() == "paddle" else 2
    bound = sqrt_units * U * expected if name == "sqrt" else KERNEL * np.abs(expected) + U
    check(getattr(ops, name)(t(x)), expected, bound)
    if name == "sqrt":
        check(ops.sqrt(t(np.float32([0.0, 4.0, 0.25]))), [0.0, 2.0, 0.5])


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_exact(name):
    pick = np.maximum if name == "maximum" else np.minimum
    fn = getattr(ops, name)
    a, b = f32(3, 4), f32(3, 4)
    b[0, 0] = a[0, 0]  # a tie
    check(fn(t(a), t(b)), pick(a, b))
    check(fn(t(a), 0.25), pick(a, np.float32(0.25)))
    check(fn(-0.5, t(a)), pick(np.float32(-0.5), a))
    check(fn(t(a), t(b[0])), pick(a, b[0]))  # broadcasting a row


# -- reductions ------------------------------------------------------------------------------------

_AXES = [None, 0, 1, -1, 2, -2]
# (2, 1, 3): a size-1 axis that a reduction over another axis must keep (squeezing every size-1 axis
# would drop it)
_RED_SHAPES = [(3, 4), (2, 3, 5), (2, 1, 3)]


def _red_cases():
    return [(shape, axis, keep) for shape in _RED_SHAPES for axis in _AXES
            for keep in (False, True) if axis is None or -len(shape) <= axis < len(shape)]


def _reduce_shape(shape, axis, keepdims):
    axes = range(len(shape)) if axis is None else [axis % len(shape)]
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _reduced(x, axis, keepdims, fn):
    """fn over the reduced entries of each output position, written out with moveaxis."""
    if axis is None:
        out = np.array(fn(x.ravel()))
    else:
        moved = np.moveaxis(x, axis, -1)
        out = np.array([fn(v) for v in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])
    return out.reshape(_reduce_shape(x.shape, axis, keepdims))


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape, axis, keepdims", _red_cases())
def test_sum_and_mean(name, shape, axis, keepdims):
    x = f32(*shape)
    n = x.size if axis is None else shape[axis]
    total = _reduced(f64(x), axis, keepdims, lambda v: float(np.add.reduce(v)))
    abs_total = _reduced(np.abs(f64(x)), axis, keepdims, lambda v: float(np.add.reduce(v)))
    # a float32 sum of n terms in any order errs by at most (n - 1) U sum|x_i|; a mean adds the
    # rounding of one division (or of the product by 1/n): (n + 1) U sum|x_i| / n
    if name == "sum":
        out = ops.sum(t(x), axis, keepdims) if axis is not None or keepdims else ops.sum(t(x))
        check(out, total, (n + 1) * U * abs_total)
    else:
        out = ops.mean(t(x), axis, keepdims) if axis is not None or keepdims else ops.mean(t(x))
        check(out, total / n, (n + 2) * U * abs_total / n)


@pytest.mark.parametrize("shape, axis, keepdims", _red_cases())
def test_max_exact(shape, axis, keepdims):
    x = distinct(*shape)
    expected = _reduced(x, axis, keepdims, lambda v: sorted(v)[-1]).astype(np.float32)
    out = ops.max(t(x), axis, keepdims) if axis is not None or keepdims else ops.max(t(x))
    check(out, expected)


@pytest.mark.parametrize("shape, axis", [(s, a) for s in _RED_SHAPES for a in _AXES
                                         if a is None or -len(s) <= a < len(s)])
def test_argmax(shape, axis):
    x = distinct(*shape)
    if axis is None:  # the index into the flattened tensor
        flat = list(x.ravel())
        expected = np.array(flat.index(max(flat)))
        check(ops.argmax(t(x)), expected, dtype=np.int64)
    else:
        expected = _reduced(x, axis, False, lambda v: list(v).index(max(v)))
        check(ops.argmax(t(x), axis), expected, dtype=np.int64)



@pytest.mark.parametrize("shapes", [[(2,), (1, 1)], [(3, 4), (5,), ()], [(7, 5), (5,), (5, 7), (7,)] * 10])
def test_sum_of_squares(shapes):
    # a list of tensors, one of them a scalar, and 40 of them (one fused kernel on MXNet): the float32
    # sum of n squares errs by at most (n + 1) U of the exact sum (every term positive)
    xs = [f32(*shape) for shape in shapes]
    exact = sum(float(np.sum(f64(x) ** 2)) for x in xs)
    n = sum(x.size for x in xs)
    check(ops.sum_of_squares([t(x) for x in xs]), np.array(exact), (n + 1) * U * exact)
    check(ops.sum_of_squares([t(np.array([1.0, 2.0], np.float32)), t(np.array([[3.0]], np.float32))]),
          np.array(14.0))


@pytest.mark.parametrize("shapes", [[(2,), (1, 1)], [(7, 5), (5,), (5, 7), (7,)] * 10])
def test_nonfinite_probe_is_zero_exactly_when_every_entry_is_finite(shapes):
    # 40 tensors: one fused kernel on MXNet; huge finite entries are finite too
    xs = [f32(*shape) for shape in shapes]
    xs[0][0] = 3e38
    assert float(ops.to_numpy(ops.nonfinite_probe([t(x) for x in xs]))) == 0.0
    for bad in (np.inf, -np.inf, np.nan):
        for where in (0, len(xs) - 1):
            changed = [x.copy() for x in xs]
            changed[where].reshape(-1)[-1] = bad
            probe = ops.nonfinite_probe([t(x) for x in changed])
            assert ops.shape(probe) == () and not np.isfinite(float(ops.to_numpy(probe))), (bad, where)


def test_adam_update_is_the_formula_and_leaves_its_inputs_as_they_were():
    # Step t = 1 from zero moments, lr 0.1, gradients 0.5 and -2: M = 0.1 G, V = 0.001 G^2, and with the
    # bias corrections c1 = 10, c2 = 1000 each step is G / |G| (less eps): P = 1 -+ 0.1. With weight decay
    # 0.5 the step adds 0.5 P: 1 - 0.1 * 1.5 and 1 - 0.1 * (-0.5).
    P, G = np.ones(2, np.float32), np.array([0.5, -2.0], np.float32)
    zero = np.zeros(2, np.float32)
    scalars = t(np.array([0.1, 1 / (1 - 0.9), 1 / (1 - 0.999)], np.float32))
    inputs = [t(P)], [t(G)], [t(zero)], [t(zero)]
    for weight_decay, expected in ((0.0, [0.9, 1.1]), (0.5, [0.85, 1.05])):
        (P1,), (M1,), (V1,) = ops.adam_update(*inputs, scalars, 0.9, 0.999, 1e-8, weight_decay)
        check(P1, np.array(expected), 4 * U)
        check(M1, 0.1 * f64(G), 2 * U * np.abs(G))
        check(V1, 0.001 * f64(G) ** 2, 4 * U * f64(G) ** 2)
    for given, before in zip(inputs, (P, G, zero, zero)):  # a new list of new tensors: nothing written
        check(given[0], before)

# -- classification helpers ------------------------------------------------------------------------


@pytest.mark.parametrize("idx", [np.array([0, 4, 2, 2]), np.array([[1, 0, 3], [4, 4, 2]]), np.array(3)])
def test_one_hot(idx):
    expected = np.zeros(idx.shape + (5,), np.float32)
    for j in np.ndindex(*idx.shape):
        expected[j + (int(idx[j]),)] = 1.0
    check(ops.one_hot(t(idx.astype(np.int64)), 5), expected)


def _logits():
    big = f32(4, 6, scale=2.0) + 1000.0  # large logits: exp would overflow without a shift
    spread = np.array([[1000.0, 0.0, -1000.0, 5.0, 999.0, -3.0]] * 2, np.float32)
    spread[1] = spread[1][::-1]
    return {"ordinary": f32(4, 6, scale=3.0), "large": big.astype(np.float32), "spread": spread,
            "3-D": f32(2, 3, 4, scale=3.0)}


_LOGITS = _logits()


def _log_softmax64(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _log_softmax_bound(x, axis):
    """Error bound of a float32 log-softmax (and of the log of a probability) along ``axis``.

    In float32, x - max(x) is rounded (U |x - m|), exp and the n-term sum err by KERNEL and n U
    relative (an absolute error of about that much once the log is taken, as the sum is >= 1), the log
    by KERNEL |log sum| <= KERNEL log n, and adding the shift back (m + log sum, as some kernels do)
    by U (|m| + log n). Every term is at most 2 U (|x| + |m| + n) with KERNEL = 8 U, so 4 U (|x| +
    max|x| + n + 8) bounds them with a margin. For logits of 1000 this is ~2.5e-4: the spacing of
    float32 at 1000 is 6e-5, so no float32 computation can do better than ~3e-5 there.
    """
    x = f64(x)
    n = x.shape[axis]
    return 4 * U * (np.abs(x) + np.max(np.abs(x), axis=axis, keepdims=True) + n + 8)


@pytest.mark.parametrize("which", list(_LOGITS))
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_log_softmax(which, axis):
    x = _LOGITS[which]
    a = -1 if axis is None else axis
    out = ops.log_softmax(t(x)) if axis is None else ops.log_softmax(t(x), axis)  # default: last axis
    check(out, _log_softmax64(f64(x), a), _log_softmax_bound(x, a))


@pytest.mark.parametrize("which", list(_LOGITS))
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_softmax(which, axis):
    x = _LOGITS[which]
    a = -1 if axis is None else axis
    expected = np.exp(_log_softmax64(f64(x), a))
    # relative error = the absolute error of log p (as above) plus exp's own KERNEL; TINY absolute:
    # probabilities below float32's normal range have no relative precision (e^-1000 is 0 anyway)
    bound = expected * (_log_softmax_bound(x, a) + KERNEL) + TINY
    out = ops.softmax(t(x)) if axis is None else ops.softmax(t(x), axis)
    got = check(out, expected, bound)
    # so they add up to 1 within the sum of their bounds and the sum's own rounding
    np.testing.assert_array_less(np.abs(np.sum(f64(got), axis=a) - 1.0),
                                 np.sum(bound, axis=a) + x.shape[a] * U * 2)


@pytest.mark.parametrize("which", ["ordinary", "large", "spread", "one example", "labels as a column"])
def test_softmax_cross_entropy(which):
    if which in ("ordinary", "large", "labels as a column"):
        x = _LOGITS["large" if which == "large" else "ordinary"]
        y = ints(6, 4)
    elif which == "spread":  # labels at 1000 (loss ~0), -1000 (loss 2000) and in between
        x = _LOGITS["spread"]
        y = np.array([0, 0])
        x = np.concatenate([x, x, x]).astype(np.float32)
        y = np.array([0, 2, 4, 0, 2, 5])
    else:  # a batch of one: the result keeps its axis, shape (1,)
        x, y = f32(1, 6, scale=3.0), np.array([3])
    lsm = _log_softmax64(f64(x), -1)
    expected = np.array([-lsm[i, y[i]] for i in range(len(y))])
    bound = np.array([_log_softmax_bound(x, -1)[i, y[i]] for i in range(len(y))])
    # every backend flattens the labels (reshape(-1)), so labels of shape (n, 1) read as (n,)
    labels = y.reshape(-1, 1) if which == "labels as a column" else y
    check(ops.softmax_cross_entropy(t(x), t(labels.astype(np.int64))), expected, bound)


# -- the recurrent layer ---------------------------------------------------------------------------


def test_dropout_zeroes_a_fraction_p_and_scales_the_rest():
    x = f32(200, 100) + 10  # no zeros of its own
    y = f64(ops.to_numpy(ops.dropout(t(x), 0.3)))
    kept = y != 0
    # 20,000 Bernoulli(0.7) draws: the kept fraction is 0.7 +- 0.0032 (one std); 5 std allowed
    assert abs(kept.mean() - 0.7) < 0.016
    np.testing.assert_allclose(y[kept], x[kept] / 0.7, rtol=1e-6)  # one float32 rounding


def test_native_rnn_layer_is_the_tanh_recurrence():
    # H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h), Y = (H_1, ..., H_T), from the book's parameters
    # mapped to the framework's own layer (torch.nn.RNN, Keras SimpleRNN, Gluon RNN; NumPy has none
    # and runs the cell's recurrence).
    from d2lrnn.models import NativeLayer

    num_inputs, h, steps, batch = 3, 4, 5, 2
    W_xh, W_hh, b_h = f32(num_inputs, h, scale=0.5), f32(h, h, scale=0.5), f32(h, scale=0.5)
    X, H0 = f32(steps, batch, num_inputs), f32(batch, h, scale=0.5)
    layer = NativeLayer("rnn", num_inputs, h)
    assert (layer.native is None) == (d2l.backend_name() == "numpy")
    Y, (H_T,) = layer.forward([t(W_xh), t(W_hh), t(b_h)], t(X), (t(H0),))

    # The reference, with a running error bound: each step's pre-activation is a sum of
    # num_inputs + h products and two biases (dot_bound), tanh adds KERNEL relative, and the previous
    # state's error e reaches the pre-activation through W_hh (|e| @ |W_hh|) and the output through
    # tanh, whose slope is at most 1.
    H, err, hiddens, bounds = f64(H0), np.zeros((batch, h)), [], []
    for x_t in f64(X):
        pre = x_t @ f64(W_xh) + H @ f64(W_hh) + f64(b_h)
        err = (dot_bound(np.concatenate([x_t, H], 1), np.concatenate([W_xh, W_hh]), num_inputs + h + 1, b_h)
               + err @ np.abs(f64(W_hh)))
        H = np.tanh(pre)
        err = err + KERNEL * np.abs(H)
        hiddens.append(H)
        bounds.append(err)
    check(Y, np.stack(hiddens), np.stack(bounds))
    check(H_T, H, err)


# -- randomness, gradients, compilation, devices ---------------------------------------------------


def test_detach_keeps_the_values():
    x = f32(3, 4)
    check(ops.detach(t(x)), x)
    i = ints(5, 3)
    check(ops.detach(t(i)), i, dtype=np.int64)
    # and while gradients are recorded: a traced value detached keeps its numbers
    (_, (d,)), _ = ops.value_and_grad(lambda p: (ops.sum(p[0] * 2.0), (ops.detach(p[0] * 2.0),)),
                                      has_aux=True)([t(x)])
    check(d, 2 * x)


def test_imperative_book_step_is_the_clipped_sgd_formula():
    # P - lr / batch_size * G * min(1, theta / ||G||) with lr 0.1, batch 2, theta 1: ||G|| = 3 sqrt(12).
    # A few roundings of float32 on O(1) numbers: 8 U absolute.
    P, G = f32(3, 4), np.full((3, 4), 3.0, np.float32)
    G64 = G.astype(np.float64)
    expected = P - 0.05 * G64 / np.sqrt(np.sum(G64 * G64))
    np.testing.assert_allclose(ops.to_numpy(book_sgd_and_clip(t(P), t(G))), expected, rtol=0, atol=8 * U)


def test_value_and_grad_value_part():
    W, X, b = f32(4, 3), f32(5, 4), f32(3)
    H64 = np.tanh(f64(X) @ f64(W))
    expected = np.sum(H64) + 0.5 * np.sum(f64(b) ** 2)

    def f(p, X):
        H = ops.tanh(ops.matmul(X, p[0]))
        return ops.sum(H) + 0.5 * ops.sum(p[1] * p[1]), (H,)

    # H: products of 4 terms, then tanh; the value sums 15 + 3 terms of O(1): (n + 1) U sum|.| with
    # the entries' own error (dot_bound + KERNEL) added up, times 2 for the squares' rounding.
    H_bound = dot_bound(X, W, 4) + KERNEL * np.abs(H64)
    v_bound = np.sum(H_bound) + 2 * 20 * U * (np.sum(np.abs(H64)) + np.sum(f64(b) ** 2))
    value, grads = ops.value_and_grad(lambda p, X: f(p, X)[0])([t(W), t(b)], t(X))
    check(value, np.array(expected), v_bound)
    assert [ops.shape(g) for g in grads] == [(4, 3), (3,)]
    (value, (H,)), _ = ops.value_and_grad(f, has_aux=True)([t(W), t(b)], t(X))
    check(value, np.array(expected), v_bound)
    check(H, H64, H_bound)


def test_custom_vjp_forward_is_fwds_outputs():
    a, b = f32(3, 4), f32(3, 4)
    prod, s = f64(a) * f64(b), np.tanh(f64(a) + f64(b))
    # a*b: one correctly rounded product (U relative; 2 U for a margin); tanh(a + b): the sum's
    # rounding (U) through tanh' <= 1, plus KERNEL
    bounds = (2 * U * np.abs(prod), U * np.abs(f64(a) + f64(b)) + KERNEL * np.abs(s))
    out = product_and_tanh_sum(t(a), t(b))
    assert isinstance(out, tuple) and len(out) == 2
    for got, expected, bound in zip(out, (prod, s), bounds):
        check(got, expected, bound)
    # the same numbers while gradients are recorded (returned as aux)
    (_, out), _ = ops.value_and_grad(lambda p: (ops.sum(product_and_tanh_sum(p[0], p[1])[0]),
                                                product_and_tanh_sum(p[0], p[1])), has_aux=True)([t(a), t(b)])
    for got, expected, bound in zip(out, (prod, s), bounds):
        check(got, expected, bound)
    # one output: still a tuple
    one = ops.custom_vjp(lambda x: ((x * 3.0,), None), lambda res, g: (g * 3.0,))(t(a))
    assert isinstance(one, tuple) and len(one) == 1
    check(one[0], 3 * f64(a), 2 * U * 3 * np.abs(f64(a)))


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T", [5, 1])
def test_scan(T, reverse, unroll):
    # running sums and maxima of multiples of 1/4 (exact in float32, so exact on every backend): the
    # carries, each step's slices of both inputs, and the outputs stacked in the steps' order whichever
    # way the loop runs (the running sums tell the orders apart). Its own generator: the data of the
    # tests after this one stays as it was.
    r = np.random.default_rng(11)

    def quarters(*shape):
        n = int(np.prod(shape))
        return ((r.permutation(n) - n / 2) * 0.25).astype(np.float32).reshape(shape)

    X, Z, S0, M0 = quarters(T, 2, 3), quarters(T, 2, 3), quarters(2, 3), quarters(2, 3)
    S, M = f64(S0), f64(M0)
    previous, sums = np.empty((T, 2, 3)), np.empty((T, 2, 3))
    for k in reversed(range(T)) if reverse else range(T):
        previous[k] = S
        S, M = S + X[k], np.maximum(M, Z[k])
        sums[k] = S

    def step(carry, inputs):
        (S, M), (x, z) = carry, inputs
        return (S + x, ops.maximum(M, z)), (S, S + x)

    def scanned(S0, M0, X, Z):
        return ops.scan(step, (S0, M0), (X, Z), reverse, unroll)  # unroll: a hint, the same values

    for run in (scanned, ops.compile(scanned)):  # on JAX, a loop on concrete arrays, then lax.scan
        (S_T, M_T), (ys_previous, ys_sums) = run(t(S0), t(M0), t(X), t(Z))
        for got, expected in [(S_T, S), (M_T, M), (ys_previous, previous), (ys_sums, sums)]:
            check(got, expected)
    # one carry, one input, one output
    S_T, ys = ops.scan(lambda S, x: (S + x, S), t(S0), t(X), reverse=reverse)
    check(S_T, S)
    check(ys, previous)
    # no output per step
    S_T, ys = ops.scan(lambda S, x: (S + x, ()), t(S0), t(X), reverse=reverse)
    assert ys == ()
    check(S_T, S)


def test_compile_gives_the_plain_calls_values():
    def step(W, X):
        H = ops.tanh(ops.matmul(X, W))
        return H, ops.sum(X * X)

    compiled, for_few_calls = ops.compile(step), ops.compile(step, calls="few")
    W = f32(4, 3)
    for X in (f32(5, 4), f32(5, 4), f32(2, 4)):  # the same shape twice (a traced graph), then another
        H64 = np.tanh(f64(X) @ f64(W))
        H_bound = dot_bound(X, W, 4) + KERNEL * np.abs(H64)
        s64 = np.sum(f64(X) ** 2)
        s_bound = (X.size + 2) * U * s64
        H, s = compiled(t(W), t(X))
        check(H, H64, H_bound)
        check(s, np.array(s64), s_bound)
        H_plain, s_plain = step(t(W), t(X))
        check(H, ops.to_numpy(H_plain), 2 * H_bound)
        check(s, ops.to_numpy(s_plain), 2 * s_bound)
        H_few, s_few = for_few_calls(t(W), t(X))
        check(H_few, H64, H_bound)
        check(s_few, np.array(s64), s_bound)


def test_compiled_training_step_values():
    # the pattern make_train_step compiles: value_and_grad inside, new parameters out
    def train_step(params, X):
        loss, grads = ops.value_and_grad(lambda p, X: ops.mean(ops.exp(ops.matmul(X, p[0]))))(params, X)
        return loss, [p - 0.1 * g for p, g in zip(params, grads)]

    W, X = f32(4, 3, scale=0.3), f32(5, 4, scale=0.3)
    E = np.exp(f64(X) @ f64(W))
    expected_loss = np.mean(E)
    expected_W = f64(W) - 0.1 * f64(X).T @ E / E.size  # d mean(exp(XW)) / dW = X^T exp(XW) / size
    # loss: 15 exponentials of products of 4 terms (relative 6 U + KERNEL each, exp's slope = its
    # value), averaged (17 U relative); the update: its float32 gradient has a relative error of
    # ~30 U in each of 5 summed terms: 1e-5 absolute on entries of O(0.1) is far above both and far
    # below a wrong step (0.1 x the gradient, ~1e-2).
    for _ in range(2):
        loss, (new_W,) = ops.compile(train_step)([t(W)], t(X))
        check(loss, np.array(expected_loss), 40 * U * expected_loss)
        check(new_W, expected_W, 1e-5)


def test_num_gpus_is_the_frameworks_count():
    n = ops.num_gpus()
    assert type(n) is int and n == framework_gpu_count()


def test_devices_are_consistent():
    n = ops.num_gpus()
    if n == 0:
        assert ops.try_gpu() == ops.cpu()
    else:
        assert ops.try_gpu() != ops.cpu()
    assert ops.try_gpu(n) == ops.cpu()  # an index past the last GPU falls back to the CPU
    assert ops.cpu() == ops.cpu()


@pytest.mark.parametrize("where", ["cpu", "try_gpu"])
def test_to_device_keeps_the_values(where):
    device = getattr(ops, where)()
    x, i = f32(3, 4), ints(7, 5)
    moved = ops.to_device(t(x), device)
    check(moved, x)
    check(ops.to_device(t(i), device), i, dtype=np.int64)
    check(ops.to_device(ops.zeros((2,), device=device), ops.cpu()), np.zeros(2))
    name = d2l.backend_name()
    if name == "torch":
        assert moved.device == device
    elif name == "tensorflow":
        assert moved.device.endswith(device.lstrip("/"))
    elif name == "mxnet":
        assert moved.context == device
    elif name == "paddle":
        assert moved.place == device


@pytest.mark.parametrize("where", ["cpu", "try_gpu"])
def test_device_of_is_where_the_tensor_lives(where):
    # what to_device put somewhere, device_of names (or None where the framework places tensors itself),
    # and the creators take it: what a model's forward pass makes goes beside its inputs (a GPU's)
    device, x = getattr(ops, where)(), f32(3, 4)
    moved = ops.to_device(t(x), device)
    named = ops.device_of(moved)
    if d2l.backend_name() in ("numpy", "tensorflow", "jax"):
        assert named is None
    else:
        assert named == device
    check(ops.zeros((2,), device=named), np.zeros(2))
    check(ops.arange(3, device=named), np.arange(3), dtype=np.int64)
    check(ops.to_device(moved, None), x)


def test_set_num_threads(monkeypatch):
    # returns nothing on every backend, and later operations still give the right numbers
    name = d2l.backend_name()
    if name == "torch":
        import torch

        before = torch.get_num_threads()
        try:
            assert ops.set_num_threads(2) is None
            assert torch.get_num_threads() == 2  # torch's intra-op threads
        finally:
            torch.set_num_threads(before)
    elif name == "tensorflow":
        import tensorflow as tf

        before = tf.config.threading.get_intra_op_parallelism_threads()
        ops.tanh(t(f32(2)))  # TensorFlow is running: its pools can no longer change, silently
        assert ops.set_num_threads(2) is None
        assert tf.config.threading.get_intra_op_parallelism_threads() == before
    elif name == "numpy":
        # BLAS threads are fixed at start-up: only OMP_NUM_THREADS is recorded, unless already set
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert ops.set_num_threads(3) is None
        assert os.environ["OMP_NUM_THREADS"] == "3"
        assert ops.set_num_threads(2.0) is None
        assert os.environ["OMP_NUM_THREADS"] == "3"
    else:  # MXNet: fixed at start-up, nothing changes; Paddle: its OpenMP/MKL threads, not read back
        assert ops.set_num_threads(1) is None
    x = f32(3, 4)
    check(ops.tanh(t(x)), np.tanh(f64(x)), KERNEL * np.abs(np.tanh(f64(x))))


# -- every shim function is covered ----------------------------------------------------------------

#: shim function -> the tests above that compare its values with a formula or a stated expectation.
VALUE_TESTS = {
    "normal": ["test_normal_follows_the_shared_generator"],
    "uniform": ["test_uniform_follows_the_shared_generator_and_shares_its_stream_with_normal"],
    "zeros": ["test_zeros_and_ones"],
    "ones": ["test_zeros_and_ones"],
    "zeros_like": ["test_zeros_like_keeps_shape_and_dtype"],
    "arange": ["test_arange"],
    "tensor": ["test_tensor_and_from_numpy_dtypes"],
    "from_numpy": ["test_tensor_and_from_numpy_dtypes"],
    "to_numpy": ["test_to_numpy_returns_a_numpy_array_with_the_values"],
    "astype": ["test_astype", "test_astype_while_gradients_are_recorded"],
    "shape": ["test_shape_and_size_are_python_ints"],
    "size": ["test_shape_and_size_are_python_ints"],
    "is_tensor": ["test_is_tensor"],
    "reshape": ["test_reshape"],
    "transpose": ["test_transpose", "test_transpose_of_a_matrix"],
    "concat": ["test_concat"],
    "stack": ["test_stack"],
    "unstack": ["test_unstack"],
    "take": ["test_take"],
    "matmul": ["test_matmul"],
    "dense": ["test_dense"],
    "linear": ["test_linear"],
    "prepack_linear": ["test_prepack_linear_keeps_the_values"],
    "tanh": ["test_tanh"],
    "tanh_grad": ["test_tanh_grad"],
    "sigmoid_grad": ["test_sigmoid_grad"],
    "sigmoid": ["test_sigmoid"],
    "relu": ["test_relu_abs_exact"],
    "exp": ["test_exp"],
    "sin": ["test_sin"],
    "log": ["test_log_and_sqrt"],
    "sqrt": ["test_log_and_sqrt"],
    "abs": ["test_relu_abs_exact"],
    "maximum": ["test_maximum_minimum_exact"],
    "minimum": ["test_maximum_minimum_exact"],
    "sum": ["test_sum_and_mean"],
    "mean": ["test_sum_and_mean"],
    "max": ["test_max_exact"],
    "argmax": ["test_argmax"],
    "sum_of_squares": ["test_sum_of_squares"],
    "nonfinite_probe": ["test_nonfinite_probe_is_zero_exactly_when_every_entry_is_finite"],
    "adam_update": ["test_adam_update_is_the_formula_and_leaves_its_inputs_as_they_were"],
    "one_hot": ["test_one_hot"],
    "softmax": ["test_softmax"],
    "log_softmax": ["test_log_softmax"],
    "softmax_cross_entropy": ["test_softmax_cross_entropy"],
    "native_rnn": ["test_native_rnn_layer_is_the_tanh_recurrence"],
    "dropout": ["test_dropout_zeroes_a_fraction_p_and_scales_the_rest"],
    "detach": ["test_detach_keeps_the_values"],
    "value_and_grad": ["test_value_and_grad_value_part"],
    "custom_vjp": ["test_custom_vjp_forward_is_fwds_outputs"],
    "scan": ["test_scan"],
    "num_gpus": ["test_num_gpus_is_the_frameworks_count"],
    "to_device": ["test_to_device_keeps_the_values"],
    "device_of": ["test_device_of_is_where_the_tensor_lives"],
    "in_place_hooks": ["test_imperative_book_step_is_the_clipped_sgd_formula"],
}

#: shim functions with no value of their own to compare with a formula: (why, the tests that check
#: them instead).
NO_VALUE = {
    "manual_seed": ("seeds the shared generator and returns nothing; what normal draws after it must be "
                    "np.random.default_rng(seed)'s numbers", ["test_normal_follows_the_shared_generator"]),
    "compile": ("a transformation: a compiled function must give its plain call's values and the formula's",
                ["test_compile_gives_the_plain_calls_values", "test_compiled_training_step_values"]),
    "cpu": ("returns a device: moving to it keeps values, try_gpu falls back to it",
            ["test_devices_are_consistent", "test_to_device_keeps_the_values"]),
    "try_gpu": ("returns a device: cpu() without GPUs or past the last one",
                ["test_devices_are_consistent", "test_to_device_keeps_the_values"]),
    "set_num_threads": ("configures thread pools and returns None: its effect per backend and later values",
                        ["test_set_num_threads"]),
    "autocast": ("returns a context manager or None: the products' values inside it",
                 ["test_autocast_runs_products_in_bfloat16_where_the_backend_has_it"]),
}


def test_every_shim_function_is_classified():
    # A new shim function must get value tests here or a reason why it has no value to compare.
    unclassified = set(SHIM_FUNCTIONS) - set(VALUE_TESTS) - set(NO_VALUE)
    assert not unclassified, f"classify these shim functions in VALUE_TESTS or NO_VALUE: {unclassified}"
    assert not (set(VALUE_TESTS) | set(NO_VALUE)) - set(SHIM_FUNCTIONS), "not shim functions"
    assert not set(VALUE_TESTS) & set(NO_VALUE)
    assert all(VALUE_TESTS.values()) and all(why and tests for why, tests in NO_VALUE.values())
    named = [n for tests in VALUE_TESTS.values() for n in tests] + [n for _, tests in NO_VALUE.values()
                                                                    for n in tests]
    missing = [n for n in named if not callable(globals().get(n))]
    assert not missing, f"no such tests: {missing}"
