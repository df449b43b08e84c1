"""The English 1.0 edition's classes on a functional framework: its JAX cells (Flax).

There a model is a dataclass module (fields for its sizes, parameters made in ``setup`` or where a
compact ``__call__`` runs) that holds no parameters: ``init`` makes them, ``apply`` runs the model with
them. The book's ``training_step(params, batch, state)`` returns ``(loss, gradients)`` and the trainer keeps
a ``TrainState`` (``trainer.state.params``, the optimizer's state, a dropout key) that each step replaces.
:func:`classes` builds the book's classes on the framework's module class through the backend's
:class:`~d2lrnn.backends.FunctionalHooks`; :func:`fit` is ``Trainer.fit`` there, running d2lrnn's training
loop (:func:`d2lrnn.training.loop.fit`) over the state's parameters, the model's loss compiled
(``ops.compile``). The optimizer is what ``configure_optimizers`` returns: an optax transformation, or
:class:`SGD` / :class:`Adam` here (d2lrnn's rules in optax's form).
"""

import dataclasses

from ... import ops
from ...backends import functional_hooks, generator, generator_state_kept
from ...errors import ArgumentError
from ...models.rnn import rnn_scan
from ...training import loop
from ...training.optim import SGD as SGDRule
from ...training.optim import Adam as AdamRule
from ...training.step import clip_by_global_norm
from . import base
from .base import HyperParameters, ModuleMethods, ProgressBoard
from .rnn import ScratchLMOutputs


def hooks():
    """The active backend's functional hooks (one line where it has none)."""
    declared = functional_hooks()
    if declared is None:
        raise ArgumentError("d2lrnn's functional 1.0 classes (TrainState, get_key) are the JAX (Flax) "
                            "cells': use d2lrnn.en.jax")
    return declared


def get_key():
    """A new random key, drawn from d2lrnn's seeded generator (``d2lrnn.manual_seed`` repeats it)."""
    return hooks().key(int(generator().integers(0, 2**31 - 1)))


# -- optimizers and the training state -----------------------------------------------------------------------

class FunctionalOptimizer(HyperParameters):
    """One of d2lrnn's optimizer rules (:mod:`d2lrnn.training.optim`) as an optax gradient transformation:
    ``init(params)`` gives its state, ``update(grads, state, params)`` the updates (new minus old
    parameters) and the next state, for any pytree of parameters."""

    def __init__(self, rule):
        self.rule = rule

    def init(self, params):
        return 0, self.rule.init(hooks().leaves(params))

    def update(self, grads, state, params=None):
        if params is None:
            raise ArgumentError(f"{type(self).__name__}.update needs the parameters: "
                                "update(grads, state, params)")
        h = hooks()
        t, rule_state = state
        old = h.leaves(params)
        scalars = self.rule.scalars(t + 1, self.rule.lr)
        new, rule_state = self.rule.update(old, h.leaves(grads), rule_state, scalars)
        return h.rebuild(params, [n - p for n, p in zip(new, old)]), (t + 1, rule_state)


class SGD(FunctionalOptimizer):
    """Minibatch SGD, p <- p - lr * grad(p): ``SGD(lr)`` (optax's ``sgd(lr)``)."""

    def __init__(self, lr):
        super().__init__(SGDRule(lr))
        self.lr = lr


class Adam(FunctionalOptimizer):
    """Adam with optax's defaults (beta1 0.9, beta2 0.999, eps 1e-8): ``Adam(lr)``."""

    def __init__(self, lr):
        super().__init__(AdamRule(lr))
        self.lr = lr


@dataclasses.dataclass(frozen=True)
class TrainState:
    """What the trainer holds between steps (``trainer.state``): the parameters, the optimizer ``tx`` and
    its state, the step count, the model's ``apply_fn`` and the key dropout draws from. Each step makes a
    new one (``apply_gradients``, ``replace``)."""

    step: int
    apply_fn: object
    params: object
    tx: object
    opt_state: object
    dropout_rng: object = None
    batch_stats: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def create(cls, *, apply_fn, params, tx, **kwargs):
        return cls(step=0, apply_fn=apply_fn, params=params, tx=tx, opt_state=tx.init(params), **kwargs)

    def apply_gradients(self, *, grads):
        """The state after one optimizer step on ``grads`` (a pytree shaped as ``params``)."""
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        params = hooks().tree_map(lambda p, u: p + u, self.params, updates)
        return self.replace(step=self.step + 1, params=params, opt_state=opt_state)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


# -- the trainer's fit ---------------------------------------------------------------------------------------

class StateParams:
    """The trainer's state as the training loop sees a model: ``params`` are the leaves of
    ``trainer.state.params``; setting them (the divergence guard putting back finite ones) replaces the
    state's."""

    def __init__(self, trainer):
        self.trainer = trainer

    @property
    def params(self):
        return hooks().leaves(self.trainer.state.params)

    @params.setter
    def params(self, values):
        state = self.trainer.state
        if any(own is not value for own, value in zip(self.params, values)):
            self.trainer.state = state.replace(params=hooks().rebuild(state.params, values))


def _set_training(model, mode):
    """The model's ``training`` field (dropout on or off) where it has one."""
    if "training" in getattr(model, "__dataclass_fields__", {}):
        object.__setattr__(model, "training", mode)


class FunctionalTask(base.BookTask):
    """:class:`~d2lrnn.book.en.base.BookTask` for a functional framework: the model's ``training`` field
    switches dropout, and ``validation_step(params, batch, state)`` gets the trainer's parameters."""

    def set_training(self, mode):
        _set_training(self.trainer.model, mode)

    def validation_step(self, batch):
        trainer = self.trainer
        trainer.model.validation_step(trainer.state.params, batch, trainer.state)


def fit(trainer, model, data, key=None):
    """``Trainer.fit`` on a functional framework: the parameters made by ``model.apply_init`` on the first
    minibatch from ``key`` (None: :func:`get_key`), then ``max_epochs`` epochs of
    ``model.training_step(params, batch, state)``, its gradients clipped (``gradient_clip_val`` > 0) and
    applied by the model's optimizer to ``trainer.state``."""
    h = hooks()
    trainer.prepare_data(data)
    trainer.prepare_model(model)
    trainer.optim = model.configure_optimizers()
    params_key, dropout_key = h.split(get_key() if key is None else key)
    with generator_state_kept():
        dummy = trainer.prepare_batch(next(iter(trainer.train_dataloader)))[:-1]
    variables = model.apply_init(dummy, key={"params": params_key, "dropout": dropout_key})
    trainer.state = TrainState.create(apply_fn=model.apply, params=h.params_of(variables), tx=trainer.optim,
                                      dropout_rng=dropout_key)
    trainer.epoch, trainer.train_batch_idx, trainer.val_batch_idx = 0, 0, 0

    def step(params, *batch):
        state = trainer.state
        value, grads = model.training_step(state.params, trainer.prepare_batch(batch), state)
        if trainer.gradient_clip_val > 0:
            grads = trainer.clip_gradients(trainer.gradient_clip_val, grads)
        state = state.apply_gradients(grads=grads)
        trainer.state = state.replace(dropout_rng=h.split(state.dropout_rng)[0])
        trainer.train_batch_idx += 1
        loss = value[0] if isinstance(value, tuple) else value  # a Classifier's loss is (loss, aux)
        return ops.detach(loss), h.leaves(trainer.state.params), None

    _set_training(model, True)
    loop.fit(StateParams(trainer), trainer.train_dataloader, step, FunctionalTask(trainer),
             trainer.max_epochs, progress=False, plot=False, verbose=False)


class Trainer(base.Trainer):
    """``Trainer(max_epochs, num_gpus=0, gradient_clip_val=0).fit(model, data, key=None)`` on a functional
    framework: the parameters made from ``key`` (None: :func:`get_key`), trained, are then in
    ``self.state.params`` (a :class:`TrainState`); see :func:`fit`."""

    def fit(self, model, data, key=None):
        fit(self, model, data, key)

    def clip_gradients(self, grad_clip_val, grads):
        """The pytree ``grads`` scaled to global norm at most ``grad_clip_val``."""
        h = hooks()
        return h.rebuild(grads, clip_by_global_norm(h.leaves(grads), grad_clip_val))


# -- the model classes ---------------------------------------------------------------------------------------

def _compiled(model, name, body):
    """``body`` compiled once per model, ``name`` and value of the model's ``training`` field (traced with
    it), kept on the model."""
    cache = model.__dict__.setdefault("_d2lrnn_compiled", {})
    key = (name, getattr(model, "training", None))
    if key not in cache:
        cache[key] = ops.compile(body)
    return cache[key]


class FunctionalModuleMethods:
    """What the book's ``Module`` adds to the framework's module: ``__call__`` runs ``forward``, the
    training and validation steps take the parameters and the trainer's state."""

    def loss(self, params, X, y, state):
        raise NotImplementedError(f"{type(self).__name__}: write loss(self, params, X, y, state)")

    def forward(self, X, *args, **kwargs):
        if not hasattr(self, "net"):
            raise NotImplementedError(f"{type(self).__name__}: set self.net in setup or write "
                                      "forward(self, X)")
        return self.net(X, *args, **kwargs)

    def __call__(self, X, *args, **kwargs):
        return self.forward(X, *args, **kwargs)

    plot = ModuleMethods.plot

    def training_step(self, params, batch, state):
        """``(loss, gradients)`` of the minibatch, the loss drawn as ``train_loss``."""
        loss, grads = hooks().value_and_grad(self.loss)(params, batch[:-1], batch[-1], state)
        self.plot("loss", loss, train=True)
        return loss, grads

    def validation_step(self, params, batch, state):
        self.plot("loss", self.loss(params, batch[:-1], batch[-1], state), train=False)

    def apply_init(self, dummy_input, key):
        """The variables of the model's first call on ``dummy_input`` (a tuple of its arguments)."""
        _, variables = hooks().init(self, key, *dummy_input)
        return variables

    def configure_optimizers(self):
        """Minibatch SGD at the model's ``lr``."""
        return SGD(self.lr)


class FunctionalClassifierMethods:
    """What the book's ``Classifier`` adds: the cross-entropy loss ``(loss, aux)`` of the model run with
    ``params`` (compiled), accuracy, and both in validation."""

    def training_step(self, params, batch, state):
        value, grads = hooks().value_and_grad(self.loss, has_aux=True)(params, batch[:-1], batch[-1], state)
        self.plot("loss", value[0], train=True)
        return value, grads

    def validation_step(self, params, batch, state):
        loss, _ = self.loss(params, batch[:-1], batch[-1], state)
        self.plot("loss", loss, train=False)
        self.plot("acc", self.accuracy(params, batch[:-1], batch[-1], state), train=False)

    def _logits(self, params, X, key):
        Y_hat = hooks().apply(self, params, *X, dropout_key=key)
        return ops.reshape(Y_hat, (-1, ops.shape(Y_hat)[-1]))

    def loss(self, params, X, Y, state, averaged=True):
        """``(cross-entropy, {})`` of the model's logits on ``X`` against the labels ``Y``: the mean, or
        each label's (``averaged=False``)."""

        def body(params, X, Y, key):
            losses = ops.softmax_cross_entropy(self._logits(params, X, key), ops.reshape(Y, (-1,)))
            return (ops.mean(losses) if averaged else losses), {}

        key = getattr(state, "dropout_rng", None)
        return _compiled(self, ("loss", averaged), body)(params, tuple(X), Y, key)

    def accuracy(self, params, X, Y, state, averaged=True):
        """The fraction of predictions (largest logit) equal to the label (or each one's 0/1)."""

        def body(params, X, Y):
            preds = ops.argmax(self._logits(params, X, None), axis=1)
            compare = ops.astype(ops.astype(preds, "int64") == ops.astype(ops.reshape(Y, (-1,)), "int64"),
                                 "float32")
            return ops.mean(compare) if averaged else compare

        return _compiled(self, ("accuracy", averaged), body)(params, tuple(X), Y)


class RNNScratchMethods:
    """H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h), weights ~ N(0, sigma^2), zero bias; d2lrnn's RNN layer
    (:func:`d2lrnn.models.rnn.rnn_scan`) computes the states."""

    def setup(self):
        h = hooks()
        self.W_xh = h.param(self, "W_xh", (self.num_inputs, self.num_hiddens), self.sigma)
        self.W_hh = h.param(self, "W_hh", (self.num_hiddens, self.num_hiddens), self.sigma)
        self.b_h = h.param(self, "b_h", (self.num_hiddens,), None)

    def __call__(self, inputs, state=None):
        """``(outputs, H)`` for time-major ``inputs``: the list of every step's H_t, and the last;
        ``state`` is None (zeros) or the one-tuple ``(H,)``."""
        if state is None:
            H = ops.zeros((ops.shape(inputs)[1], self.num_hiddens), device=ops.device_of(inputs))
        else:
            (H,) = state
            H = ops.reshape(H, (-1, self.num_hiddens))
        Hs, (H,) = rnn_scan(inputs, (H,), (self.W_xh, self.W_hh, self.b_h))
        return list(ops.unstack(ops.reshape(Hs, (ops.shape(inputs)[0], -1, self.num_hiddens)))), H


class RNNLMScratchMethods(ScratchLMOutputs):
    """A character language model over ``rnn``: one-hot inputs, the RNN, O_t = H_t W_hq + b_q; trained by
    cross-entropy, reported as perplexity."""

    def setup(self):
        h = hooks()
        self.W_hq = h.param(self, "W_hq", (self.rnn.num_hiddens, self.vocab_size), self.rnn.sigma)
        self.b_q = h.param(self, "b_q", (self.vocab_size,), None)

    def training_step(self, params, batch, state):
        value, grads = hooks().value_and_grad(self.loss, has_aux=True)(params, batch[:-1], batch[-1], state)
        self.plot("ppl", ops.exp(value[0]), train=True)
        return value, grads

    def validation_step(self, params, batch, state):
        loss, _ = self.loss(params, batch[:-1], batch[-1], state)
        self.plot("ppl", ops.exp(loss), train=False)

    def predict(self, prefix, num_preds, vocab, params=None):
        """``prefix`` followed by ``num_preds`` characters, each the most likely next one under ``params``
        (None: the trainer's, ``trainer.state.params``)."""
        h = hooks()
        if params is None:
            if not hasattr(self, "trainer"):
                raise ArgumentError(f"{type(self).__name__}.predict: pass the parameters, predict(prefix, "
                                    "num_preds, vocab, params), or train the model with d2l.Trainer first")
            params = self.trainer.state.params
        # Compiled once per model (see predict_step below): eagerly, a Flax nn.RNN layer compiled a scan
        # for every character.
        recur = _compiled(self, "predict rnn",
                          lambda params, embs, state: h.apply(self.rnn, params, embs, state))
        output = _compiled(self, "predict output",
                           lambda params, H: h.apply(self, params, H, method="output_layer"))
        state, outputs = None, [vocab[prefix[0]]]
        for i in range(len(prefix) + num_preds - 1):
            embs = self.one_hot(ops.tensor([[outputs[-1]]]))
            rnn_outputs, state = recur(params["rnn"], embs, state)
            if i < len(prefix) - 1:  # warm-up: feed the prefix
                outputs.append(vocab[prefix[i + 1]])
            else:
                Y = output(params, rnn_outputs)
                outputs.append(int(ops.to_numpy(ops.argmax(Y, axis=2)).reshape(-1)[0]))
        return "".join(vocab.idx_to_token[i] for i in outputs)


class RNNMethods:
    """The framework's RNN layer of ``num_hiddens``: ``(outputs, H)`` of time-major inputs from ``H``
    (None: zeros)."""

    def __call__(self, inputs, H=None, training=False):
        H, outputs = hooks().recurrent("rnn", self.num_hiddens)(inputs, H)
        return outputs, H


class GRUMethods:
    """``num_layers`` of the framework's GRU layer, dropout between them while ``training``: ``(outputs,
    states)`` with the layers' last states stacked (num_layers, batch, num_hiddens)."""

    def __call__(self, X, state=None, training=False):
        h = hooks()
        new_state = []
        for i in range(self.num_layers):
            H, X = h.recurrent("gru", self.num_hiddens)(X, None if state is None else state[i])
            new_state.append(H)
            if i < self.num_layers - 1:
                X = h.dropout(self.dropout)(X, deterministic=not training)
        return X, ops.stack(new_state, 0)


class RNNLMMethods:
    """The language model over a framework RNN (called with the model's ``training``), its output layer
    the framework's dense layer."""

    def setup(self):
        self.linear = hooks().dense(self.vocab_size)

    def output_layer(self, hiddens):
        """(batch, num_steps, vocab_size) logits of the time-major hidden states."""
        return ops.transpose(self.linear(hiddens), (1, 0, 2))

    def forward(self, X, state=None):
        rnn_outputs, _ = self.rnn(self.one_hot(X), state, self.training)
        return self.output_layer(rnn_outputs)


class LinearRegressionMethods:
    """y = X w + b with the framework's dense layer (weights ~ N(0, 0.01^2)), trained by the mean of
    (y_hat - y)^2 / 2 (optax's ``l2_loss``, as the book's JAX cells)."""

    def setup(self):
        self.net = hooks().dense(1, 0.01)

    def forward(self, X):
        return self.net(X)

    def loss(self, params, X, y, state):
        def body(params, X, y):
            y_hat = hooks().apply(self, params, *X)
            return ops.mean((y_hat - ops.reshape(y, ops.shape(y_hat))) ** 2 / 2)

        return _compiled(self, "loss", body)(params, tuple(X), y)

    def get_w_b(self, state):
        """The layer's weight and bias in ``state.params``."""
        return hooks().dense_params(state.params["net"])


class EncoderMethods:
    """The encoder's interface: ``__call__(X, *args)`` gives what the decoder's ``init_state`` takes."""

    def __call__(self, X, *args):
        raise NotImplementedError(f"{type(self).__name__}: write setup(self) and __call__(self, X, *args)")


class DecoderMethods:
    """The decoder's interface: ``init_state(enc_all_outputs, *args)``, then ``__call__(X, state)`` gives
    ``(outputs, state)``."""

    def init_state(self, enc_all_outputs, *args):
        raise NotImplementedError(f"{type(self).__name__}: write init_state(self, enc_all_outputs, *args)")

    def __call__(self, X, state):
        raise NotImplementedError(f"{type(self).__name__}: write setup(self) and __call__(self, X, state)")


class EncoderDecoderMethods:
    """``model(enc_X, dec_X, *args)``: encode, make the decoder's first state, return the decoder's
    outputs; both run in the model's ``training`` mode (dropout)."""

    def __call__(self, enc_X, dec_X, *args):
        enc_all_outputs = self.encoder(enc_X, *args, training=self.training)
        dec_state = self.decoder.init_state(enc_all_outputs, *args)
        return self.decoder(dec_X, dec_state, training=self.training)[0]

    def predict_step(self, params, batch, num_steps, save_attention_weights=False):
        """Greedy decoding of ``batch`` = (src, tgt, src_valid_len, _) under ``params`` for ``num_steps``
        steps from the target's first token: ``(predicted indices (batch, num_steps), ([], []))`` (the
        RNN models have no attention weights to keep)."""
        h = hooks()
        src, tgt, src_valid_len, _ = batch
        # Compiled once per model and shape: run eagerly, each call of a framework RNN layer (Flax's
        # ``nn.RNN`` scans with a new closure every time) compiled a program of its own, per layer and
        # decoded token (14 programs for 6 tokens through two layers).
        encode = _compiled(self, "predict encode", lambda params, src, src_valid_len: h.apply(
            self.encoder, params, src, src_valid_len, training=False))
        decode = _compiled(self, "predict decode", lambda params, X, dec_state: h.apply(
            self.decoder, params, X, dec_state, training=False))
        enc_all_outputs = encode(params["encoder"], src, src_valid_len)
        dec_state = self.decoder.init_state(enc_all_outputs, src_valid_len)
        outputs = [ops.reshape(tgt[:, 0], (-1, 1))]
        for _ in range(num_steps):
            Y, dec_state = decode(params["decoder"], outputs[-1], dec_state)
            outputs.append(ops.argmax(Y, 2))
        return ops.concat(outputs[1:], 1), ([], [])


class Seq2SeqEncoderMethods:
    """Embedding, then a ``num_layers`` GRU (the book's ``GRU``) over the time-major embeddings:
    ``(outputs, state)``, the state (num_layers, batch, num_hiddens)."""

    def setup(self):
        self.embedding = hooks().embedding(self.vocab_size, self.embed_size)
        self.rnn = type(self).GRU_CLASS(self.num_hiddens, self.num_layers, self.dropout)

    def __call__(self, X, *args, training=False):
        embs = self.embedding(ops.astype(ops.transpose(X), "int32"))
        return self.rnn(embs, training=training)


class Seq2SeqMethods:
    """The encoder-decoder trained by the cross-entropy of the target's non-padding tokens, with Adam."""

    def validation_step(self, params, batch, state):
        loss, _ = self.loss(params, batch[:-1], batch[-1], state)
        self.plot("loss", loss, train=False)

    def configure_optimizers(self):
        return Adam(self.lr)

    def loss(self, params, X, Y, state, averaged=False):
        """``(mean cross-entropy over the tokens of Y that are not tgt_pad, {})``."""

        def body(params, X, Y, key):
            losses = ops.softmax_cross_entropy(self._logits(params, X, key), ops.reshape(Y, (-1,)))
            mask = ops.astype(ops.reshape(Y, (-1,)) != self.tgt_pad, "float32")
            return ops.sum(losses * mask) / ops.sum(mask), {}

        return _compiled(self, ("loss", True), body)(params, tuple(X), Y, getattr(state, "dropout_rng", None))


_DUNDERS_KEPT = {"__call__", "__doc__"}


def _make(name, methods, base, fields=(), compact=()):
    """A framework module class ``name`` over ``base`` with ``methods``' functions (its mixins' too) as
    its own (so the framework wraps them as it wraps a class's methods) and dataclass ``fields``:
    ``(name, type)`` or ``(name, type, default)``."""
    namespace = {}
    for cls in reversed(methods.__mro__[:-1]):  # a mixin's functions first, the class's own over them
        namespace.update({key: value for key, value in vars(cls).items()
                          if not (key.startswith("__") and key not in _DUNDERS_KEPT)})
    for key in compact:
        namespace[key] = hooks().compact(namespace[key])
    namespace["__annotations__"] = {field[0]: field[1] for field in fields}
    namespace.update({field[0]: field[2] for field in fields if len(field) == 3})
    namespace["__module__"] = __name__
    return type(name, (base,), namespace)


def classes():
    """The book's classes on the framework's module class."""
    h = hooks()
    base = h.module_base
    Module = _make("Module", FunctionalModuleMethods, base, [
        ("plot_train_per_epoch", int, dataclasses.field(default=2, init=False)),
        ("plot_valid_per_epoch", int, dataclasses.field(default=1, init=False)),
        ("board", ProgressBoard, dataclasses.field(default_factory=ProgressBoard, init=False))])
    Classifier = _make("Classifier", FunctionalClassifierMethods, Module)
    RNNScratch = _make("RNNScratch", RNNScratchMethods, base,
                       [("num_inputs", int), ("num_hiddens", int), ("sigma", float, 0.01)])
    RNNLMScratch = _make("RNNLMScratch", RNNLMScratchMethods, Classifier,
                         [("rnn", base), ("vocab_size", int), ("lr", float, 0.01)])
    RNN = _make("RNN", RNNMethods, base, [("num_hiddens", int)], compact=["__call__"])
    RNNLM = _make("RNNLM", RNNLMMethods, RNNLMScratch, [("training", bool, True)])
    GRU = _make("GRU", GRUMethods, RNN, [("num_hiddens", int), ("num_layers", int), ("dropout", float, 0)],
                compact=["__call__"])
    LinearRegression = _make("LinearRegression", LinearRegressionMethods, Module, [("lr", float)])
    Encoder = _make("Encoder", EncoderMethods, base)
    Decoder = _make("Decoder", DecoderMethods, base)
    EncoderDecoder = _make("EncoderDecoder", EncoderDecoderMethods, Classifier,
                           [("encoder", base), ("decoder", base), ("training", bool)])
    Seq2SeqEncoder = _make("Seq2SeqEncoder", Seq2SeqEncoderMethods, Encoder, [
        ("vocab_size", int), ("embed_size", int), ("num_hiddens", int), ("num_layers", int),
        ("dropout", float, 0)])
    Seq2SeqEncoder.GRU_CLASS = GRU
    Seq2Seq = _make("Seq2Seq", Seq2SeqMethods, EncoderDecoder, [
        ("encoder", base), ("decoder", base), ("tgt_pad", int), ("lr", float)])
    _register_train_state()
    return {"Module": Module, "Classifier": Classifier, "RNNScratch": RNNScratch,
            "RNNLMScratch": RNNLMScratch, "LinearRegression": LinearRegression, "RNN": RNN, "RNNLM": RNNLM,
            "GRU": GRU, "Encoder": Encoder, "Decoder": Decoder, "EncoderDecoder": EncoderDecoder,
            "Seq2SeqEncoder": Seq2SeqEncoder,
            "Seq2Seq": Seq2Seq, "SGD": SGD, "Adam": Adam, "Trainer": Trainer, "TrainState": TrainState,
            "get_key": get_key}


_registered = []


def _register_train_state():
    """:class:`TrainState` as a pytree (its arrays the leaves), as the book's compiled losses take it."""
    if not _registered:
        hooks().pytree_dataclass(TrainState, ("step", "params", "opt_state", "dropout_rng", "batch_stats"),
                                 ("apply_fn", "tx"))
        _registered.append(TrainState)
