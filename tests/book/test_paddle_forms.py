"""The call forms of the shim's tensor makers in the book's Paddle cells (d2l-zh 2.x, ``#@tab paddle``),
through ``import d2lrnn as d2l``: ``place=`` for the device on every backend, and Paddle's own dtypes and
places on the Paddle backend. (The cells' models and loops are in ``test_lm_forms.py`` and
``test_seq2seq_forms.py``.)"""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops


def test_the_paddle_cells_place_keyword_names_the_device(backend):
    device = d2l.try_gpu()
    np.testing.assert_array_equal(ops.to_numpy(d2l.zeros(shape=[3], place=device)), np.zeros(3))
    t = d2l.tensor(7, place=device)  # predict_ch8's input, reshaped to (1, 1) by the cell
    assert ops.to_numpy(d2l.reshape(t, (1, 1))).tolist() == [[7]]
    assert ops.to_numpy(t).dtype == np.int64
    d2l.manual_seed(2)
    by_place = ops.to_numpy(d2l.normal(0, 1, (3, 1), place=device))
    d2l.manual_seed(2)
    np.testing.assert_array_equal(by_place, ops.to_numpy(d2l.normal(0, 1, (3, 1))))
    with pytest.raises(d2l.ArgumentError) as err:
        d2l.tensor([1], device=device, place=device)
    assert str(err.value) == "d2l.tensor: give the device once, as device= or place="


def test_paddle_dtypes_and_places_are_taken_where_the_cells_give_them(backend):
    if backend != "paddle":
        pytest.skip("Paddle's dtypes and places are the paddle backend's")
    import paddle

    X = d2l.zeros((4, 7), dtype=paddle.int64)  # the seq2seq section's encoder input
    assert X.dtype == paddle.int64 and d2l.shape(X) == (4, 7) and not ops.to_numpy(X).any()
    ones = d2l.ones((3, 4), dtype=paddle.int64)  # the masked loss's labels
    assert ones.dtype == paddle.int64 and ops.to_numpy(ones).sum() == 12
    assert d2l.ones([2, 3, 4]).dtype == paddle.float32
    assert d2l.arange(1, 5, dtype=paddle.float32).dtype == paddle.float32
    assert d2l.tensor([1, 2], dtype=paddle.float64).dtype == paddle.float64
    assert d2l.astype(ones, paddle.int32).dtype == paddle.int32
    place = paddle.CPUPlace()
    moved = d2l.tensor([[1.5]], place=place)
    assert moved.place == place and moved.dtype == paddle.float32
    assert d2l.to(moved, place) is moved
    assert d2l.cpu() == place and d2l.try_gpu(d2l.num_gpus()) == place  # past the last GPU: the CPU


def test_load_array_is_called_for_its_batches_as_paddles_dataloader(backend):
    # the sequence section's Paddle cells: ``for X, y in train_iter()``
    features, labels = np.arange(10.0, dtype=np.float32).reshape(5, 2), np.arange(5.0, dtype=np.float32)
    train_iter = d2l.load_array((features, labels), 2, is_train=False)
    called = [tuple(ops.to_numpy(t).tolist() for t in batch) for batch in train_iter()]
    assert called == [tuple(ops.to_numpy(t).tolist() for t in batch) for batch in train_iter]
    assert called[-1] == ([[8.0, 9.0]], [4.0])


def test_paddle_2s_integer_and_float_operators(backend):
    # The seq2seq section's Paddle cells compare a float32 arange with int64 lengths and multiply a float
    # loss by an int64 mask, as Paddle 2 allowed; Paddle 3 refuses the pairs unless the backend is loaded.
    if backend != "paddle":
        pytest.skip("Paddle's operators are the paddle backend's")
    import paddle

    d2l.zeros(1)  # the backend loaded
    lengths = paddle.to_tensor([1, 2])
    mask = paddle.arange(3, dtype=paddle.float32)[None, :] < lengths[:, None]
    assert mask.dtype == paddle.bool and mask.numpy().tolist() == [[True, False, False], [True, True, False]]
    loss, weights = paddle.to_tensor([[0.5, 1.5], [2.0, 4.0]]), paddle.to_tensor([[1, 0], [1, 1]])
    for product in (loss * weights, weights * loss):
        assert product.dtype == paddle.float32
        np.testing.assert_array_equal(product.numpy(), [[0.5, 0.0], [2.0, 4.0]])
    assert (weights / paddle.to_tensor([2.0, 4.0])).numpy().tolist() == [[0.5, 0.0], [0.5, 0.25]]
    assert (lengths == paddle.to_tensor([1.0, 3.0])).numpy().tolist() == [True, False]
    assert (lengths * 1.5).numpy().tolist() == [1.5, 3.0]  # Paddle's own, as before
    # the pairs that are not an integer and a float are left to Paddle 3, which refuses them
    with pytest.raises(TypeError, match="Type promotion"):
        lengths + paddle.to_tensor([1, 1], dtype=paddle.int32)
    with pytest.raises(TypeError, match="Type promotion"):
        loss * paddle.to_tensor([True, False])


def test_paddle_products_with_a_0d_tensor(backend):
    # The backend multiplies by a 0-d tensor with Paddle's scale kernel (the SGD step's lr * g, 6x faster than
    # Paddle's broadcasting multiply): the same numbers, the signs of zeros included, in either order, and a
    # factor that needs a gradient still gets its own.
    if backend != "paddle":
        pytest.skip("Paddle's operators are the paddle backend's")
    import paddle

    d2l.zeros(1)  # the backend loaded
    values = np.array([[1.5, -2.0], [0.0, -0.0]], np.float32)
    expected = values * np.float32(-3.0)  # [[-4.5, 6], [-0, 0]]
    x, c = paddle.to_tensor(values), paddle.to_tensor(np.float32(-3.0))
    for product in (x * c, c * x):
        assert product.dtype == paddle.float32 and product.shape == [2, 2]
        np.testing.assert_array_equal(product.numpy(), expected)
        np.testing.assert_array_equal(np.signbit(product.numpy()), np.signbit(expected))
    x.stop_gradient = c.stop_gradient = False
    dx, dc = paddle.grad((c * x).sum(), [x, c])
    np.testing.assert_array_equal(dx.numpy(), np.full((2, 2), -3.0, np.float32))
    assert float(dc) == -0.5  # the sum of x
