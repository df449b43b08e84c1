"""The book's training functions with the book's signatures, over d2lrnn's training loop.

``train_ch8``, ``train_epoch_ch8`` and ``predict_ch8`` take what the book passes: d2lrnn's models, the
reader's own from-scratch model (``RNNModelScratch`` over their functions) or their own framework
module (the concise sections' ``RNNModel``: an ``nn.Module``, a Gluon ``Block``, a Keras layer), and in
``train_epoch_ch8`` the framework's own loss and updater. ``sgd`` and ``grad_clipping`` work in both the
functional form and the book's in-place form (:mod:`d2lrnn.book.inplace`).
"""

import numbers
import warnings

from .. import checks, ops
from ..backends import backend_name
from ..errors import ArgumentError, DataError
from ..lm.generate import predict
from ..lm.train import SEES_THE_FUTURE, is_bidirectional, state_for, train_epoch_lm, train_lm
from ..training import optim
from ..training.metrics import Accumulator, Timer, format_perplexity, perplexity
from ..training.step import clip_by_global_norm
from . import inplace
from .modules import as_model

TIME_MACHINE_PREFIXES = ("time traveller", "traveller")


def grad_clipping(grads, theta):
    """Scale gradients so their global norm is at most ``theta``: g <- min(1, theta / ||g||) g.

    ``grads`` is a list of tensors; a new list is returned (TensorFlow's book form too, whose tape may
    give a gather's gradient as ``IndexedSlices``). The book's PyTorch, MXNet and Paddle form,
    ``grad_clipping(net, theta)`` after ``l.backward()``, scales the gradients attached to the network's
    parameters in place (``net`` a framework module or a model with ``.params``) and returns None.
    """
    if not ops.is_tensor(theta):
        checks.positive_number("theta", theta, " (the largest gradient norm, e.g. 1)")
    if not isinstance(grads, (list, tuple)) and inplace.params_of(grads) is not None:
        return inplace.clip_attached(grads, theta, clip_by_global_norm)
    hooks = ops.in_place_hooks()
    if hooks is not None and hooks.dense_grad is not None:
        grads = [hooks.dense_grad(g) for g in grads]
    return clip_by_global_norm(grads, theta)


def sgd(params, grads, lr=None, batch_size=1):
    """Minibatch stochastic gradient descent: p <- p - lr * g / batch_size, as new tensors.

    The book's forms work too: ``sgd(params, lr, batch_size)`` (PyTorch, MXNet, Paddle) updates each parameter
    in place from the gradient its backward pass attached, and ``tf.Variable`` parameters (TensorFlow)
    are assigned in place; both return the same parameter list.
    """
    if not isinstance(grads, (list, tuple)) and not ops.is_tensor(grads):  # sgd(params, lr, batch_size)
        inplace.sgd(params, grads, batch_size if lr is None else lr)
        return list(params)
    if lr is None:
        raise ArgumentError("d2l.sgd(params, grads, lr, batch_size): give the learning rate")
    return inplace.assign_variables(params, [p - (lr / batch_size) * g for p, g in zip(params, grads)])


class SGD(optim.SGD):
    """d2lrnn's optimizer ``SGD(lr, weight_decay=0)`` (see :class:`d2lrnn.training.optim.SGD`), and the
    older gluon tutorial's ``utils.SGD(params, lr)``: p <- p - lr * p.grad for each parameter, in place
    from the gradient its backward pass attached (PyTorch, MXNet); that form returns None."""

    def __new__(cls, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)):  # the tutorial's SGD(params, lr)
            tutorial_sgd(*args, **kwargs)
            return None
        return super().__new__(cls)


def tutorial_sgd(params, lr):
    """The gluon tutorial's in-place step (its gradients are not averaged over the batch here)."""
    checks.positive_number("lr", lr, " (the learning rate, e.g. 0.1)")
    inplace.sgd(params, lr, 1)


def train_ch8(net, train_iter, vocab, lr, num_epochs, device=None, use_random_iter=False, *,
              prefixes=TIME_MACHINE_PREFIXES, verbose=True, return_history=False, **options):
    """Train a language model as the book's ``train_ch8`` does; None, as the book's (a notebook cell
    that ends with it shows only what it printed), or with ``return_history`` the history (a dict of
    lists: see :func:`d2lrnn.lm.train.train_lm`).

    ``options`` are :func:`d2lrnn.lm.train.train_lm`'s (validation, optimizers, schedules, truncation,
    early stopping, plots, continuing a run). With ``verbose`` the last epoch's perplexity and speed are
    printed, and the model's continuations of ``prefixes``. ``net`` may also be the reader's own framework
    module (the book's concise ``RNNModel``): it is trained through
    :class:`d2lrnn.book.modules.ModuleModel`, and its parameters hold the trained values afterwards; it
    starts as in the book (MXNet's train_ch8 draws a Gluon block's weights anew from N(0, 0.01^2)).
    A bidirectional model trains, as the book's does to show that it cannot predict, with a warning that
    says why (d2lrnn's own ``train_lm`` refuses it unless ``allow_bidirectional=True``).
    """
    _allow_bidirectional(net, options)
    model = as_model(net)
    if model is not net:
        _prepare_module(net, model, train_iter, device, options)
    try:
        history = train_lm(model, train_iter, lr, num_epochs, device, use_random_iter, verbose=verbose,
                           **options)
    finally:
        if model is not net:
            model.write_back()
    if verbose:
        _report(history, net, vocab, device, prefixes)
    return history if return_history else None


def _allow_bidirectional(net, options):
    """The book trains a bidirectional language model to show that it cannot predict: so may a reader,
    with a warning that says why (``train_lm`` itself refuses it unless ``allow_bidirectional=True``)."""
    if is_bidirectional(net) and not options.get("allow_bidirectional"):
        warnings.warn(f"d2l.train_ch8: {SEES_THE_FUTURE}; its perplexity and predictions mean nothing",
                      UserWarning, stacklevel=3)
        options["allow_bidirectional"] = True


def _prepare_module(net, model, train_iter, device, options):
    """A reader's framework module starts as the book's train_ch8 starts it, its shapes known."""
    hooks = ops.in_place_hooks()
    if options.get("history") is None and hooks.book_lm_init is not None:
        hooks.book_lm_init(net, device)
    model.infer_shapes(train_iter, lambda X, Y: (X, model.begin_state(ops.shape(X)[0], device)[0]))


def _report(history, net, vocab, device, prefixes):
    """The last epoch's perplexity and speed, then the model's continuations of ``prefixes``."""
    line = f"perplexity {format_perplexity(history['train_ppl'][-1], 1)}"
    if history["val_ppl"]:
        line += f", validation perplexity {format_perplexity(history['val_ppl'][-1], 1)}"
    print(f"{line}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on {device or ops.cpu()}")
    for prefix in prefixes:
        print(predict_ch8(prefix, 50, net, vocab, device))


def train_epoch_ch8(net, train_iter, loss=None, updater=None, device=None, use_random_iter=False, **options):
    """One epoch, as the book's ``train_epoch_ch8``; returns (perplexity, tokens per second).

    ``updater`` is a learning rate (d2lrnn's compiled SGD step with clipping at 1; ``options`` are
    :func:`d2lrnn.lm.train.train_epoch_lm`'s), or the book's: the framework's ``loss`` object and its
    updater (see :func:`book_epoch`). TensorFlow's cells call it as ``(net, train_iter, loss, updater,
    use_random_iter)``.
    """
    if options.get("step") is None and updater is not None and not isinstance(updater, numbers.Real):
        if isinstance(device, bool):  # TensorFlow's form: (net, train_iter, loss, updater, use_random_iter)
            device, use_random_iter = None, device
        return book_epoch(net, train_iter, loss, updater, device, use_random_iter)
    return train_epoch_lm(net, train_iter, 1.0 if updater is None else updater, device, use_random_iter,
                          loss=loss, **options)


def book_epoch(net, train_iter, loss, updater, device, use_random_iter):
    """One epoch the book's way: the framework's ``loss`` object and ``updater`` (a ``torch.optim`` or
    ``paddle.optimizer`` optimizer, a Keras optimizer, or ``updater(batch_size)`` such as the book's
    ``lambda batch_size: d2l.sgd(net.params, lr, batch_size)`` or a Gluon ``trainer.step``), gradients
    clipped to norm 1, the parameters updated in place. Returns (perplexity, tokens per second)."""
    hooks = ops.in_place_hooks()
    if hooks is None:
        raise ArgumentError(f"d2l.train_epoch_ch8 takes a learning rate as updater on the {backend_name()} "
                            "backend: a framework's optimizer or update function needs that framework's "
                            "backend")
    if loss is None:
        raise ArgumentError("d2l.train_epoch_ch8 got the book's updater but no loss: pass the framework's "
                            "loss too (the book passes e.g. nn.CrossEntropyLoss()), or a learning rate as "
                            "updater")
    model = as_model(net)
    params = inplace.params_of(net)  # the module's or the reader's own tensors: the updater writes them
    call_loss = hooks.call_loss or (lambda loss, y_hat, y: loss(y_hat, y))
    state, timer, metric = None, Timer(), Accumulator(2)
    for X, Y in train_iter:
        state = state_for(model, X, state, device, reset=use_random_iter)
        y = ops.reshape(ops.transpose(Y), (-1,))

        def objective(params, X=X, y=y, state=state):
            y_hat, new_state = model.forward(params, X, state)
            return ops.mean(call_loss(loss, y_hat, y)), new_state

        (l, state), grads = ops.value_and_grad(objective, has_aux=True)(params)
        grads = clip_by_global_norm(grads, 1.0)  # value_and_grad's gradients are dense tensors
        if hooks.grad is None:  # no attached gradients (TensorFlow): a Keras optimizer on the tf.Variables
            updater.apply_gradients(zip(grads, params))
        else:
            for p, g in zip(params, grads):
                hooks.set_grad(p, g)
            if callable(updater):
                updater(batch_size=1)
            else:  # a torch.optim or paddle.optimizer optimizer
                updater.step()
        n = ops.size(y)
        metric.add(float(ops.to_numpy(l)) * n, n)
    if metric[1] == 0:
        raise DataError("the training iterator produced no minibatch: use a smaller batch size or number of "
                        "steps, or a longer corpus")
    return perplexity(metric[0] / metric[1]), metric[1] / timer.stop()


def evaluate_loss(net, data_iter, loss):
    """The mean loss per example over ``data_iter`` (the book's ``evaluate_loss``): ``loss(net(X), y)``
    with ``y`` shaped as the output, summed and counted elementwise (a loss that reduces, such as Keras's
    ``MeanSquaredError``, counts once per minibatch, as in the book)."""
    metric = Accumulator(2)
    for X, y in data_iter:
        out = net(X)
        l = ops.to_numpy(loss(out, ops.reshape(y, ops.shape(out))))
        metric.add(float(l.sum()), l.size)
    if metric[1] == 0:
        raise DataError("d2l.evaluate_loss: the data iterator produced no minibatch")
    return metric[0] / metric[1]


def predict_ch8(prefix, num_preds, net, vocab, device=None, temperature=0.0, seed=None):
    """Continue ``prefix`` by ``num_preds`` tokens (the book's ``predict_ch8``; see
    :func:`d2lrnn.lm.generate.predict`), with d2lrnn's model or the reader's own framework module."""
    return predict(prefix, num_preds, as_model(net), vocab, device, temperature, seed)
