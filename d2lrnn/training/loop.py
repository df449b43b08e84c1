"""The training loop, once for every task: epochs of compiled steps, the divergence guard, per-epoch
validation and history, early stopping, a time budget, a progress bar and a live plot.

A task (:class:`Task`) says what is particular to it: what one minibatch feeds the step and what it
carries to the next (a language model's state), how many tokens a minibatch counts, what an epoch's
training figure is (perplexity, or the loss per token), how it validates, when a run has blown up, and
what the bar and the plot show. The language model (:mod:`d2lrnn.lm.train`) and the encoder-decoder
(:mod:`d2lrnn.seq2seq.train`) are two tasks.

A history is a dict of lists, one entry per epoch, under the task's ``history_keys`` (always ``epoch``,
``tokens_per_sec`` and ``seconds``); a run continues an earlier one from its history.
"""

import copy
import functools
import math

from .. import checks, ops
from ..errors import ArgumentError, DataError
from .guard import DivergenceGuard, quiet_numerics
from .metrics import Accumulator, Timer, clock
from .progress import Animator, progress_bar


class Task:
    """What a task adds to :func:`fit`. Subclasses set the class attributes and override the hooks."""

    #: the lists a history holds, in the order of the metrics file's columns
    history_keys = ("epoch", "train_loss", "tokens_per_sec", "seconds")
    #: the key of an epoch's training figure (what :meth:`epoch_value` returns)
    train_key = "train_loss"
    #: the validation figure early stopping watches (lower is better), or None, and what to call it
    monitor, monitor_label = None, "validation loss"
    #: what the error says when the iterator gives no minibatch
    empty_message = "the training iterator produced no minibatch"
    #: the function the train call was, for messages (``train_ch8``, ``train_seq2seq``)
    name = "training"
    #: the plot's title, y label and legend
    title, ylabel, legend = "", "", ()
    #: where the parameters live; each minibatch is moved there before its step (None: left where it is)
    device = None

    def step_inputs(self, batch, carry):
        """What the compiled step gets for minibatch ``batch`` (after the parameters), and the number of
        tokens it counts; ``carry`` is what the previous minibatch left (None at the first)."""
        return tuple(batch), 1

    def carry(self, aux, batch):
        """What the next minibatch gets from this one's step output ``aux``."""
        return None

    def batch_total(self, loss, tokens):
        """A minibatch's loss (a float) as a sum over its tokens."""
        return loss * tokens

    def epoch_value(self, mean_loss):
        """The epoch's training figure from the mean loss per token."""
        return mean_loss

    def blown_up(self, net, value, epoch):
        """What went wrong if an epoch's training figure shows that the run diverged, else None."""
        return None

    def validate(self, net, epoch, last):
        """``{key: value}`` of the epoch's validation figures (``last()``: whether this is the run's last
        epoch); {} when there is nothing to validate on."""
        return {}

    def postfix(self, row):
        """What the progress bar shows after an epoch (``row``: the epoch's history entries)."""
        return {}

    def points(self, row):
        """The plot's points for one epoch, one per line of the legend."""
        return [row[self.train_key]]


def check_history(history, num_epochs, keys, name):
    """A copy of a history to continue, checked; a fresh one for None."""
    if history is None:
        return {key: [] for key in keys}
    if not isinstance(history, dict) or any(not isinstance(history.get(k), list) for k in keys):
        raise ArgumentError(f"history must be the dict {name} returned (lists {', '.join(keys)}), got "
                            f"{type(history).__name__}")
    done = len(history["epoch"])
    if done >= num_epochs:
        raise ArgumentError(f"the history already holds {done} epochs and num_epochs is {num_epochs}: "
                            f"pass num_epochs > {done} to train further")
    return {key: list(history[key]) for key in keys}


def model_device(net, device=None):
    """``device`` if given, else the one the model was built on (``net.device``; None where it has none):
    a model built on a GPU trains, evaluates and generates there without the device given again."""
    return device if device is not None else getattr(net, "device", None)


def placed(batch, device):
    """The minibatch's tensors on ``device`` (as the book's loops do with ``X.to(device)``): the data
    iterators make them on the CPU, and a GPU's parameters need their inputs beside them."""
    return tuple(ops.to_device(a, device) for a in batch)


def run_epoch(net, batches, step, task, guard, epoch=1, on_batch=None):
    """Train ``net`` on every minibatch of ``batches`` once; return (the task's training figure, tokens
    per second). A loss or parameter that becomes NaN or inf stops training (``guard``)."""
    carry, timer, metric = None, Timer(), Accumulator(2)  # sums of loss * tokens, tokens
    with quiet_numerics():
        for i, batch in enumerate(batches, 1):
            batch = placed(batch, task.device)
            inputs, tokens = task.step_inputs(batch, carry)
            params = net.params
            loss, new_params, aux = step(params, *inputs)
            loss = guard.check_step(net, params, loss, new_params, epoch, i)
            carry = task.carry(aux, batch)
            metric.add(task.batch_total(loss, tokens), tokens)
            if on_batch is not None:
                on_batch(tokens)
    if metric[1] == 0:
        raise DataError(task.empty_message)
    seconds = timer.stop()
    return task.epoch_value(metric[0] / metric[1]), metric[1] / seconds if seconds > 0 else math.inf


def averaged_view(net, step):
    """``net`` as it is validated and saved: a shallow copy holding ``step``'s averaged weights where the
    step keeps them (an :class:`~d2lrnn.training.step.Updater` with ``average``), else ``net`` itself."""
    averaged = getattr(step, "averaged_params", lambda: None)()
    if averaged is None:
        return net
    view = _separate_copy(net)
    view.params = averaged
    return view


def _separate_copy(module, copies=None):
    """A shallow copy of ``module`` whose sub-modules (attributes with ``params`` of their own: an
    encoder-decoder's encoder and decoder) are copies too, so setting the copy's ``params`` leaves the
    original's alone: an encoder-decoder's ``params`` setter writes into its encoder and decoder.
    ``copies`` (id -> copy) keeps a module reached twice one copy, and a cycle finite."""
    copies = {} if copies is None else copies
    if id(module) in copies:
        return copies[id(module)]
    view = copies[id(module)] = copy.copy(module)
    for name, value in getattr(module, "__dict__", {}).items():
        if hasattr(value, "params") and not isinstance(value, type):
            setattr(view, name, _separate_copy(value, copies))
    return view


class EarlyStopping:
    """Stop when ``monitor`` has not improved for ``patience`` epochs; keep the best epoch's parameters.

    The best epoch of a continued run's earlier epochs has no parameters here (None): the run's
    checkpoint holds them.
    """

    def __init__(self, monitor, patience, history):
        self.monitor, self.patience = monitor, patience
        self.best = (len(history["epoch"]), math.inf, None)
        for epoch, value in zip(history["epoch"], history.get(monitor) or []):
            if value < self.best[1]:
                self.best = (epoch, value, None)

    def update(self, net, epoch, row):
        """Record the epoch; whether to stop (never after the run's last epoch)."""
        if row.get(self.monitor) is not None and row[self.monitor] < self.best[1]:
            self.best = (epoch, row[self.monitor], net.params)
        return self.patience is not None and epoch - self.best[0] >= self.patience

    def restore(self, net):
        """Put the best epoch's parameters back; what ``net.params`` holds, for a message."""
        if self.best[2] is not None:
            net.params = self.best[2]
            return f"epoch {self.best[0]}'s"
        return "the last epoch's"


def fit(net, batches, step, task, num_epochs, *, history=None, progress=True, plot=None, on_epoch=None,
        patience=None, time_budget=None, verbose=True):
    """Train ``net`` for epochs ``len(history) + 1 .. num_epochs`` with the compiled ``step`` (an
    :class:`~d2lrnn.training.step.Updater`) on ``batches`` (iterated once per epoch); return the history.

    After every epoch: the divergence check, the task's validation, the history, the progress bar's and
    the plot's update, then ``on_epoch(epoch, net, history)`` (the command line saves its files there).
    ``patience`` stops when the task's monitored figure has not improved for that many epochs, leaving the
    best epoch's parameters in ``net.params``; ``time_budget`` (seconds, counted from the start of the run,
    a continued run's earlier seconds included) stops after the epoch that crosses it. ``progress`` shows a
    progress bar (tqdm; a line in notebooks), ``plot`` draws the curves live (default: in notebooks).

    A step that keeps averaged weights (``Updater(average=...)``) is validated with them, early stopping
    keeps them, and ``net.params`` holds them when training ends; ``on_epoch`` gets ``net`` with the
    weights training goes on from (``averaged_view(net, step)`` gives the averaged ones).
    """
    num_epochs = checks.positive_int("num_epochs", num_epochs)
    history = check_history(history, num_epochs, task.history_keys, task.name)
    if patience is not None:
        patience = checks.positive_int("patience", patience, " (epochs without improvement, e.g. 3)")
    first = len(history["epoch"]) + 1
    animator = Animator(xlabel="epoch", ylabel=task.ylabel, legend=list(task.legend),
                        xlim=[1, max(num_epochs, 2)], enabled=plot, title=task.title)
    for i, epoch in enumerate(history["epoch"]):  # a continued run's curves so far
        animator.add(epoch, task.points({key: values[i] for key, values in history.items()
                                         if i < len(values)}))
    batches_per_epoch = len(batches) if hasattr(batches, "__len__") else None
    total = (num_epochs - first + 1) * batches_per_epoch if batches_per_epoch is not None else None
    start = clock() - (history["seconds"][-1] if history["seconds"] else 0.0)
    guard, stopper = DivergenceGuard(net.params), EarlyStopping(task.monitor, patience, history)

    def is_last(epoch):
        return epoch == num_epochs or (time_budget is not None and clock() - start >= time_budget)

    try:
        with progress_bar(total=total, unit="batch", disable=not progress, desc="train") as bar:
            for epoch in range(first, num_epochs + 1):
                value, speed = run_epoch(net, batches, step, task, guard, epoch, lambda n: bar.update(1))
                guard.check_epoch(net, epoch, task.blown_up(net, value, epoch))
                row = {"epoch": epoch, task.train_key: value, "tokens_per_sec": speed}
                last = functools.partial(is_last, epoch)
                evaluated = averaged_view(net, step)
                row.update(task.validate(evaluated, epoch, last))
                row["seconds"] = clock() - start
                for key, entry in row.items():
                    history[key].append(entry)
                bar.set_postfix(task.postfix(row), refresh=False)
                animator.add(epoch, task.points(row))
                if on_epoch is not None:
                    on_epoch(epoch, net, history)
                if stopper.update(evaluated, epoch, row) and epoch < num_epochs:
                    kept, stopped = stopper.restore(net), stopper.best[2] is not None
                    if verbose:
                        print(f"stopped early after epoch {epoch}: no better {task.monitor_label} for "
                              f"{patience} epochs; net.params holds {kept} parameters")
                    break
                if time_budget is not None and row["seconds"] >= time_budget:
                    stopped = False
                    break
            else:
                stopped = False
            if not stopped:  # else net.params holds the best epoch's (averaged) weights already
                net.params = averaged_view(net, step).params
    finally:
        animator.close()
    return history
