"""What a run's ``last.npz`` must hold to be resumed, beyond what every checkpoint is checked for: a run id
of the form d2lrnn writes, a history of numbers with one entry per epoch, and (for a run that may stop
early) whether it already stopped. Each failure is one line that says to start a new run."""

import math
import re

from ..errors import CheckpointError


def short(value, limit=80):
    """A value from a file, for a message: its ``repr``, cut to ``limit`` characters (one line, short)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


#: What a run id is: 32 hexadecimal digits (a UUID's).
RUN_ID = re.compile(r"[0-9a-f]{32}")


def run_id_of(last, hparams):
    """The id of the run whose settings a ``last.npz`` holds (None for a run saved before runs had ids)."""
    run = hparams.get("run")
    if run is not None and not (isinstance(run, str) and RUN_ID.fullmatch(run)):
        raise CheckpointError(f"{last} is corrupt: its run id is {short(run)}, not 32 hexadecimal digits: "
                              "start a new run")
    return run


def check_history(last, history, fields, epoch):
    """The history of a run to resume: for every column of its metrics a list of numbers (or None, for
    figures not computed every epoch), one per epoch, ``epoch`` column 1, 2, ..., ``epoch``."""
    damaged = f"{last} holds a damaged resume state ({{}}): start a new run"
    for key in fields:
        values = history.get(key)
        if not isinstance(values, list) or len(values) != epoch:
            raise CheckpointError(damaged.format(f"its history of {key} is not a list of {epoch} epochs"))
        if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values):
            raise CheckpointError(damaged.format(f"its history of {key} holds other things than numbers"))
    if history["epoch"] != list(range(1, epoch + 1)):
        raise CheckpointError(damaged.format("history and epoch disagree"))


def stopped_early(history, monitor, patience, epochs):
    """The epoch with the best ``monitor`` (lower is better) if the run whose ``history`` this is stopped
    early: fewer than ``epochs`` done and none better for ``patience`` epochs (as
    :class:`d2lrnn.training.loop.EarlyStopping` counts); None otherwise."""
    done = history["epoch"][-1]
    if not patience or done >= epochs:
        return None
    best, lowest = done, math.inf
    for epoch, value in zip(history["epoch"], history[monitor]):
        if value is not None and value < lowest:
            best, lowest = epoch, value
    return best if done - best >= patience else None
