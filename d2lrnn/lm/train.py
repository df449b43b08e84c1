"""Training a language model: the task the training loop (:mod:`d2lrnn.training.loop`) runs, its
compiled steps, and perplexity on held-out text.

A minibatch is (X, Y) of token indices (batch, num_steps), Y the next tokens of X. The state is carried
from one minibatch to the next (detached: the book's sequential partitioning), or begun afresh for
every minibatch with random sampling; within a minibatch the gradient reaches back through all its
steps, or is truncated (:mod:`d2lrnn.lm.truncation`). An epoch's figure is the perplexity,
exp(mean cross-entropy per token).
"""

import functools
import inspect
import math

import numpy as np

from .. import checks, ops
from ..backends import backend_name, checked_indices, generator
from ..errors import ArgumentError, DataError
from ..keys import from_d2lrnn, key_of, settings_key, tagged
from ..training import step as training_step
from ..training.guard import DIVERGENCE_FACTOR, DivergenceGuard, blown_up_loss, quiet_numerics
from ..training.loop import Task, fit, model_device, placed, run_epoch
from ..training.metrics import Accumulator, format_perplexity, perplexity
from ..training.optim import SGD, Schedule, get_optimizer
from .loss import lm_loss
from .truncation import get_truncation, truncated_forward

#: Why a bidirectional network is not trained as a next-token language model by default.
SEES_THE_FUTURE = ("a bidirectional model reads each sequence from both ends, so when it predicts token t+1 "
                   "it has already read it (its backward pass starts there): as a language model it learns "
                   "to copy, not to predict")

#: The lists of a language model's training history.
HISTORY_KEYS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")


def is_bidirectional(net):
    """Whether ``net``'s recurrent layer runs in both directions."""
    return bool(getattr(getattr(net, "layer", None), "bidirectional", False))


def check_causal(net, allow_bidirectional=False):
    """Refuse to train a bidirectional ``net`` as a language model unless the caller asks for it."""
    if is_bidirectional(net) and not allow_bidirectional:
        raise ArgumentError(f"{SEES_THE_FUTURE}; use a one-directional model, or pass "
                            "allow_bidirectional=True to train it anyway (to see it fail)")


def check_data(net, **iterators):
    """Every token of the loaders' text (``{name: loader}``) inside the model's vocabulary, checked once on
    the NumPy text a :class:`~d2lrnn.data.SeqDataLoader` holds: a model built for 5 tokens would train on
    28-token data without a word on MXNet, whose ``one_hot`` reads an index past its size as zeros."""
    for name, loader in iterators.items():
        corpus = getattr(loader, "corpus", None)
        if isinstance(corpus, np.ndarray) and len(corpus) and getattr(net, "vocab_size", None):
            checked_indices(f"{name}'s text", corpus, net.vocab_size, f"the model's {net.vocab_size} tokens")


def lm_objective(net, loss, training, truncation=None, float32_state=False):
    """``(params, X, Y, state, *factors) -> (loss, new_state)``: what training differentiates.

    ``training`` turns dropout on, for models whose ``forward`` takes it (a reader's own
    ``forward(params, X, state)`` is called as it is). ``truncation`` (see
    :mod:`d2lrnn.lm.truncation`) cuts or scales the gradient through the state inside the
    minibatch; ``factors`` are its per-minibatch inputs (randomized truncation's xi). A model that
    trains with masks (locked dropout, weight drop: ``net.regularized``) takes them as one more input
    after the factors, the tuple ``net.draw_masks`` returns. ``float32_state``: the state carried to the next
    minibatch comes back float32 (a step whose products run in bfloat16 would carry a bfloat16 state).
    """
    takes_flag = "training" in inspect.signature(net.forward).parameters
    forward = functools.partial(net.forward, training=True) if training and takes_flag else net.forward
    masked = training and takes_masks(net)
    truncation = get_truncation(truncation)

    def value(params, X, Y, state, *factors):
        run_forward = forward
        if masked:
            *factors, masks = factors
            run_forward = functools.partial(forward, masks=masks)
        run = truncated_forward(run_forward, truncation, ops.shape(X)[1])
        Y_hat, new_state = run(params, X, state, *factors)
        if float32_state:
            new_state = type(new_state)(ops.astype(s, "float32") for s in new_state)
        return loss(Y_hat, Y), new_state

    return value


def lm_objective_key(net, loss=lm_loss, training=True, truncation=None):
    """``ops.compile``'s key for :func:`lm_objective` of these arguments: the model's, the loss and the
    truncation; None where one of them is the reader's own."""
    model_key = key_of(net)
    truncation_key = settings_key(get_truncation(truncation))
    if model_key is None or truncation_key is None or not from_d2lrnn(loss):
        return None
    return ("lm", model_key, loss, bool(training), truncation_key)


def takes_masks(net):
    """Whether ``net`` trains with masks drawn outside the compiled step (``net.draw_masks``)."""
    return bool(getattr(net, "regularized", False))


class Updater(training_step.Updater):
    """A language model's training step: ``updater(params, X, Y, state, *factors) -> (loss, new_params,
    new_state)``, the call form of the book's SGD step.

    The gradient (through the whole minibatch, or truncated: ``truncation``, whose ``factors(num_steps)``
    are the step's extra inputs), clipping to global norm ``clip`` (None: none) and ``optimizer``'s update
    (default: SGD at learning rate 1) run as one compiled function; see
    :class:`d2lrnn.training.step.Updater` (``average``: an exponential moving average of the parameters).
    ``objective`` replaces the language model's: a function ``(params, *batch) -> (loss, aux)``; the
    updater is then called as ``updater(params, *batch)``. A model that trains with masks gets them as the
    last input; where the call leaves them out they are drawn here, outside the compiled step, from
    d2lrnn's generator.
    """

    def __init__(self, net, optimizer=None, clip=1.0, loss=lm_loss, truncation=None, schedule=None,
                 device=None, objective=None, average=0.0, precision="float32"):
        self.masks_for = net if objective is None and takes_masks(net) else None
        self.num_factors = get_truncation(truncation).num_factors
        key = None
        if objective is None:
            objective = lm_objective(net, loss, True, truncation, float32_state=precision != "float32")
            key = lm_objective_key(net, loss, True, truncation)
        super().__init__(net.params, objective, SGD(1.0) if optimizer is None else optimizer, clip, schedule,
                         model_device(net, device), average, key, precision)

    def __call__(self, params, *batch):
        if self.masks_for is not None and len(batch) == 3 + self.num_factors:
            batch = (*batch, self.masks_for.draw_masks(ops.shape(batch[0])[0], generator()))
        return super().__call__(params, *batch)


def make_train_step(net, lr, clip=1.0, loss=lm_loss, truncation=None, optimizer=None, schedule=None,
                    device=None, precision="float32"):
    """A training step ``(params, X, Y, state, *factors) -> (loss, new_params, new_state)``.

    Forward pass, gradients (through the whole minibatch, or truncated: ``truncation``, whose
    ``factors(num_steps)`` are the step's extra inputs), clipping to global norm ``clip`` (None:
    no clipping), and SGD with learning rate ``lr`` (the book's), or ``optimizer`` ('sgd',
    'adam', or a :class:`d2lrnn.training.optim.SGD` / :class:`d2lrnn.training.optim.Adam`) with ``lr`` as
    its learning rate when given as a name. Returns an :class:`Updater`, which keeps the optimizer's state;
    ``device`` is where the parameters live (a GPU's step keeps its numbers there). ``precision``
    'bfloat16' runs the step's products in bfloat16, the weights and the loss in float32 (torch).
    """
    lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 1)")
    optimizer = get_optimizer("sgd" if optimizer is None else optimizer, lr)
    return Updater(net, optimizer, clip, loss, truncation, schedule, device, precision=precision)


def make_eval_step(net, loss=lm_loss):
    """A compiled step ``(params, X, Y, state) -> (loss, new_state)`` without gradients."""
    return ops.compile(lm_objective(net, loss, training=False),
                       key=tagged("eval", lm_objective_key(net, loss, training=False)))


def state_for(net, X, state, device, reset=False):
    """The state minibatch X starts from: carried over, or fresh (first batch, reset, new batch size)."""
    batch_size = ops.shape(X)[0]
    made_for = getattr(net, "batch_size_of", lambda s: ops.shape(s[0])[0])
    if reset or state is None or batch_size != made_for(state):
        return net.begin_state(batch_size=batch_size, device=device)
    return state


class LanguageModelTask(Task):
    """The language model in the training loop: the state carried between minibatches (or begun afresh
    with random sampling), truncation's factors, perplexity, and the validation perplexity."""

    history_keys = HISTORY_KEYS
    train_key, monitor, monitor_label = "train_ppl", "val_ppl", "validation perplexity"
    empty_message = ("the training iterator produced no minibatch: use a smaller batch size or number of "
                     "steps, or a longer corpus")
    name, ylabel = "train_ch8", "perplexity"

    def __init__(self, net, device=None, use_random_iter=False, truncation=None, val_iter=None,
                 eval_step=None, mask_rng=None):
        self.net, self.device, self.reset = net, device, use_random_iter
        self.mask_rng = mask_rng
        self.truncation, self.val_iter, self.eval_step = get_truncation(truncation), val_iter, eval_step
        self.legend = ["train"] + (["validation"] if val_iter is not None else [])
        units = f", {net.num_hiddens} hidden units" if net.num_hiddens is not None else ""
        self.title = f"{type(net).__name__}{units}, {backend_name()}"

    def step_inputs(self, batch, carry):
        X, Y = batch
        state = state_for(self.net, X, carry, self.device, reset=self.reset)
        factors = [ops.to_device(f, self.device) for f in self.truncation.factors(ops.shape(X)[1])]
        inputs = (X, Y, state, *factors)
        if takes_masks(self.net):  # drawn here, outside the compiled step: the same numbers on every backend
            inputs += (self.net.draw_masks(ops.shape(X)[0], self.mask_rng or generator()),)
        return inputs, ops.size(Y)

    def carry(self, aux, batch):
        return aux  # the state the step ended in

    def epoch_value(self, mean_loss):
        return perplexity(mean_loss)

    def blown_up(self, net, ppl, epoch):
        V = net.vocab_size
        if not blown_up_loss(math.log(ppl) if ppl > 0 else ppl, V):
            return None
        return (f"training perplexity {format_perplexity(ppl)} in epoch {epoch} is above "
                f"{DIVERGENCE_FACTOR} x the vocabulary size {V} (a uniform guess scores {V})")

    def validate(self, net, epoch, last):
        if self.val_iter is None:
            return {}
        return {"val_ppl": evaluate_perplexity(net, self.val_iter, self.device, self.eval_step)}

    def postfix(self, row):
        info = {"ppl": format_perplexity(row["train_ppl"]), "tok/s": f"{row['tokens_per_sec']:,.0f}"}
        if "val_ppl" in row:
            info["val_ppl"] = format_perplexity(row["val_ppl"])
        return info

    def points(self, row):
        return [row["train_ppl"]] + ([row["val_ppl"]] if "val_ppl" in row else [])


def train_epoch_lm(net, train_iter, lr=1.0, device=None, use_random_iter=False, *, step=None, epoch=1,
                on_batch=None, guard=None, allow_bidirectional=False, truncation=None, loss=None):
    """Train ``net`` for one epoch; return (perplexity, tokens per second).

    The state is begun afresh for every minibatch with random sampling, and carried over (detached from
    the previous minibatch's graph) with sequential partitioning. The step is ``step`` (an
    :class:`Updater`, made with the same ``truncation``), else SGD at ``lr`` with clipping at 1. If the
    loss or an updated parameter becomes NaN or inf, training stops with a :class:`TrainingError` naming
    the epoch and step, and ``net.params`` keeps the last parameters that were finite and had a finite
    loss (``guard``, a :class:`~d2lrnn.training.guard.DivergenceGuard`, carries them across epochs).
    """
    check_causal(net, allow_bidirectional)
    truncation = get_truncation(truncation)
    step = step or make_train_step(net, lr, 1.0, loss or lm_loss, truncation)
    task = LanguageModelTask(net, model_device(net, device), use_random_iter, truncation)
    return run_epoch(net, train_iter, step, task, guard or DivergenceGuard(net.params), epoch, on_batch)


def evaluate_perplexity(net, data_iter, device=None, step=None):
    """exp(mean cross-entropy) of ``net`` on ``data_iter``, carrying the state across minibatches."""
    step, device = step or make_eval_step(net), model_device(net, device)
    state, metric = None, Accumulator(2)
    with quiet_numerics():
        for batch in data_iter:
            X, Y = placed(batch, device)
            state = state_for(net, X, state, device)
            l, state = step(net.params, X, Y, state)
            n = ops.size(Y)
            metric.add(float(ops.to_numpy(l)) * n, n)
    if metric[1] == 0:
        raise DataError("the evaluation iterator produced no minibatch: hold out more text")
    return perplexity(metric[0] / metric[1])


def make_updater(net, lr, clip, truncation, optimizer, weight_decay, schedule, warmup, total_steps,
                 device=None, average=0.0):
    """The :class:`Updater` a run trains with: the optimizer and schedule from their names."""
    optimizer = get_optimizer("sgd" if optimizer is None else optimizer, lr, weight_decay)
    if isinstance(schedule, str):
        if total_steps is None:
            raise ArgumentError(f"schedule {schedule!r} needs the number of steps: pass a train_iter with a "
                                "length, or a function of the step as schedule")
        schedule = Schedule(optimizer.lr, total_steps, warmup, schedule)
    elif warmup and schedule is None:
        schedule = Schedule(optimizer.lr, max(total_steps or 0, warmup + 1), warmup, "constant")
    return Updater(net, optimizer, clip, truncation=truncation, schedule=schedule, device=device,
                   average=average)


def train_lm(net, train_iter, lr, num_epochs, device=None, use_random_iter=False, *, clip=1.0, val_iter=None,
          progress=True, plot=None, history=None, on_epoch=None, allow_bidirectional=False, truncation=None,
          optimizer=None, weight_decay=0.0, schedule=None, warmup=0, patience=None, updater=None,
          verbose=True, average=0.0, mask_rng=None):
    """Train a language model and return its history: a dict of lists ``epoch``, ``train_ppl``,
    ``val_ppl`` (with ``val_iter``), ``tokens_per_sec``, ``seconds``.

    The book trains with SGD at a fixed ``lr``, gradients clipped to global norm ``clip``. ``optimizer``
    'adam' (or a :class:`~d2lrnn.training.optim.SGD` / :class:`~d2lrnn.training.optim.Adam` object)
    trains with another optimizer, ``weight_decay`` adds weight decay to a named one, and ``schedule``
    ('cosine', 'linear', 'constant' or a function of the step number) varies the learning rate over the
    ``num_epochs`` epochs after ``warmup`` steps of linear warm-up. ``updater`` is an :class:`Updater` to
    continue with (its optimizer state and step count), overriding these.

    ``history`` continues an earlier run from the epoch after its last (``net`` holding that run's
    parameters); ``on_epoch(epoch, net, history)`` is called after every epoch, e.g. to save a checkpoint.
    Training stops with a :class:`TrainingError` when it diverges: a loss or parameter becomes NaN or inf
    (the last finite parameters with a finite loss are kept), or an epoch's training perplexity is above
    :data:`DIVERGENCE_FACTOR` times the vocabulary size (the parameters the epoch started from are kept).
    ``patience`` stops early when the validation perplexity has not improved for that many epochs,
    leaving the best epoch's parameters in ``net.params`` (and saying so, if ``verbose``).

    A bidirectional model is refused (it sees the token it must predict) unless ``allow_bidirectional``.
    ``truncation`` picks how far gradients travel back through the state within a minibatch: None (all
    ``num_steps``), ``d2l.RegularTruncation(k)`` or ``d2l.RandomizedTruncation(p)``.

    ``device`` defaults to the one the model was built on; every minibatch is moved there.

    ``average`` (e.g. 0.999; 0: off) keeps an exponential moving average of the parameters through
    training (:class:`Updater`): validation and early stopping use it, and ``net.params`` holds it at the
    end. A model with locked dropout or weight drop gets each minibatch's masks from ``mask_rng`` (a
    NumPy ``Generator``; default d2lrnn's shared one, seeded by ``d2l.manual_seed``).
    """
    check_causal(net, allow_bidirectional)
    check_data(net, train_iter=train_iter, val_iter=val_iter)
    if mask_rng is not None and not isinstance(mask_rng, np.random.Generator):
        raise ArgumentError(f"mask_rng must be a NumPy Generator (np.random.default_rng(seed)) or None "
                            f"(d2lrnn's own), got {type(mask_rng).__name__}")
    truncation = get_truncation(truncation)
    lr = checks.positive_number("lr", lr, " (the learning rate, e.g. 1)")
    num_epochs = checks.positive_int("num_epochs", num_epochs)
    if patience is not None and val_iter is None:
        checks.positive_int("patience", patience, " (epochs without improvement, e.g. 3)")
        raise ArgumentError("patience stops on the validation perplexity: pass val_iter too")
    batches, device = len(train_iter) if hasattr(train_iter, "__len__") else None, model_device(net, device)
    step = updater or make_updater(net, lr, clip, truncation, optimizer, weight_decay, schedule, warmup,
                                   num_epochs * batches if batches is not None else None, device, average)
    eval_step = make_eval_step(net) if val_iter is not None else None
    task = LanguageModelTask(net, device, use_random_iter, truncation, val_iter, eval_step, mask_rng)
    return fit(net, train_iter, step, task, num_epochs, history=history, progress=progress, plot=plot,
               on_epoch=on_epoch, patience=patience, verbose=verbose)
