"""The English 1.0 edition's object-oriented training API: ``Module``, ``DataModule``, ``Trainer``.

The 1.0 edition writes a model as a framework module that also says how it is trained (``loss``,
``training_step``, ``validation_step``, ``configure_optimizers``), data as a ``DataModule`` with train and
validation loaders, and ``Trainer(max_epochs, num_gpus, gradient_clip_val).fit(model, data)``. The trainer
here runs d2lrnn's one training loop (:func:`d2lrnn.training.loop.fit`, with its divergence guard) over a
step that trains the module the framework's way, in place: the model's ``training_step`` gives the loss,
the backend's ``in_place_hooks().backward`` attaches the gradients, the trainer clips them and the
optimizer (:class:`SGD` and :class:`Adam` here, d2lrnn's optimizers applied in place) updates the
parameters.

The module classes derive from the active framework's (``InPlaceHooks.module_bases``), so they are made
per backend by :func:`module_classes`.
"""

import collections
import inspect

import numpy as np

from ... import ops
from ...backends import backend_name, functional_hooks, generator_state_kept
from ...data.translation import load_array
from ...errors import ArgumentError
from ...training import loop
from ...training.optim import SGD as SGDRule
from ...training.optim import Adam as AdamRule
from ...training.progress import in_notebook


def add_to_class(Class):  # noqa: N803 - the book's name
    """``@add_to_class(C)`` over ``def f(self, ...)``: ``f`` becomes a method of ``C`` (the book writes a
    class's methods in separate cells)."""

    def register(fn):
        setattr(Class, fn.__name__, fn)

    return register


class HyperParameters:
    """``save_hyperparameters()``: the caller's arguments become attributes of the same names."""

    def save_hyperparameters(self, ignore=()):
        """Every argument of the calling ``__init__`` (but ``self``, those in ``ignore`` and names that
        start with ``_``) set as an attribute, and all of them in ``self.hparams``."""
        frame = inspect.currentframe().f_back
        try:
            _, _, _, local_vars = inspect.getargvalues(frame)
        finally:
            del frame
        self.hparams = {k: v for k, v in local_vars.items()
                        if k not in set(ignore) | {"self", "__class__"} and not k.startswith("_")}
        for k, v in self.hparams.items():
            setattr(self, k, v)


Point = collections.namedtuple("Point", ["x", "y"])


class ProgressBoard(HyperParameters):
    """Curves drawn point by point: ``draw(x, y, label, every_n)`` adds the mean of every ``every_n``
    points of a line to it (``board.data[label]``), redrawn inside a notebook when ``display`` is on."""

    def __init__(self, xlabel=None, ylabel=None, xlim=None, ylim=None, xscale="linear", yscale="linear",
                 ls=("-", "--", "-.", ":"), colors=("C0", "C1", "C2", "C3"), fig=None, axes=None,
                 figsize=(3.5, 2.5), display=True):
        self.save_hyperparameters()
        self.raw_points, self.data = collections.OrderedDict(), collections.OrderedDict()

    def draw(self, x, y, label, every_n=1):
        points = self.raw_points.setdefault(label, [])
        line = self.data.setdefault(label, [])
        points.append(Point(x, y))
        if len(points) != every_n:  # as the book's board: every_n 0 (under a batch a point) draws nothing
            return
        line.append(Point(float(np.mean([p.x for p in points])), float(np.mean([p.y for p in points]))))
        points.clear()
        if self.display and in_notebook():
            self.show()

    def show(self):
        """Draw the board's lines (in a notebook: in place of the last drawing)."""
        import matplotlib.pyplot as plt
        from IPython import display

        if self.fig is None:
            self.fig = plt.figure(figsize=self.figsize)
        axes = self.axes if self.axes else self.fig.gca()
        axes.cla()
        for (label, line), ls, color in zip(self.data.items(), self.ls, self.colors):
            axes.plot([p.x for p in line], [p.y for p in line], linestyle=ls, color=color, label=label)
        if self.xlim:
            axes.set_xlim(self.xlim)
        if self.ylim:
            axes.set_ylim(self.ylim)
        axes.set_xlabel(self.xlabel or "x")
        axes.set_ylabel(self.ylabel)
        axes.set_xscale(self.xscale)
        axes.set_yscale(self.yscale)
        axes.legend()
        display.display(self.fig)
        display.clear_output(wait=True)


def hooks_for(what):
    """The backend's in-place hooks, checked to declare ``what`` (one line where they do not)."""
    hooks = ops.in_place_hooks()
    if hooks is None or getattr(hooks, what) is None:
        raise ArgumentError("d2lrnn's English 1.0 classes run on PyTorch, MXNet, TensorFlow and Flax "
                            f"modules: the {backend_name()} backend has no {what} (use d2lrnn.en.torch, "
                            ".mxnet, .tensorflow or .jax)")
    return hooks


class InPlaceOptimizer(HyperParameters):
    """One of d2lrnn's optimizer rules (:mod:`d2lrnn.training.optim`) applied to a module's parameters in
    place, as the framework's optimizers are used: ``step()`` reads the gradients the backward pass
    attached (none: zero) and ``zero_grad()`` clears them (PyTorch, MXNet); ``apply_gradients(pairs)``
    takes ``(gradient, variable)`` pairs (TensorFlow, where ``params`` is None). The rule's state is made at
    the first step, when lazy layers have their shapes."""

    def __init__(self, params, rule):
        hooks = hooks_for("assign")
        self.params = params if params is None or hooks.book_parameters is not None else list(params)
        self.rule, self.t, self.state = rule, 0, None

    def _update(self, owned, grads):
        hooks = ops.in_place_hooks()
        params = [ops.detach(p) for p in owned]
        if self.state is None:
            self.state = self.rule.init(params)
        self.t += 1
        new, self.state = self.rule.update(params, grads, self.state, self.rule.scalars(self.t, self.rule.lr))
        for own, value in zip(owned, new):
            hooks.assign(own, value)

    def step(self, *batch_size):
        """Update the parameters (MXNet's cells pass a batch size: the loss is already a mean)."""
        hooks = hooks_for("grad")
        owned = hooks.param_list(self.params)
        grads = [hooks.grad(p) for p in owned]
        self._update(owned, [ops.zeros_like(ops.detach(p)) if g is None else ops.detach(g)
                             for p, g in zip(owned, grads)])

    def zero_grad(self):
        hooks = hooks_for("grad")
        for p in hooks.param_list(self.params):
            g = hooks.grad(p)
            if g is not None:
                hooks.set_grad(p, ops.zeros_like(g))

    def apply_gradients(self, grads_and_vars):
        """Update each variable by its gradient (TensorFlow's form)."""
        hooks = ops.in_place_hooks()
        pairs = list(grads_and_vars)
        dense = hooks.dense_grad or (lambda g: g)
        self._update([v for _, v in pairs], [dense(g) for g, _ in pairs])


def _params_and_lr(params, lr):
    """``(params, lr)`` of ``SGD(params, lr)`` (PyTorch, MXNet) or ``SGD(lr)`` (TensorFlow)."""
    return (None, params) if lr is None else (params, lr)


class SGD(InPlaceOptimizer):
    """The book's minibatch SGD, p <- p - lr * grad(p) in place: ``SGD(params, lr)`` with ``step()`` and
    ``zero_grad()`` (PyTorch, MXNet), ``SGD(lr)`` with ``apply_gradients`` (TensorFlow)."""

    def __init__(self, params, lr=None):
        params, lr = _params_and_lr(params, lr)
        super().__init__(params, SGDRule(lr))
        self.lr = lr


class Adam(InPlaceOptimizer):
    """Adam (d2lrnn's rule) in place, with the frameworks' defaults (beta1 0.9, beta2 0.999, eps 1e-8):
    ``Adam(params, lr)``, or ``Adam(lr)`` on TensorFlow."""

    def __init__(self, params, lr=None):
        params, lr = _params_and_lr(params, lr)
        super().__init__(params, AdamRule(lr))
        self.lr = lr


def optimizer(rule, model):
    """``rule`` (:class:`SGD`, :class:`Adam`) at the model's ``lr``, in the framework's form."""
    hooks = hooks_for("assign")
    return rule(model.lr) if hooks.grad is None else rule(model.parameters(), model.lr)


def trained_params(model):
    """The parameters the trainer updates: what ``parameters()`` gives (TensorFlow: the trainable
    variables)."""
    hooks = ops.in_place_hooks()
    return hooks.module_params(model) if hooks.grad is None else hooks.param_list(model.parameters())


class DataModule(HyperParameters):
    """Data: ``train_dataloader()`` and ``val_dataloader()`` from the subclass's ``get_dataloader(train)``."""

    def __init__(self, root="../data", num_workers=4):
        self.save_hyperparameters()

    def get_dataloader(self, train):
        raise NotImplementedError(f"{type(self).__name__}: write get_dataloader(self, train)")

    def train_dataloader(self):
        return self.get_dataloader(train=True)

    def val_dataloader(self):
        return self.get_dataloader(train=False)

    def get_tensorloader(self, tensors, train, indices=slice(0, None)):
        """Minibatches of ``batch_size`` rows of ``tensors[indices]``, shuffled when ``train`` (from
        d2lrnn's generator)."""
        return load_array([t[indices] for t in tensors], self.batch_size, is_train=train)


class LiveParams:
    """A module's parameters as the training loop sees a model (``params``): the module's own, which the
    step updates in place; the loop's divergence guard puts back values it kept."""

    def __init__(self, model):
        self.model = model

    @property
    def params(self):
        return trained_params(self.model)

    @params.setter
    def params(self, values):
        hooks = ops.in_place_hooks()
        for own, value in zip(trained_params(self.model), values):
            if own is not value:
                hooks.assign(own, value)


class BookTask(loop.Task):
    """The 1.0 trainer's epoch as a task of d2lrnn's loop: the figure is the mean training loss, the
    validation is the model's own ``validation_step`` over the validation loader, with dropout off.

    For the in-place frameworks; :class:`d2lrnn.book.en.functional.FunctionalTask` changes how the model
    is switched to evaluation and called."""

    name = "Trainer.fit"
    empty_message = "the data's train_dataloader() produced no minibatch"

    def __init__(self, trainer):
        self.trainer = trainer

    def validate(self, net, epoch, last):
        trainer = self.trainer
        trainer.epoch = epoch - 1
        if trainer.val_dataloader is None:
            return {}
        self.set_training(False)
        try:
            for batch in trainer.val_dataloader:
                self.validation_step(trainer.prepare_batch(batch))
                trainer.val_batch_idx += 1
        finally:
            self.set_training(True)
        return {}

    def set_training(self, mode):
        """Dropout on (``mode`` True) or off in the trainer's model."""
        ops.in_place_hooks().set_training(self.trainer.model, mode)

    def validation_step(self, batch):
        """The model's ``validation_step`` on one prepared minibatch, recording no gradients."""
        with ops.in_place_hooks().no_grad():
            self.trainer.model.validation_step(batch)


class Trainer(HyperParameters):
    """``Trainer(max_epochs, num_gpus=0, gradient_clip_val=0).fit(model, data)``: ``max_epochs`` epochs of
    the model's ``training_step`` on ``data.train_dataloader()``, gradients clipped to global norm
    ``gradient_clip_val`` (0: not clipped), each epoch followed by ``validation_step`` on
    ``data.val_dataloader()``. ``num_gpus`` GPUs are used where there are that many (none on a CPU)."""

    def __init__(self, max_epochs, num_gpus=0, gradient_clip_val=0):
        self.save_hyperparameters()
        self.gpus = [ops.try_gpu(i) for i in range(min(num_gpus, ops.num_gpus()))]

    def prepare_data(self, data):
        self.train_dataloader = data.train_dataloader()
        self.val_dataloader = data.val_dataloader()
        self.num_train_batches = len(self.train_dataloader)
        self.num_val_batches = len(self.val_dataloader) if self.val_dataloader is not None else 0

    def prepare_model(self, model):
        model.trainer = self
        model.board.xlim = [0, self.max_epochs]
        if self.gpus and functional_hooks() is None:  # (JAX puts the arrays where the batches are)
            model.to(self.gpus[0])
        self.model = model

    def prepare_batch(self, batch):
        """The minibatch on the trainer's first GPU, if it has one."""
        if self.gpus:
            batch = [ops.to_device(a, self.gpus[0]) for a in batch]
        return list(batch)

    def clip_gradients(self, grad_clip_val, model):
        """Scale the gradients attached to the model's parameters so that their global norm is at most
        ``grad_clip_val`` (d2lrnn's ``clip_by_global_norm``). On TensorFlow, as the book's, ``model`` is the
        list of gradients, and the clipped ones are returned."""
        from ...training.step import clip_by_global_norm

        hooks = hooks_for("assign")
        if hooks.grad is None:
            dense = hooks.dense_grad or (lambda g: g)
            return clip_by_global_norm([dense(g) for g in model], grad_clip_val)
        params = [p for p in hooks.param_list(model.parameters()) if hooks.grad(p) is not None]
        grads = clip_by_global_norm([ops.detach(hooks.grad(p)) for p in params], grad_clip_val)
        for p, g in zip(params, grads):
            hooks.set_grad(p, g)

    def fit(self, model, data):
        hooks = hooks_for("set_training")
        self.prepare_data(data)
        self.prepare_model(model)
        self.optim = model.configure_optimizers()
        self.epoch, self.train_batch_idx, self.val_batch_idx = 0, 0, 0

        def step(params, *batch):
            training_step = lambda: self.model.training_step(self.prepare_batch(batch))  # noqa: E731
            if hooks.grad is None:  # TensorFlow: a tape gives the gradients; the optimizer applies them
                variables = hooks.module_params(self.model)
                loss, grads = hooks.tape_gradients(training_step, variables)
                if self.gradient_clip_val > 0:
                    grads = self.clip_gradients(self.gradient_clip_val, grads)
                self.optim.apply_gradients(zip(grads, variables))
            else:
                if hasattr(self.optim, "zero_grad"):  # (MXNet's backward pass overwrites the gradients)
                    self.optim.zero_grad()
                loss = hooks.backward(training_step)
                if self.gradient_clip_val > 0:
                    self.clip_gradients(self.gradient_clip_val, self.model)
                hooks.optimizer_step(self.optim)
            self.train_batch_idx += 1
            return ops.detach(loss), params, None

        if hooks.infer_shapes is not None:  # Gluon's deferred shapes, unbuilt Keras layers: one call first
            with generator_state_kept():
                batch = self.prepare_batch(next(iter(self.train_dataloader)))
            hooks.infer_shapes(model, *batch[:-1])
        hooks.set_training(model, True)
        loop.fit(LiveParams(model), self.train_dataloader, step, BookTask(self), self.max_epochs,
                 progress=False, plot=False, verbose=False)


def _not_written(what):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: write {what}")

    method.__name__ = what.split("(")[0]
    return method


class ModuleMethods(HyperParameters):
    """What the book's ``Module`` adds to the framework's module class (see :func:`module_classes`)."""

    def __init__(self, plot_train_per_epoch=2, plot_valid_per_epoch=1):
        super().__init__()
        self.save_hyperparameters()
        self.board = ProgressBoard()
        if ops.in_place_hooks().module_bases[2] != "forward":  # Keras: the mode the last call was given
            self.training = None
            if vars(self).get("loss", False) is None:  # Keras 3's Model sets its compiled loss, None, which
                del self.loss                             # would hide the book's loss method

    loss = _not_written("loss(self, y_hat, y)")

    def forward(self, X):
        if not hasattr(self, "net"):
            raise NotImplementedError(f"{type(self).__name__}: set self.net or write forward(self, X)")
        return self.net(X)

    def plot(self, key, value, train):
        """Add ``value`` to the board's line ``train_<key>`` (at the fraction of epochs trained) or
        ``val_<key>`` (at the epoch's end)."""
        if not hasattr(self, "trainer"):
            raise ArgumentError(f"{type(self).__name__}.plot draws training curves: train the model with "
                                "d2l.Trainer(...).fit(model, data) first")
        self.board.xlabel = "epoch"
        if train:
            x = self.trainer.train_batch_idx / self.trainer.num_train_batches
            n = self.trainer.num_train_batches / self.plot_train_per_epoch
        else:
            x = self.trainer.epoch + 1
            n = self.trainer.num_val_batches / self.plot_valid_per_epoch
        self.board.draw(x, float(ops.to_numpy(value)), ("train_" if train else "val_") + key, every_n=int(n))

    def training_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("loss", loss, train=True)
        return loss

    def validation_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("loss", loss, train=False)

    def configure_optimizers(self):
        """Minibatch SGD at the model's ``lr``."""
        return optimizer(SGD, self)

    def apply_init(self, inputs, init=None):
        """Run the model once on ``inputs`` (so lazy layers get their shapes), then
        ``self.net.apply(init)``."""
        self.forward(*inputs)
        if init is not None:
            self.net.apply(init)


class ClassifierMethods:
    """What the book's ``Classifier`` adds: cross-entropy loss, accuracy, and both in validation."""

    def validation_step(self, batch):
        Y_hat = self(*batch[:-1])
        self.plot("loss", self.loss(Y_hat, batch[-1]), train=False)
        self.plot("acc", self.accuracy(Y_hat, batch[-1]), train=False)

    def accuracy(self, Y_hat, Y, averaged=True):
        """The fraction of rows of ``Y_hat`` whose largest entry is at the label (or each row's 0/1)."""
        Y_hat = ops.reshape(Y_hat, (-1, ops.shape(Y_hat)[-1]))
        preds = ops.astype(ops.argmax(Y_hat, axis=1), "float32")
        compare = ops.astype(preds == ops.astype(ops.reshape(Y, (-1,)), "float32"), "float32")
        return ops.mean(compare) if averaged else compare

    def loss(self, Y_hat, Y, averaged=True):
        """Cross-entropy of the logits ``Y_hat`` (last axis: classes) against the labels ``Y``."""
        Y_hat = ops.reshape(Y_hat, (-1, ops.shape(Y_hat)[-1]))
        losses = ops.softmax_cross_entropy(Y_hat, ops.reshape(Y, (-1,)))
        return ops.mean(losses) if averaged else losses


def module_classes(hooks):
    """``{"Module": ..., "Classifier": ...}`` over the framework's model class."""
    _, Model, method = hooks.module_bases
    Module = type("Module", (ModuleMethods, Model), {
        "__doc__": "The base class of the book's models: the framework's module with how it is trained.",
        "__module__": __name__})
    if hooks.book_parameters is not None:  # else the framework's modules have parameters()
        Module.parameters = lambda self: hooks.book_parameters(self)
    if hooks.scratch_params is not None:
        Module.get_scratch_params = lambda self: hooks.scratch_params(self)
    if method != "forward":  # Keras: the module's computation is call(), which notes the mode it is given
        setattr(Module, method, keras_call)
    Classifier = type("Classifier", (ClassifierMethods, Module), {
        "__doc__": "A model trained by cross-entropy, validated by loss and accuracy.",
        "__module__": __name__})
    return {"Module": Module, "Classifier": Classifier}


def keras_call(self, *args, **kwargs):
    """A Keras module's ``call``: ``forward(*args)``, the ``training`` flag it is given kept as
    ``self.training``."""
    if "training" in kwargs:
        self.training = kwargs["training"]
    return self.forward(*args)


def check_len(a, n):
    """Assert that ``a`` has ``n`` elements."""
    assert len(a) == n, f"list's length {len(a)} != expected length {n}"


def check_shape(a, shape):
    """Assert that the tensor ``a`` has the shape ``shape``."""
    got = tuple(ops.shape(a))
    assert got == tuple(shape), f"tensor's shape {got} != expected shape {shape}"
