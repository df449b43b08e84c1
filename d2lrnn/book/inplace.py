"""The book's in-place training forms, for readers who run the book's own framework cells.

d2lrnn trains functionally (new tensors from every update). The book's PyTorch, MXNet and Paddle cells
instead call ``loss.backward()`` and then ``d2l.grad_clipping(net, theta)`` and ``d2l.sgd(params, lr,
batch_size)``, which rewrite the gradients attached to the parameters and the parameters themselves;
its TensorFlow cells keep parameters in ``tf.Variable``s. The backend's ``in_place_hooks()`` declaration
(:class:`d2lrnn.backends.InPlaceHooks`) says how that works on its framework; this module does it above
the shim, and names the functional form where the framework has no such thing.
"""

from .. import ops
from ..backends import backend_name
from ..errors import ArgumentError


def gradient_hooks(form, functional):
    """The backend's :class:`~d2lrnn.backends.InPlaceHooks`, for a book ``form`` that needs
    attached gradients; an :class:`ArgumentError` naming the ``functional`` form where there are none."""
    hooks = ops.in_place_hooks()
    if hooks is None or hooks.grad is None:
        why = ("TensorFlow attaches no gradients to variables (tape.gradient returns them)"
               if hooks is not None else f"tensors on the {backend_name()} backend carry no gradients")
        raise ArgumentError(f"d2l.{form} works on the gradients a backward pass attaches to parameters "
                            f"(PyTorch, MXNet, Paddle), but {why}: use {functional}")
    return hooks


def attached_grads(params, form, functional):
    """The gradient attached to each parameter, checked to be there."""
    hooks = gradient_hooks(form, functional)
    grads = [hooks.grad(p) for p in params]
    if any(g is None for g in grads):
        raise ArgumentError(f"d2l.{form}: a parameter has no gradient attached; call l.backward() first "
                            "(PyTorch: requires_grad_(True) on the parameters, MXNet: attach_grad() and "
                            "autograd.record(), Paddle: stop_gradient = False)")
    return hooks, grads


def params_of(net):
    """The parameters of ``net``: a framework module's trainable parameters, or ``net.params``
    (the book's ``RNNModelScratch``); None if ``net`` is neither."""
    hooks = ops.in_place_hooks()
    params = hooks.module_params(net) if hooks is not None else None
    if params is None and hasattr(net, "params"):
        params = list(net.params)
    return params


def sgd(params, lr, batch_size):
    """The book's PyTorch/MXNet ``sgd``: p <- p - lr * p.grad / batch_size in place, then the gradient
    is zeroed (as the book's PyTorch ``sgd`` does; on MXNet the next backward overwrites it anyway)."""
    hooks, grads = attached_grads(params, "sgd(params, lr, batch_size)",
                                  "params = d2l.sgd(params, grads, lr, batch_size) with grads from "
                                  "d2l.value_and_grad")
    for p, g in zip(params, grads):
        hooks.assign(p, p - (lr / batch_size) * g)
        hooks.set_grad(p, ops.zeros_like(g))


def clip_attached(net, theta, clip):
    """The book's PyTorch/MXNet ``grad_clipping(net, theta)``: the gradients attached to the network's
    parameters are scaled in place so their global norm is at most ``theta``, by ``clip`` (the
    functional ``grad_clipping`` on a list)."""
    params = params_of(net)
    hooks, grads = attached_grads(params, "grad_clipping(net, theta)",
                                  "grads = d2l.grad_clipping(grads, theta)")
    for p, g in zip(params, clip(grads, theta)):
        hooks.set_grad(p, g)


def assign_variables(params, values):
    """Write ``values`` into ``params`` in place where they are variables (``tf.Variable``: TensorFlow's
    book form of ``sgd``); return what the caller should keep as the parameters."""
    hooks = ops.in_place_hooks()
    if hooks is None or not any(hooks.is_variable(p) for p in params):
        return values
    for p, value in zip(params, values):
        if not hooks.is_variable(p):
            raise ArgumentError("d2l.sgd: some parameters are tf.Variables and some are not; make them all "
                                "tf.Variable (updated in place) or all tensors (new ones returned)")
        hooks.assign(p, value)
    return list(params)
