"""Training, evaluation and prediction for language models, written once above the shim.

Updates are functional: a step takes the parameter list and returns a new one, so the
same code runs under HIPS autograd (which forbids in-place writes), torch, TensorFlow
(where the whole step is compiled with ``tf.function``) and MXNet.
"""

import contextlib
import functools
import inspect
import math
import numbers
import time

import numpy as np

from . import checks, inplace, ops
from .backends import backend_name
from .errors import ArgumentError, DataError, TrainingError
from .models.module import as_model
from .optim import SGD, Schedule, get_optimizer
from .progress import Animator, progress_bar
from .truncation import get_truncation, truncated_forward

#: A run has diverged when an epoch's training perplexity is above this many times the vocabulary
#: size: an untrained model guesses about uniformly (perplexity V), so the run has gone far above
#: where it started. A slowly learning run (a tiny learning rate) stays near V and is not flagged.
DIVERGENCE_FACTOR = 2


#: Why a bidirectional network is not trained as a next-token language model by default.
SEES_THE_FUTURE = ("a bidirectional model reads each sequence from both ends, so when it predicts token t+1 "
                   "it has already read it (its backward pass starts there): as a language model it learns "
                   "to copy, not to predict")


def is_bidirectional(net):
    """Whether ``net``'s recurrent layer runs in both directions."""
    return bool(getattr(getattr(net, "layer", None), "bidirectional", False))


def check_causal(net, allow_bidirectional=False):
    """Refuse to train a bidirectional ``net`` as a language model unless the caller asks for it."""
    if is_bidirectional(net) and not allow_bidirectional:
        raise ArgumentError(f"{SEES_THE_FUTURE}; use a one-directional model, or pass "
                            "allow_bidirectional=True to train it anyway (to see it fail)")


class Timer:
    """Record running times (the book's ``Timer``)."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        self.tik = time.perf_counter()

    def stop(self):
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self):
        return sum(self.times) / len(self.times)

    def sum(self):
        return sum(self.times)


def _number(x):
    return float(x) if isinstance(x, (int, float, np.number)) else float(ops.to_numpy(x))


class Accumulator:
    """Sums over ``n`` variables (the book's ``Accumulator``)."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        """Add one number (or one-element tensor) to each sum."""
        self.data = [a + _number(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def grad_clipping(grads, theta):
    """Scale gradients so their global norm is at most ``theta``: g <- min(1, theta / ||g||) g.

    ``grads`` is a list of tensors; a new list is returned (TensorFlow's book form too). The scale is
    computed as ``theta / max(||g||, theta)``, which equals min(1, theta/||g||) without a Python
    branch, so it also runs inside a compiled (graph-mode) step.

    The book's PyTorch and MXNet form, ``grad_clipping(net, theta)`` after ``l.backward()``, scales
    the gradients attached to the network's parameters in place (``net`` a framework module or a
    model with ``.params``) and returns None.
    """
    if not ops.is_tensor(theta):
        checks.positive_number("theta", theta, " (the largest gradient norm, e.g. 1)")
    if not isinstance(grads, (list, tuple)) and inplace.params_of(grads) is not None:
        return inplace.clip_attached(grads, theta, _clip)
    found = ops.imperative()
    if found is not None and found.dense_grad is not None:  # a tape's IndexedSlices (TensorFlow's form)
        grads = [found.dense_grad(g) for g in grads]
    return _clip(grads, theta)


def _clip(grads, theta):
    norm = ops.sqrt(sum(ops.sum(g * g) for g in grads))
    scale = theta / ops.maximum(norm, theta)
    return [g * scale for g in grads]


def sgd(params, grads, lr=None, batch_size=1):
    """Minibatch stochastic gradient descent: p <- p - lr * g / batch_size, as new tensors.

    The book's forms work too: ``sgd(params, lr, batch_size)`` (PyTorch, MXNet) updates each parameter
    in place from the gradient its backward pass attached, and ``tf.Variable`` parameters (TensorFlow)
    are assigned in place; both return the same parameter list.
    """
    if not isinstance(grads, (list, tuple)) and not ops.is_tensor(grads):  # sgd(params, lr, batch_size)
        inplace.sgd(params, grads, batch_size if lr is None else lr)
        return list(params)
    if lr is None:
        raise ArgumentError("d2l.sgd(params, grads, lr, batch_size): give the learning rate")
    return inplace.assign_variables(params, [p - (lr / batch_size) * g for p, g in zip(params, grads)])


def lm_loss(Y_hat, Y):
    """Mean cross-entropy of predictions (num_steps * batch, vocab) for labels Y (batch, num_steps)."""
    return ops.mean(ops.softmax_cross_entropy(Y_hat, ops.reshape(ops.transpose(Y), (-1,))))


def _objective(net, loss, training, truncation=None):
    """``(params, X, Y, state, *factors) -> (loss, new_state)``: what training differentiates.

    ``training`` turns dropout on, for models whose ``forward`` takes it (a reader's own
    ``forward(params, X, state)`` is called as it is). ``truncation`` (see
    :mod:`d2lrnn.truncation`) cuts or scales the gradient through the state inside the
    minibatch; ``factors`` are its per-minibatch inputs (randomized truncation's xi).
    """
    takes_flag = "training" in inspect.signature(net.forward).parameters
    forward = functools.partial(net.forward, training=True) if training and takes_flag else net.forward
    truncation = get_truncation(truncation)

    def objective(params, X, Y, state, *factors):
        run = truncated_forward(forward, truncation, ops.shape(X)[1])
        Y_hat, new_state = run(params, X, state, *factors)
        return loss(Y_hat, Y), new_state

    return objective


class Updater:
    """One training step with an optimizer: ``updater(params, X, Y, state, *factors) -> (loss,
    new_params, new_state)``, the call form of the book's SGD step.

    The gradient (through the whole minibatch, or truncated: ``truncation``, whose
    ``factors(num_steps)`` are the step's extra inputs), clipping to global norm ``clip`` (None:
    none) and the optimizer's update run as one compiled function. The updater keeps the optimizer's
    state and the step count ``t``; the learning rate of step t is ``schedule(t)`` (a
    :class:`d2lrnn.optim.Schedule` or any function of t), else the optimizer's ``lr``. ``device``
    is where the parameters live (the per-step numbers are put there).

    ``objective`` replaces the language model's: a function ``(params, *batch) -> (loss, aux)`` (the
    sequence-to-sequence loss, :mod:`d2lrnn.seq2seq.train`); the updater is then called as
    ``updater(params, *batch) -> (loss, new_params, aux)``.
    """

    def __init__(self, net, optimizer=None, clip=1.0, loss=lm_loss, truncation=None, schedule=None,
                 device=None, objective=None):
        self.device = device
        self.optimizer = SGD(1.0) if optimizer is None else get_optimizer(optimizer)
        if clip is not None:
            clip = checks.positive_number("clip", clip,
                                          " (the largest gradient norm, e.g. 1; None: no clipping)")
        if schedule is not None and not callable(schedule):
            raise ArgumentError(f"schedule must be a function of the step (d2l.Schedule), got "
                                f"{type(schedule).__name__}")
        self.schedule, self.t = schedule, 0
        self.state = self.optimizer.init(net.params)
        if objective is None:
            objective = _objective(net, loss, True, truncation)
        value_and_grad = ops.value_and_grad(objective, has_aux=True)
        optimizer = self.optimizer

        def step(params, opt_state, scalars, *batch):
            (l, aux), grads = value_and_grad(params, *batch)
            if clip is not None:
                grads = _clip(grads, clip)  # value_and_grad's gradients: dense, clip checked above
            new_params, opt_state = optimizer.update(params, grads, opt_state, scalars)
            return l, new_params, opt_state, aux

        self._step = ops.compile(step)

    def lr(self, t=None):
        """The learning rate of step ``t`` (default: the next one)."""
        t = self.t + 1 if t is None else t
        return float(self.schedule(t)) if self.schedule is not None else self.optimizer.lr

    def __call__(self, params, *batch):
        t = self.t + 1
        scalars = ops.tensor(np.array(self.optimizer.scalars(t, self.lr(t)), np.float32), device=self.device)
        l, new_params, self.state, aux = self._step(params, self.state, scalars, *batch)
        self.t = t
        return l, new_params, aux

    def state_dict(self):
        """The optimizer's state as NumPy arrays and the step count: what a resumed run needs."""
        return {"optimizer": self.optimizer.name, "t": self.t,
                "arrays": [np.asarray(ops.to_numpy(s), np.float32) for s in self.state]}

    def load_state_dict(self, saved):
        """Continue from :meth:`state_dict`'s output (checked against this updater's optimizer)."""
        name = getattr(self.optimizer, "name", None)
        arrays = list(saved.get("arrays", []))
        expected = [ops.shape(s) for s in self.state]
        if saved.get("optimizer") != name or [tuple(a.shape) for a in arrays] != [tuple(e) for e in expected]:
            raise ArgumentError(f"the saved optimizer state is for {saved.get('optimizer')!r} with "
                                f"{len(arrays)} arrays; this run uses {name!r} with {len(expected)}: resume "
                                "with the run's own optimizer")
        self.state = [ops.from_numpy(a, device=self.device) for a in arrays]
        self.t = checks.integer("t", saved.get("t"), 0)


def make_train_step(net, lr, clip=1.0, loss=lm_loss, truncation=None, optimizer=None, schedule=None):
    """A training step ``(params, X, Y, state, *factors) -> (loss, new_params, new_state)``.

    Forward pass, gradients (through the whole minibatch, or truncated: ``truncation``, whose
    ``factors(num_steps)`` are the step's extra inputs), clipping to global norm ``clip`` (None:
    no clipping), and SGD with learning rate ``lr`` (the book's), or ``optimizer`` ('sgd',
    'adam', or a :class:`d2lrnn.optim.SGD` / :class:`d2lrnn.optim.Adam`) with ``lr`` as its
    learning rate when given as a name. Returns an :class:`Updater`, which keeps the optimizer's state.
    """
    lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 1)")
    optimizer = get_optimizer("sgd" if optimizer is None else optimizer, lr)
    return Updater(net, optimizer, clip, loss, truncation, schedule)


def make_eval_step(net, loss=lm_loss):
    """A compiled step ``(params, X, Y, state) -> (loss, new_state)`` without gradients."""
    return ops.compile(_objective(net, loss, training=False))


def perplexity(mean_loss):
    """exp(mean cross-entropy); inf rather than an OverflowError for a huge (finite) loss."""
    try:
        return math.exp(mean_loss)
    except OverflowError:
        return math.inf


def format_perplexity(ppl, decimals=2):
    """``5.21``; a huge value compactly (``3.1e+84`` rather than 85 digits); ``inf`` and ``nan`` as is."""
    if not math.isfinite(ppl) or abs(ppl) >= 1e6:
        return f"{ppl:.3g}"
    return f"{ppl:.{decimals}f}"


@contextlib.contextmanager
def quiet_numerics():
    """Silence NumPy's overflow/invalid warnings: a diverging run is reported by the checks below
    as one :class:`TrainingError` line, not by a page of RuntimeWarnings printed before it."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        yield


def _loss_and_probe(l, params):
    """[loss, probe]: the probe is 0 when every parameter is finite and NaN otherwise (x * 0 is NaN
    exactly for inf and NaN), so one small transfer checks them all."""
    return ops.stack([l, sum(ops.sum(p * 0.0) for p in params)])


class LastGood:
    """What a run falls back to when it diverges.

    ``params`` are the last parameters known to be finite with a finite loss (after a step, the
    parameters that went into it); ``epoch_start`` those the current epoch started from.
    """

    def __init__(self, params):
        self.params = self.epoch_start = params
        self._probe = ops.compile(_loss_and_probe)  # one compiled probe (one tf.function) per run

    def check_step(self, net, params, l, new_params, epoch, step):
        """Accept a step (``net.params = new_params``) or keep the last good parameters and raise.

        ``l`` is the loss of ``params``, ``new_params`` their update. Returns the loss as a float.
        """
        loss, probe = (float(v) for v in ops.to_numpy(self._probe(l, new_params)))
        if not math.isfinite(loss):
            net.params = self.params
            _diverged(f"loss became {loss} at epoch {epoch}, step {step}",
                      "the last parameters whose loss was finite are kept", epoch, step)
        if not math.isfinite(probe):
            net.params = params  # their loss was finite; their update was not
            _diverged(f"the update at epoch {epoch}, step {step} made parameters NaN or inf "
                      f"(loss {loss:.3g})",
                      "the parameters before that update are kept", epoch, step)
        self.params = params
        net.params = new_params
        return loss

    def check_epoch(self, net, ppl, epoch):
        """Raise if the epoch's training perplexity blew up (see :data:`DIVERGENCE_FACTOR`), keeping the
        parameters the epoch started from; else remember the current ones as the next epoch's start."""
        V = net.vocab_size
        if not ppl <= DIVERGENCE_FACTOR * V:
            net.params = self.params = self.epoch_start
            kept = f"the end of epoch {epoch - 1}" if epoch > 1 else "before training"
            _diverged(f"training perplexity {format_perplexity(ppl)} in epoch {epoch} is above "
                      f"{DIVERGENCE_FACTOR} x the vocabulary size {V} (a uniform guess scores {V})",
                      f"the parameters from {kept} are kept", epoch)
        self.epoch_start = net.params


def _diverged(what, kept, epoch, step=None):
    cause = f"{what}: the run diverged; lower the learning rate (--lr) or clip gradients harder (--clip)"
    raise TrainingError(f"{cause}; {kept}", epoch, step, cause)


def _state_for(net, X, state, device, reset=False):
    """The state minibatch X starts from: carried over, or fresh (first batch, reset, new batch size)."""
    batch_size = ops.shape(X)[0]
    made_for = getattr(net, "batch_size_of", lambda s: ops.shape(s[0])[0])
    if reset or state is None or batch_size != made_for(state):
        return net.begin_state(batch_size=batch_size, device=device)
    return state


def _epoch_result(metric, timer):
    """(perplexity, tokens per second) of an epoch from its (loss * tokens, tokens) sums."""
    if metric[1] == 0:
        raise DataError("the training iterator produced no minibatch: use a smaller batch size or "
                        "number of steps, or a longer corpus")
    return perplexity(metric[0] / metric[1]), metric[1] / timer.stop()


def train_epoch_ch8(net, train_iter, loss=None, updater=None, device=None, use_random_iter=False, *,
                    step=None, epoch=1, on_batch=None, last_good=None, allow_bidirectional=False,
                    truncation=None):
    """Train ``net`` for one epoch; return (perplexity, tokens per second).

    The state is re-initialised for every minibatch with random sampling, and carried over
    (detached from the previous minibatch's graph) with sequential partitioning. ``updater``
    is a learning rate (SGD with clipping at 1) unless a compiled ``step`` is given.
    If the loss or an updated parameter becomes NaN or inf, training stops with a
    :class:`TrainingError` naming the epoch and step, and ``net.params`` keeps the last
    parameters that were finite and had a finite loss (``last_good``, a :class:`LastGood`,
    carries them across epochs). ``truncation``: see :func:`train_ch8` (a given ``step`` must
    have been made with the same one).
    """
    if step is None and updater is not None and not isinstance(updater, numbers.Real):
        if isinstance(device, bool):  # TensorFlow's form: (net, train_iter, loss, updater, use_random_iter)
            device, use_random_iter = None, device
        return _book_epoch(net, train_iter, loss, updater, device, use_random_iter)
    check_causal(net, allow_bidirectional)
    truncation = get_truncation(truncation)
    if step is None:
        lr = 1.0 if updater is None else updater
        step = make_train_step(net, lr, 1.0, loss or lm_loss, truncation)
    last_good = last_good or LastGood(net.params)
    state, timer = None, Timer()
    metric = Accumulator(2)  # sum of losses * tokens, tokens
    with quiet_numerics():
        for i, (X, Y) in enumerate(train_iter, 1):
            state = _state_for(net, X, state, device, reset=use_random_iter)
            params = net.params
            l, new_params, state = step(params, X, Y, state, *truncation.factors(ops.shape(X)[1]))
            l = last_good.check_step(net, params, l, new_params, epoch, i)
            n = ops.size(Y)
            metric.add(l * n, n)
            if on_batch is not None:
                on_batch(n)
    return _epoch_result(metric, timer)


def _book_epoch(net, train_iter, loss, updater, device, use_random_iter):
    """One epoch the book's way: the framework's ``loss`` object and ``updater`` (a ``torch.optim``
    optimizer, a Keras optimizer, or ``updater(batch_size)`` such as the book's ``lambda batch_size:
    d2l.sgd(net.params, lr, batch_size)`` or a Gluon ``trainer.step``), gradients clipped to norm 1, the
    parameters updated in place. Returns (perplexity, tokens per second)."""
    found = ops.imperative()
    if found is None:
        raise ArgumentError(f"d2l.train_epoch_ch8 takes a learning rate as updater on the {backend_name()} "
                            "backend: a framework's optimizer or update function needs that framework's "
                            "backend")
    if loss is None:
        raise ArgumentError("d2l.train_epoch_ch8 got the book's updater but no loss: pass the framework's "
                            "loss too (the book passes e.g. nn.CrossEntropyLoss()), or a learning rate as "
                            "updater")
    model = as_model(net)
    params = inplace.params_of(net)  # the module's or the reader's own tensors: the updater writes them
    call_loss = found.call_loss or (lambda loss, y_hat, y: loss(y_hat, y))
    state, timer, metric = None, Timer(), Accumulator(2)
    for X, Y in train_iter:
        state = _state_for(model, X, state, device, reset=use_random_iter)
        y = ops.reshape(ops.transpose(Y), (-1,))

        def objective(params, X=X, y=y, state=state):
            y_hat, new_state = model.forward(params, X, state)
            return ops.mean(call_loss(loss, y_hat, y)), new_state

        (l, state), grads = ops.value_and_grad(objective, has_aux=True)(params)
        grads = _clip(grads, 1.0)  # value_and_grad's gradients are dense tensors
        if hasattr(updater, "apply_gradients"):  # a Keras optimizer on the tf.Variables
            updater.apply_gradients(zip(grads, params))
        else:
            for p, g in zip(params, grads):
                found.set_grad(p, g)
            if callable(updater):
                updater(batch_size=1)
            else:  # a torch.optim optimizer
                updater.step()
        n = ops.size(y)
        metric.add(float(ops.to_numpy(l)) * n, n)
    return _epoch_result(metric, timer)


def evaluate_perplexity(net, data_iter, device=None, step=None):
    """exp(mean cross-entropy) of ``net`` on ``data_iter``, carrying the state across minibatches."""
    step = step or make_eval_step(net)
    state, metric = None, Accumulator(2)
    with quiet_numerics():
        for X, Y in data_iter:
            state = _state_for(net, X, state, device)
            l, state = step(net.params, X, Y, state)
            n = ops.size(Y)
            metric.add(float(ops.to_numpy(l)) * n, n)
    if metric[1] == 0:
        raise DataError("the evaluation iterator produced no minibatch: hold out more text")
    return perplexity(metric[0] / metric[1])


def predict_ch8(prefix, num_preds, net, vocab, device=None, temperature=0.0, seed=None):
    """Continue ``prefix`` by ``num_preds`` tokens: warm up on the prefix, then decode.

    ``temperature`` 0 is greedy (the book's argmax); above 0, the next token is sampled from
    softmax(logits / temperature) with a NumPy generator seeded by ``seed``. Characters not in
    the vocabulary map to ``<unk>`` when read; ``<unk>`` itself is never generated (it stands for
    no character). Returns the prefix followed by the generated text.
    """
    if not isinstance(prefix, str) or not prefix:
        raise ArgumentError(f"predict_ch8 needs a non-empty prefix string to warm up the state, "
                            f"got {prefix!r}")
    num_preds = checks.integer("num_preds", num_preds, 0)
    temperature = checks.number("temperature", temperature, 0, hint=" (0: greedy; e.g. 0.8 to sample)")
    if seed is not None:
        seed = checks.seed(seed)
    net = as_model(net)  # the reader's own framework module too
    if len(vocab) != net.vocab_size:
        raise ArgumentError(f"the vocabulary has {len(vocab)} tokens but the model {net.vocab_size}: "
                            "pass the vocabulary the model was trained with")
    ids = [vocab[t] for t in prefix]  # character tokens
    state = net.begin_state(batch_size=1, device=device)  # keywords: the book's modules take (device, batch)
    if len(ids) > 1:  # warm-up: run the whole prefix but its last token through the state at once
        _, state = net(ops.tensor([ids[:-1]], device=device), state)
    rng = np.random.default_rng(seed)
    unk = getattr(vocab, "unk", 0)
    last, generated = ids[-1], []
    for _ in range(num_preds):
        Y, state = net(ops.tensor([[last]], device=device), state)
        last = next_token(ops.to_numpy(Y).reshape(-1), temperature, rng, unk)
        generated.append(last)
    return prefix + "".join(vocab.to_tokens(generated))


def next_token(logits, temperature, rng, unk=0):
    """The token that follows one row of ``logits``: the argmax at temperature 0, else a draw from
    softmax(logits / temperature) with ``rng``. Never ``unk`` (it stands for no character)."""
    logits = np.array(logits, dtype=np.float64)
    logits[unk] = -np.inf
    if temperature > 0:
        p = np.exp((logits - logits.max()) / temperature)  # exp(-inf) = 0 for <unk>
        return int(rng.choice(len(p), p=p / p.sum()))
    return int(logits.argmax())


HISTORY_KEYS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")


def _check_history(history, num_epochs):
    """A copy of a history to continue (``train_ch8(..., history=h)``), checked."""
    if history is None:
        return {key: [] for key in HISTORY_KEYS}
    if not isinstance(history, dict) or any(not isinstance(history.get(k), list) for k in HISTORY_KEYS):
        raise ArgumentError(f"history must be the dict train_ch8 returned (lists {', '.join(HISTORY_KEYS)}), "
                            f"got {type(history).__name__}")
    done = len(history["epoch"])
    if done >= num_epochs:
        raise ArgumentError(f"the history already holds {done} epochs and num_epochs is {num_epochs}: "
                            f"pass num_epochs > {done} to train further")
    return {key: list(history[key]) for key in HISTORY_KEYS}


def _make_updater(net, lr, clip, truncation, optimizer, weight_decay, schedule, warmup, total_steps,
                  device=None):
    """The :class:`Updater` train_ch8 trains with: the optimizer and schedule from their names."""
    optimizer = get_optimizer("sgd" if optimizer is None else optimizer, lr, weight_decay)
    if isinstance(schedule, str):
        if total_steps is None:
            raise ArgumentError(f"schedule {schedule!r} needs the number of steps: pass a train_iter with a "
                                "length, or a function of the step as schedule")
        schedule = Schedule(optimizer.lr, total_steps, warmup, schedule)
    elif warmup and schedule is None:
        schedule = Schedule(optimizer.lr, max(total_steps or 0, warmup + 1), warmup, "constant")
    return Updater(net, optimizer, clip, truncation=truncation, schedule=schedule, device=device)


def _best_of(history):
    """(epoch, validation perplexity, parameters) of the best epoch so far, for early stopping. A
    continued run's earlier epochs have no parameters here (None): the checkpoint holds them."""
    best = (len(history["epoch"]), math.inf, None)
    for epoch, val_ppl in zip(history["epoch"], history["val_ppl"]):
        if val_ppl < best[1]:
            best = (epoch, val_ppl, None)
    return best


def train_ch8(net, train_iter, vocab, lr, num_epochs, device=None, use_random_iter=False, *,
              clip=1.0, val_iter=None, progress=True, plot=None, prefixes=("time traveller", "traveller"),
              verbose=True, history=None, on_epoch=None, allow_bidirectional=False, truncation=None,
              optimizer=None, weight_decay=0.0, schedule=None, warmup=0, patience=None, updater=None):
    """Train a language model (the book's ``train_ch8``) and return its history.

    Each epoch reports training perplexity, tokens/s and (with ``val_iter``) validation
    perplexity. ``progress`` shows a progress bar (tqdm; a line in notebooks); ``plot``
    draws the perplexity curves live (default: on in notebooks). Returns a dict of lists:
    ``epoch``, ``train_ppl``, ``val_ppl`` (if evaluated), ``tokens_per_sec``, ``seconds``.

    ``history`` continues an earlier run from the epoch after its last (``net`` holding that
    run's parameters); ``on_epoch(epoch, net, history)`` is called after every epoch, e.g. to
    save a checkpoint. Training stops with a :class:`TrainingError` when it diverges: a loss or
    parameter becomes NaN or inf (the last finite parameters with a finite loss are kept), or
    an epoch's training perplexity is above ``DIVERGENCE_FACTOR`` times the vocabulary size
    (the parameters the epoch started from are kept).

    A bidirectional model is refused (it sees the token it must predict) unless
    ``allow_bidirectional`` is True. ``truncation`` picks how far gradients travel back through
    the state within a minibatch: None (all ``num_steps``), ``d2l.RegularTruncation(k)`` or
    ``d2l.RandomizedTruncation(p)`` (see :mod:`d2lrnn.truncation`).

    The book trains with SGD at a fixed ``lr``. ``optimizer`` 'adam' (or a :class:`d2lrnn.optim.SGD`
    / :class:`d2lrnn.optim.Adam` object) trains with another optimizer, ``weight_decay`` adds weight
    decay to a named one, and ``schedule`` ('cosine', 'linear', 'constant' or a function of the step
    number) varies the learning rate over the ``num_epochs`` epochs after ``warmup`` steps of linear
    warm-up. ``patience`` stops early when the validation perplexity has not improved for that many
    epochs, and leaves the best epoch's parameters in ``net.params``. ``updater`` is an
    :class:`Updater` to continue with (its optimizer state and step count), overriding the above.

    ``net`` may also be the reader's own framework module (the book's concise ``RNNModel``, an
    ``nn.Module`` on PyTorch): it is trained through :class:`d2lrnn.models.module.ModuleModel`, and
    its parameters hold the trained values afterwards.
    """
    model = as_model(net)
    if model is not net:
        model.infer_shapes(train_iter, lambda X, Y: (X, model.begin_state(ops.shape(X)[0], device)[0]))
        try:
            return train_ch8(model, train_iter, vocab, lr, num_epochs, device, use_random_iter, clip=clip,
                             val_iter=val_iter, progress=progress, plot=plot, prefixes=prefixes,
                             verbose=verbose, history=history, on_epoch=on_epoch,
                             allow_bidirectional=allow_bidirectional, truncation=truncation,
                             optimizer=optimizer, weight_decay=weight_decay, schedule=schedule,
                             warmup=warmup, patience=patience, updater=updater)
        finally:
            model.write_back()
    check_causal(net, allow_bidirectional)
    truncation = get_truncation(truncation)
    lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 1)")
    num_epochs = checks.positive_int("num_epochs", num_epochs)
    history = _check_history(history, num_epochs)
    if patience is not None:
        patience = checks.positive_int("patience", patience, " (epochs without improvement, e.g. 3)")
        if val_iter is None:
            raise ArgumentError("patience stops on the validation perplexity: pass val_iter too")
    batches = len(train_iter) if hasattr(train_iter, "__len__") else None
    step = updater or _make_updater(net, lr, clip, truncation, optimizer, weight_decay, schedule, warmup,
                                    num_epochs * batches if batches is not None else None, device)
    eval_step = make_eval_step(net) if val_iter is not None else None
    first = len(history["epoch"]) + 1
    legend = ["train"] + (["validation"] if val_iter is not None else [])
    units = f", {net.num_hiddens} hidden units" if net.num_hiddens is not None else ""
    title = f"{type(net).__name__}{units}, {backend_name()}"
    animator = Animator(xlabel="epoch", ylabel="perplexity", legend=legend, xlim=[1, max(num_epochs, 2)],
                        enabled=plot, title=title)
    for i, epoch in enumerate(history["epoch"]):
        animator.add(epoch, [history["train_ppl"][i]] + history["val_ppl"][i:i + 1])
    total = (num_epochs - first + 1) * batches if batches is not None else None
    start = time.perf_counter() - (history["seconds"][-1] if history["seconds"] else 0.0)
    last_good = LastGood(net.params)
    best = _best_of(history)
    try:
        with progress_bar(total=total, unit="batch", disable=not progress, desc="train") as bar:
            for epoch in range(first, num_epochs + 1):
                ppl, speed = train_epoch_ch8(net, train_iter, None, None, device, use_random_iter,
                                             step=step, epoch=epoch, on_batch=lambda n: bar.update(1),
                                             last_good=last_good, allow_bidirectional=allow_bidirectional,
                                             truncation=truncation)
                last_good.check_epoch(net, ppl, epoch)
                history["epoch"].append(epoch)
                history["train_ppl"].append(ppl)
                history["tokens_per_sec"].append(speed)
                info = {"ppl": format_perplexity(ppl), "tok/s": f"{speed:,.0f}"}
                points = [ppl]
                if val_iter is not None:
                    val_ppl = evaluate_perplexity(net, val_iter, device, eval_step)
                    history["val_ppl"].append(val_ppl)
                    info["val_ppl"] = format_perplexity(val_ppl)
                    points.append(val_ppl)
                    if val_ppl < best[1]:
                        best = (epoch, val_ppl, net.params)
                history["seconds"].append(time.perf_counter() - start)
                bar.set_postfix(info, refresh=False)
                animator.add(epoch, points)
                if on_epoch is not None:
                    on_epoch(epoch, net, history)
                if patience is not None and epoch - best[0] >= patience and epoch < num_epochs:
                    if best[2] is not None:
                        net.params = best[2]
                    if verbose:
                        kept = f"epoch {best[0]}'s" if best[2] is not None else "the last epoch's"
                        print(f"stopped early after epoch {epoch}: no better validation perplexity for "
                              f"{patience} epochs; net.params holds {kept} parameters")
                    break
    finally:
        animator.close()
    if verbose:
        line = f"perplexity {format_perplexity(history['train_ppl'][-1], 1)}"
        if history["val_ppl"]:
            line += f", validation perplexity {format_perplexity(history['val_ppl'][-1], 1)}"
        print(f"{line}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on {device or ops.cpu()}")
        for prefix in prefixes:
            print(predict_ch8(prefix, 50, net, vocab, device))
    return history
