"""The reference for d2lrnn's training benchmark: the character language model as each framework's
own documentation teaches it, with no d2lrnn code at all.

A user who does not use d2lrnn would write this instead: the framework's fused recurrent layer
(``torch.nn.RNN/GRU/LSTM``, Keras ``SimpleRNN/GRU/LSTM``, ``gluon.rnn.RNN/GRU/LSTM``,
``paddle.nn.SimpleRNN/GRU/LSTM``; on JAX, Flax's ``nn.RNN`` scanning
``SimpleCell/GRUCell/OptimizedLSTMCell``), a dense output layer, the mean softmax cross-entropy over
all batch x steps tokens, gradients clipped to a global norm, and the framework's own SGD (optax's on
JAX), with the step compiled where the framework compiles. bench/bench_train.py
times these steps (tokens/s) next to d2lrnn's models, so the comparison answers "what does d2lrnn
cost over the plain framework?".

The training problem is the book's: inputs are the one-hot of the token ids, one recurrent layer,
``Linear(num_hiddens -> vocab_size)``, sequential partitioning (the hidden state is carried from
one batch to the next and detached, the first batch starts from zeros), clipping at ``clip``, plain
SGD at learning rate ``lr``. Weights keep the framework's default initialization; the framework's
RNG is seeded with 0 so runs repeat.

    ref = make_reference("torch", "lstm", vocab_size=28, num_hiddens=512, batch_size=32)
    batch = ref.to_batch(X, Y)  # NumPy int64 (batch, num_steps) -> framework tensors (untimed)
    loss = ref.step(batch)      # one training step; the mean loss as a float (this syncs)
    ref.layer_name              # e.g. "torch.nn.LSTM"

``ref.get_weights()`` returns the weights as ``{name: NumPy array}`` in the framework's own layout
and gate order (names like ``"rnn.weight_ih_l0"``, ``"rnn/kernel"``, ``"rnn.l0_i2h_weight"``,
``"rnn/ir/kernel"``, and ``dense...`` for the output layer; Paddle's named as torch's);
``ref.set_weights({name: array})`` assigns any of them. ``ref.rnn`` and ``ref.dense`` are the
framework's layers themselves (not on JAX, whose Flax modules hold no weights; ``ref.params`` is its
tree); ``ref.state`` is the carried state and ``ref.reset_state()`` sets it back to zeros.

The framework is imported inside ``make_reference`` only, so importing this module is cheap and a
process imports only the framework it uses.
"""

import numpy as np

CELLS = ("rnn", "gru", "lstm")
FRAMEWORKS = ("torch", "tensorflow", "mxnet", "jax", "paddle")


def make_reference(framework, cell, vocab_size, num_hiddens, batch_size, lr=1.0, clip=1.0, gpu=False):
    """The plain-framework training loop for ``framework`` ('torch', 'tensorflow', 'mxnet', 'jax',
    'paddle') and ``cell`` ('rnn': tanh RNN, 'gru', 'lstm'); with ``gpu``, on the first GPU (torch
    moves its model there, as its users do; JAX puts everything on its default device, the GPU when
    there is one)."""
    if cell not in CELLS:
        raise ValueError(f"unknown cell {cell!r}; expected one of {CELLS}")
    builders = {"torch": TorchReference, "tensorflow": KerasReference, "mxnet": GluonReference,
                "jax": FlaxReference, "paddle": PaddleReference}
    if framework not in builders:
        raise ValueError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")
    if gpu and framework not in ("torch", "jax"):
        raise ValueError(f"the GPU reference runs torch and jax, not {framework!r}")
    placement = {"device": "cuda" if gpu else "cpu"} if framework == "torch" else {}
    return builders[framework](cell, vocab_size, num_hiddens, batch_size, lr, clip, **placement)


class TorchReference:
    """``torch.nn`` RNN/GRU/LSTM (time-major, as d2l does) + ``nn.Linear``, ``torch.optim.SGD``."""

    def __init__(self, cell, vocab_size, num_hiddens, batch_size, lr, clip, device="cpu"):
        import torch
        from torch import nn

        self.torch, self.clip, self.device = torch, clip, torch.device(device)
        torch.manual_seed(0)
        layer_class = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.layer_name = f"torch.nn.{layer_class.__name__}"
        self.vocab_size, self.num_hiddens, self.batch_size = vocab_size, num_hiddens, batch_size
        self.rnn = layer_class(vocab_size, num_hiddens)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.model = nn.ModuleDict({"rnn": self.rnn, "dense": self.dense}).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.is_lstm = cell == "lstm"
        self.reset_state()

    def reset_state(self):
        """Zeros: the state the first batch starts from."""
        zeros = self.torch.zeros(1, self.batch_size, self.num_hiddens, device=self.device)
        self.state = (zeros, zeros.clone()) if self.is_lstm else zeros

    def to_batch(self, X, Y):
        return tuple(self.torch.from_numpy(np.asarray(a, np.int64)).to(self.device) for a in (X, Y))

    def forward(self, X, state):
        """Logits (num_steps * batch, vocab) in time-major order, and the new state."""
        F = self.torch.nn.functional
        inputs = F.one_hot(X.T, self.vocab_size).to(self.torch.float32)
        outputs, state = self.rnn(inputs, state)
        return self.dense(outputs.reshape(-1, outputs.shape[-1])), state

    def step(self, batch):
        X, Y = batch
        logits, state = self.forward(X, self.state)
        loss = self.torch.nn.functional.cross_entropy(logits, Y.T.reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.state = tuple(s.detach() for s in state) if self.is_lstm else state.detach()
        return loss.item()

    def get_weights(self):
        return {name: p.detach().cpu().numpy().copy() for name, p in self.model.named_parameters()}

    def set_weights(self, weights):
        params = dict(self.model.named_parameters())
        with self.torch.no_grad():
            for name, value in weights.items():
                value = self.torch.from_numpy(_checked(value, params[name].shape, name))
                params[name].copy_(value.to(self.device))


class KerasReference:
    """Keras 3 SimpleRNN/GRU/LSTM (batch-major) + Dense, a ``tf.function`` step with
    ``tf.GradientTape``, ``tf.clip_by_global_norm`` and ``keras.optimizers.SGD``."""

    def __init__(self, cell, vocab_size, num_hiddens, batch_size, lr, clip):
        import keras
        import tensorflow as tf

        self.tf, self.clip = tf, clip
        keras.utils.set_random_seed(0)  # as Keras teaches; it seeds Python's and NumPy's global RNGs too
        layer_class = {"rnn": keras.layers.SimpleRNN, "gru": keras.layers.GRU,
                       "lstm": keras.layers.LSTM}[cell]
        self.layer_name = f"keras {layer_class.__name__} (tf.function)"
        self.vocab_size, self.num_hiddens, self.batch_size = vocab_size, num_hiddens, batch_size
        self.num_states = 2 if cell == "lstm" else 1
        self.rnn = layer_class(num_hiddens, return_sequences=True, return_state=True)
        self.dense = keras.layers.Dense(vocab_size)
        self.rnn.build((None, None, vocab_size))  # variables exist before the step is traced
        self.dense.build((None, None, num_hiddens))
        self.variables = self.rnn.trainable_variables + self.dense.trainable_variables
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.optimizer = keras.optimizers.SGD(learning_rate=lr)
        self.optimizer.build(self.variables)
        self.train_step = tf.function(self._train_step)
        self.reset_state()

    def reset_state(self):
        """Zeros: the state the first batch starts from."""
        self.state = [self.tf.zeros((self.batch_size, self.num_hiddens)) for _ in range(self.num_states)]

    def to_batch(self, X, Y):
        return self.tf.constant(X, self.tf.int64), self.tf.constant(Y, self.tf.int64)

    def forward(self, X, state):
        """Logits (batch, num_steps, vocab) and the new state (a list)."""
        inputs = self.tf.one_hot(X, self.vocab_size)
        outputs, *state = self.rnn(inputs, initial_state=state)
        return self.dense(outputs), state

    def _train_step(self, X, Y, state):
        with self.tf.GradientTape() as tape:
            logits, state = self.forward(X, state)
            loss = self.loss_fn(Y, logits)
        grads = tape.gradient(loss, self.variables)
        grads, _ = self.tf.clip_by_global_norm(grads, self.clip)
        self.optimizer.apply(grads, self.variables)
        return loss, state

    def step(self, batch):
        X, Y = batch
        # The state comes back as plain tensors: the next step's tape does not reach into this one.
        loss, self.state = self.train_step(X, Y, self.state)
        return float(loss)

    def _named_variables(self):
        return {f"{prefix}/{v.name}": v for prefix, layer in (("rnn", self.rnn), ("dense", self.dense))
                for v in layer.trainable_variables}

    def get_weights(self):
        return {name: np.array(v.numpy()) for name, v in self._named_variables().items()}

    def set_weights(self, weights):
        variables = self._named_variables()
        for name, value in weights.items():
            variables[name].assign(_checked(value, tuple(variables[name].shape), name))


class GluonReference:
    """gluon.rnn RNN/GRU/LSTM (time-major) + ``nn.Dense(flatten=False)`` in a hybridized
    HybridBlock, ``autograd.record``, ``clip_global_norm`` and ``gluon.Trainer`` SGD."""

    def __init__(self, cell, vocab_size, num_hiddens, batch_size, lr, clip):
        import mxnet as mx
        from mxnet import autograd, gluon

        self.mx, self.autograd, self.gluon, self.clip = mx, autograd, gluon, clip
        mx.random.seed(0)
        self.model = _gluon_language_model(cell, vocab_size, num_hiddens)
        self.model.initialize(ctx=mx.cpu())
        self.model.hybridize()
        self.rnn, self.dense = self.model.rnn, self.model.dense
        self.layer_name = f"gluon.rnn.{type(self.rnn).__name__} (hybridized)"
        self.batch_size = batch_size
        self.params = list(self.model.collect_params().values())
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(self.model.collect_params(), "sgd", {"learning_rate": lr})
        self.reset_state()

    def reset_state(self):
        """Zeros: the state the first batch starts from."""
        self.state = self.rnn.begin_state(batch_size=self.batch_size, ctx=self.mx.cpu())

    def to_batch(self, X, Y):
        return self.mx.nd.array(X, dtype="int64"), self.mx.nd.array(Y, dtype="int64")

    def step(self, batch):
        X, Y = batch
        with self.autograd.record():
            logits, *state = self.model(X, *self.state)
            loss = self.loss_fn(logits, Y.T).mean()  # mean over all tokens: trainer.step(1) keeps lr
        loss.backward()
        self.gluon.utils.clip_global_norm([p.grad() for p in self.params], self.clip)
        self.trainer.step(1)
        self.state = [s.detach() for s in state]
        return float(loss.asscalar())

    def _named_params(self):
        return {f"{prefix}.{name[len(layer.prefix):]}": p
                for prefix, layer in (("rnn", self.rnn), ("dense", self.dense))
                for name, p in layer.collect_params().items()}

    def get_weights(self):
        return {name: p.data().asnumpy().copy() for name, p in self._named_params().items()}

    def set_weights(self, weights):
        params = self._named_params()
        for name, value in weights.items():
            params[name].set_data(self.mx.nd.array(_checked(value, params[name].shape, name)))


class FlaxReference:
    """Flax ``nn.RNN`` over ``SimpleCell``/``GRUCell``/``OptimizedLSTMCell`` (batch-major) + ``nn.Dense``,
    ``jax.value_and_grad`` in a ``jax.jit`` step, ``optax.clip_by_global_norm`` chained with
    ``optax.sgd``: the training loop of Flax's and optax's own guides, without d2lrnn's shim."""

    def __init__(self, cell, vocab_size, num_hiddens, batch_size, lr, clip):
        import jax
        import jax.numpy as jnp
        import optax
        from flax import linen as nn

        self.jax, self.jnp = jax, jnp
        cell_class = {"rnn": nn.SimpleCell, "gru": nn.GRUCell, "lstm": nn.OptimizedLSTMCell}[cell]
        self.layer_name = f"flax {cell_class.__name__} (jax.jit)"
        self.vocab_size, self.num_hiddens, self.batch_size = vocab_size, num_hiddens, batch_size
        self.is_lstm = cell == "lstm"

        class LanguageModel(nn.Module):
            @nn.compact
            def __call__(self, X, carry):
                inputs = jax.nn.one_hot(X, vocab_size, dtype=jnp.float32)
                rnn = nn.RNN(cell_class(num_hiddens, name="rnn"), return_carry=True)  # weights: rnn/...
                carry, outputs = rnn(inputs, initial_carry=carry)
                return nn.Dense(vocab_size, name="dense")(outputs), carry

        model = LanguageModel()
        self.reset_state()
        X0 = jnp.zeros((batch_size, 1), jnp.int32)
        self.params = model.init(jax.random.key(0), X0, self.state)["params"]
        optimizer = optax.chain(optax.clip_by_global_norm(clip), optax.sgd(lr))
        self.opt_state = optimizer.init(self.params)

        def loss_fn(params, X, Y, carry):
            logits, carry = model.apply({"params": params}, X, carry)
            return optax.softmax_cross_entropy_with_integer_labels(logits, Y).mean(), carry

        @jax.jit
        def train_step(params, opt_state, X, Y, carry):
            (loss, carry), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, X, Y, carry)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss, carry

        self.train_step = train_step

    def reset_state(self):
        """Zeros: the state the first batch starts from (Flax's LSTM carry is (c, h))."""
        zeros = self.jnp.zeros((self.batch_size, self.num_hiddens), self.jnp.float32)
        self.state = (zeros, zeros) if self.is_lstm else zeros

    def to_batch(self, X, Y):
        return self.jnp.asarray(X, self.jnp.int32), self.jnp.asarray(Y, self.jnp.int32)

    def step(self, batch):
        X, Y = batch
        # The carry comes back as plain arrays: the next step differentiates its own parameters only.
        self.params, self.opt_state, loss, self.state = self.train_step(
            self.params, self.opt_state, X, Y, self.state)
        return float(loss)

    def get_weights(self):
        flat = self.jax.tree_util.tree_flatten_with_path(self.params)[0]
        return {"/".join(k.key for k in path): np.array(v) for path, v in flat}

    def set_weights(self, weights):
        current = self.get_weights()
        params = self.jax.tree_util.tree_map(lambda v: v, self.params)  # a copy of the nesting
        for name, value in weights.items():
            *parents, leaf = name.split("/")
            node = params
            for key in parents:
                node = node[key]
            node[leaf] = self.jnp.asarray(_checked(value, current[name].shape, name))
        self.params = params


class PaddleReference:
    """``paddle.nn`` SimpleRNN/GRU/LSTM (time-major, as the book's Paddle cells build them) + ``nn.Linear``,
    ``loss.backward()`` and ``paddle.optimizer.SGD`` with ``grad_clip=nn.ClipGradByGlobalNorm``."""

    def __init__(self, cell, vocab_size, num_hiddens, batch_size, lr, clip):
        import paddle
        from paddle import nn

        self.paddle = paddle
        paddle.seed(0)
        layer_class = {"rnn": nn.SimpleRNN, "gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.layer_name = f"paddle.nn.{layer_class.__name__}"
        self.vocab_size, self.num_hiddens, self.batch_size = vocab_size, num_hiddens, batch_size
        self.rnn = layer_class(vocab_size, num_hiddens, time_major=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.model = nn.LayerDict({"rnn": self.rnn, "dense": self.dense})
        self.optimizer = paddle.optimizer.SGD(learning_rate=lr, parameters=self.model.parameters(),
                                              grad_clip=nn.ClipGradByGlobalNorm(clip))
        self.is_lstm = cell == "lstm"
        self.reset_state()

    def reset_state(self):
        """Zeros: the state the first batch starts from."""
        shape = [1, self.batch_size, self.num_hiddens]
        self.state = (self.paddle.zeros(shape), self.paddle.zeros(shape)) if self.is_lstm \
            else self.paddle.zeros(shape)

    def to_batch(self, X, Y):
        return self.paddle.to_tensor(np.asarray(X, np.int64)), self.paddle.to_tensor(np.asarray(Y, np.int64))

    def forward(self, X, state):
        """Logits (num_steps * batch, vocab) in time-major order, and the new state."""
        inputs = self.paddle.nn.functional.one_hot(X.T, self.vocab_size)
        outputs, state = self.rnn(inputs, state)
        return self.dense(outputs.reshape([-1, outputs.shape[-1]])), state

    def step(self, batch):
        X, Y = batch
        logits, state = self.forward(X, self.state)
        loss = self.paddle.nn.functional.cross_entropy(logits, Y.T.reshape([-1]))
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        self.state = tuple(s.detach() for s in state) if self.is_lstm else state.detach()
        return float(loss)

    def get_weights(self):
        return {name: p.numpy().copy() for name, p in self.model.named_parameters()}

    def set_weights(self, weights):
        params = dict(self.model.named_parameters())
        for name, value in weights.items():
            params[name].set_value(_checked(value, params[name].shape, name))


def _gluon_language_model(cell, vocab_size, num_hiddens):
    """A HybridBlock: one-hot (time-major) -> fused recurrent layer -> Dense, returning
    ``(logits, *state)``."""
    from mxnet import gluon
    from mxnet.gluon import nn

    class LanguageModel(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                if cell == "rnn":
                    self.rnn = gluon.rnn.RNN(num_hiddens, activation="tanh", input_size=vocab_size)
                else:
                    layer_class = {"gru": gluon.rnn.GRU, "lstm": gluon.rnn.LSTM}[cell]
                    self.rnn = layer_class(num_hiddens, input_size=vocab_size)
                self.dense = nn.Dense(vocab_size, flatten=False, in_units=num_hiddens)

        def hybrid_forward(self, F, X, *state):
            inputs = F.one_hot(F.transpose(X), vocab_size)
            outputs, state = self.rnn(inputs, list(state))
            return (self.dense(outputs), *state)

    return LanguageModel()


def _checked(value, shape, name):
    """``value`` as float32, after checking it has the parameter's shape."""
    value = np.asarray(value, dtype=np.float32)
    if value.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {value.shape}")
    return value
