"""Each framework's own call forms of the shim's functions through ``d2l.`` (the book's package binds
``d2l.normal`` to ``tf.random.normal``, ``d2l.ones`` to ``torch.ones``, ...), the sequence section's
names, what the book's training and plotting calls return, and the older gluon tutorial's
``utils.SGD(params, lr)``. The reader's code here is written for these tests; the numbers are checked
against the numpy backend (the same seeded draws) or NumPy itself."""

import importlib
import math

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops


def numpy_draw(draw, seed=3):
    """What ``draw()`` gives on the numpy backend after ``manual_seed(seed)``."""
    with d2l.use_backend("numpy"):
        d2l.manual_seed(seed)
        return np.asarray(draw())


def drawn(draw, seed=3):
    d2l.manual_seed(seed)
    return d2l.to_numpy(draw())


def only_on(*backends):
    if d2l.backend_name() not in backends:
        pytest.skip(f"the call forms of {' and '.join(backends)}")
    return importlib.import_module({"torch": "torch", "tensorflow": "tensorflow",
                                    "mxnet": "mxnet"}[d2l.backend_name()])


def one_line(err):
    text = str(err.value)
    assert "\n" not in text
    return text


def test_an_int_is_a_shape_for_reshape_on_every_backend():
    x = d2l.reshape(d2l.arange(12), (3, 4))
    flat = d2l.reshape(x, -1)
    assert d2l.shape(flat) == (12,)
    np.testing.assert_array_equal(d2l.to_numpy(flat), np.arange(12))
    assert d2l.shape(d2l.reshape(x, 12)) == (12,)


def test_sin_of_the_sine_wave_data_matches_numpy():
    time = d2l.arange(1, 1001, dtype=d2l.float32)
    np.testing.assert_allclose(d2l.to_numpy(d2l.sin(0.01 * time)), np.sin(0.01 * np.arange(1, 1001)),
                               rtol=1e-6, atol=1e-6)


def test_tensorflow_draws_take_the_shape_first_and_its_keywords():
    tf = only_on("tensorflow")
    expected = numpy_draw(lambda: d2l.normal(0.5, 2.0, (3, 4)))
    np.testing.assert_array_equal(drawn(lambda: d2l.normal((3, 4), 0.5, 2.0)), expected)
    np.testing.assert_array_equal(drawn(lambda: d2l.normal([3, 4], 0.5, 2.0)), expected)
    np.testing.assert_array_equal(
        drawn(lambda: d2l.normal(shape=(3, 4), stddev=2.0, mean=0.5, dtype=tf.float32)), expected)
    assert d2l.normal((2,), 0, 1, dtype=tf.float64).dtype == tf.float64
    np.testing.assert_array_equal(drawn(lambda: d2l.uniform((5,), minval=-2.0, maxval=3.0)),
                                  numpy_draw(lambda: d2l.uniform(-2.0, 3.0, (5,))))


def test_tensorflow_range_transpose_argmax_and_cast_take_their_keywords():
    tf = only_on("tensorflow")
    np.testing.assert_array_equal(d2l.to_numpy(d2l.arange(1, limit=10, delta=3)), [1, 4, 7])
    x = d2l.tensor(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.transpose(x, perm=[2, 0, 1])),
                                  np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1))
    rows = d2l.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    top = d2l.argmax(rows, axis=1, output_type=tf.int32)
    assert top.dtype == tf.int32 and d2l.to_numpy(top).tolist() == [1, 0]
    assert d2l.astype(rows, tf.int32).dtype == tf.int32


def test_tensorflow_forms_refuse_what_they_cannot_do_in_one_line():
    only_on("tensorflow")
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.normal((3,), 0, 1, seed=7)
    assert "d2l.manual_seed(seed)" in one_line(err)
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.normal(shape=(3,), mean=0, stddev=1, scale=2)
    assert one_line(err).startswith("d2l.normal: TensorFlow's form is normal(shape, mean=0.0, stddev=1.0")


def test_pytorch_makers_take_the_shape_as_arguments_and_its_dtypes():
    torch = only_on("torch")
    ones = d2l.ones(2, 3, 4)
    assert tuple(ones.shape) == (2, 3, 4) and ones.dtype == torch.float32
    zeros = d2l.zeros(4, 7, dtype=torch.long)
    assert tuple(zeros.shape) == (4, 7) and zeros.dtype == torch.int64 and int(zeros.sum()) == 0
    assert tuple(d2l.ones(size=(2, 5)).shape) == (2, 5)
    assert d2l.ones((3, 4), dtype=torch.long).dtype == torch.int64  # d2lrnn's form, a torch dtype
    np.testing.assert_array_equal(drawn(lambda: d2l.normal(1.0, 0.5, size=(6,))),
                                  numpy_draw(lambda: d2l.normal(1.0, 0.5, (6,))))


def test_pytorch_reductions_and_joins_take_dim():
    torch = only_on("torch")
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x = d2l.tensor(a)
    np.testing.assert_array_equal(d2l.to_numpy(d2l.reshape(x, 4, 3)), a.reshape(4, 3))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.sum(x, dim=1, keepdim=True)), a.sum(1, keepdims=True))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.reduce_sum(x, dim=0)), a.sum(0))
    np.testing.assert_allclose(d2l.to_numpy(d2l.mean(x, dim=0)), a.mean(0))
    assert d2l.to_numpy(d2l.argmax(x, dim=1)).tolist() == [3, 3, 3]
    np.testing.assert_array_equal(d2l.to_numpy(d2l.concat((x, x), dim=1)), np.concatenate((a, a), 1))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.stack((x, x), dim=0)), np.stack((a, a)))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.arange(2, end=8, step=3)), [2, 5])
    p = d2l.to_numpy(d2l.softmax(x, dim=1))
    np.testing.assert_allclose(p, np.exp(a) / np.exp(a).sum(1, keepdims=True), rtol=1e-6)
    assert d2l.sum(x, dim=1, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.argmax(x, dim=1, keepdim=True)
    assert "keepdim" in one_line(err)


def test_mxnet_draws_take_loc_scale_and_size():
    only_on("mxnet")
    np.testing.assert_array_equal(drawn(lambda: d2l.normal(loc=0.5, scale=2.0, size=(2, 3))),
                                  numpy_draw(lambda: d2l.normal(0.5, 2.0, (2, 3))))
    np.testing.assert_array_equal(drawn(lambda: d2l.uniform(low=-1.0, high=1.0, size=(4,))),
                                  numpy_draw(lambda: d2l.uniform(-1.0, 1.0, (4,))))
    np.testing.assert_array_equal(d2l.to_numpy(d2l.reshape(d2l.arange(6), 3, 2)),
                                  np.arange(6).reshape(3, 2))


def test_evaluate_loss_averages_the_readers_loss_over_every_example():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(10, 3)).astype(np.float32), rng.normal(size=(10,)).astype(np.float32)
    w = np.float32([0.5, -1.0, 2.0])
    data = d2l.load_array((X, y), batch_size=4, is_train=False)  # minibatches of 4, 4 and 2
    W = d2l.reshape(d2l.tensor(w), (3, 1))
    loss = d2l.evaluate_loss(lambda X: d2l.matmul(X, W), data, lambda y_hat, y: (y_hat - y) ** 2)
    assert loss == pytest.approx(float(np.mean((X @ w - y) ** 2)), rel=1e-6)


def test_evaluate_loss_takes_the_readers_framework_module_and_loss():
    torch = only_on("torch")
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(9, 4)).astype(np.float32), rng.normal(size=(9, 1)).astype(np.float32)
    net = torch.nn.Linear(4, 1)
    weight, bias = net.weight.detach().numpy(), net.bias.detach().numpy()
    data = d2l.load_array((X, y), batch_size=5, is_train=True)
    loss = d2l.evaluate_loss(net, data, torch.nn.MSELoss(reduction="none"))
    assert loss == pytest.approx(float(np.mean((X @ weight.T + bias - y) ** 2)), rel=1e-5)


def test_the_gluon_tutorials_sgd_steps_each_parameter_from_its_gradient_in_place():
    framework = only_on("torch", "mxnet")
    w0, g = np.float32([[1.0, -2.0], [0.5, 3.0]]), np.float32([[0.1, 0.2], [-0.3, 0.4]])
    if d2l.backend_name() == "torch":
        w = framework.tensor(w0.copy(), requires_grad=True)
        (w * framework.tensor(g)).sum().backward()
    else:
        from mxnet import autograd, nd

        w = nd.array(w0)
        w.attach_grad()
        with autograd.record():
            loss = (w * nd.array(g)).sum()
        loss.backward()
    utils = d2l  # the tutorial's `import utils`
    assert utils.SGD([w], 0.5) is None
    np.testing.assert_allclose(d2l.to_numpy(w), w0 - 0.5 * g, rtol=1e-6)
    assert isinstance(d2l.SGD(0.5), d2l.SGD) and d2l.SGD(0.5).lr == 0.5  # d2lrnn's optimizer still
    with pytest.raises(d2l.ArgumentError) as err:
        utils.SGD([w], "fast")
    assert one_line(err).startswith("lr ")


def test_the_gluon_tutorials_sgd_names_the_functional_form_where_tensors_carry_no_gradients():
    if d2l.backend_name() not in ("numpy", "jax"):
        pytest.skip("tensors carry gradients on this backend")
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.SGD([d2l.ones((2,))], 0.1)
    assert "d2l.sgd(params, grads, lr, batch_size)" in one_line(err)


def test_the_books_training_and_plotting_calls_return_none_as_the_books():
    d2l.manual_seed(0)
    train_iter, vocab = d2l.load_data_time_machine(4, 5, max_tokens=400)
    net = d2l.RNNModelScratch(len(vocab), 8)
    assert d2l.train_ch8(net, train_iter, vocab, 1, 1, progress=False, plot=False, verbose=False) is None
    history = d2l.train_ch8(net, train_iter, vocab, 1, 1, progress=False, plot=False, verbose=False,
                            return_history=True)
    assert len(history["train_ppl"]) == 1 and math.isfinite(history["train_ppl"][0])
    assert d2l.plot([1, 2, 3], [[1, 4, 9]], "x", "y") is None
    (curve,) = d2l.plt.gca().get_lines()
    assert list(curve.get_ydata()) == [1, 4, 9]
    assert d2l.show_list_len_pair_hist(["a", "b"], "len", "count", [[1, 2]], [[3]]) is None
    d2l.plt.close("all")


def test_ops_keep_one_signature_each():
    # the framework forms live in the package face only: the core function refuses them
    if d2l.backend_name() != "torch":
        pytest.skip("PyTorch's varargs shape")
    with pytest.raises(TypeError):
        ops.ones(2, 3, 4)
    assert d2l.shape(d2l.ones(2, 3, 4)) == (2, 3, 4)
