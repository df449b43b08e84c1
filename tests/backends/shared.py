"""Helpers the backend tests share: a function with a hand-written gradient, and the GPU count as
the active framework itself reports it."""

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
    return 0
