"""Helpers the backend tests share: a function with a hand-written gradient, the GPU count as the
active framework itself reports it, and one SGD step written the book's way on each framework."""

import d2lrnn as d2l
from d2lrnn import ops


def product_and_tanh_sum(a, b):
    """(a * b, tanh(a + b)), with its gradient written by hand through ``custom_vjp``."""
    def fwd(a, b):
        s = ops.tanh(a + b)
        return (a * b, s), (a, b, s)

    def bwd(res, g_prod, g_tanh):
        a, b, s = res
        g_sum = g_tanh * (1.0 - s * s)
        return g_prod * b + g_sum, g_prod * a + g_sum

    return ops.custom_vjp(fwd, bwd)(a, b)


def framework_gpu_count():
    """How many GPUs the active backend's framework itself reports (numpy: none, it runs on the CPU)."""
    name = d2l.backend_name()
    if name == "torch":
        import torch

        return torch.cuda.device_count()
    if name == "tensorflow":
        import tensorflow as tf

        return len(tf.config.list_physical_devices("GPU"))
    if name == "mxnet":
        import mxnet as mx

        return mx.context.num_gpus()
    if name == "paddle":
        import paddle

        return paddle.device.cuda.device_count()
    return 0


def _param_with_attached_grad(P, G):
    """A copy of P with the gradient G attached by the framework's own backward pass of sum(P * G)."""
    if d2l.backend_name() == "torch":
        p = P.clone().requires_grad_(True)
        (p * G).sum().backward()
        return p
    if d2l.backend_name() == "paddle":
        p = P.clone()
        p.stop_gradient = False
        (p * G).sum().backward()
        return p
    import mxnet as mx

    p = P.copy()
    p.attach_grad()
    with mx.autograd.record():
        loss = (p * G).sum()
    loss.backward()
    return p


def book_sgd_and_clip(P, G):
    """One clipped SGD step the way the book's cells write it on the framework: ``grad_clipping(net, 1)``
    and ``sgd(params, 0.1, 2)`` in place on attached gradients (torch, MXNet, Paddle), ``sgd`` assigning
    ``tf.Variable``s (TensorFlow); the functional forms where there is neither (numpy, jax)."""
    hooks = ops.in_place_hooks()
    if hooks is None:
        return d2l.sgd([P], d2l.grad_clipping([G], 1.0), 0.1, 2)[0]
    if hooks.grad is None:
        import tensorflow as tf

        v = tf.Variable(P)
        assert d2l.sgd([v], d2l.grad_clipping([G], 1.0), 0.1, 2)[0] is v
        return tf.convert_to_tensor(v)
    p = _param_with_attached_grad(P, G)
    d2l.grad_clipping(_Net([p]), 1.0)
    assert d2l.sgd([p], 0.1, 2)[0] is p
    assert float(ops.to_numpy(ops.sum(ops.abs(hooks.grad(p))))) == 0  # zeroed after the update, as the book
    return p


class _Net:
    def __init__(self, params):
        self.params = params
