"""What a training command writes after every epoch: one set of run files (the best model, the metrics, the
plot, the state to resume from), and how a resumed run reads its state back."""

import csv

from .._version import __version__
from ..backends import generator_state, set_generator_state
from ..errors import CheckpointError
from ..training import checkpoint
from ..training.guard import quiet_numerics
from ..training.loop import averaged_view
from ..training.runs import PLOT_MARK


class RunSaver:
    """``on_epoch`` of a run: after every epoch, one set of files (:meth:`RunFolder.write`): ``model.npz``
    when the epoch is the best so far by the command's rule (the averaged weights, where the updater keeps
    them), and always ``metrics.csv``, the plot and ``last.npz`` (the parameters, history, optimizer state,
    averaged weights included, and random generators' states to resume from)."""

    def __init__(self, command, folder, data, hparams, title, history=None, updater=None):
        self.command, self.folder, self.data, self.hparams = command, folder, data, hparams
        self.title, self.updater = title, updater
        self.best = best_row(command, history) if history else None  # the history row model.npz holds
        self.best_text = command.best_text(history, self.best) if history else None
        self.best_epoch = history["epoch"][self.best] if history else None
        self.saved = history["epoch"][-1] if history else None  # the last epoch on disk

    def __call__(self, epoch, net, history):
        command, files = self.command, {}
        i = len(history["epoch"]) - 1
        if self.best is None or command.best(history, i) > command.best(history, self.best):
            self.best, self.best_epoch, self.best_text = i, epoch, command.best_text(history, i)
            best = averaged_view(net, self.updater)  # the averaged weights, where the run keeps them
            files["model.npz"] = (command.writer(best, self.data, self.hparams, history), "wb")
        files["metrics.csv"] = (metrics_csv_writer(history, command.csv_fields), "w")
        files[command.plot] = (command.plot_writer(history, self.data, self.title, self.best_epoch), "wb")
        resume = {"epoch": epoch, "generator": generator_state(),
                  "loader_generator": self.data.train_iter.rng_state()}
        opt_state = self.updater.state_dict() if self.updater is not None else None
        if opt_state is not None and not opt_state["arrays"]:
            opt_state = None
        files["last.npz"] = (command.writer(net, self.data, self.hparams, history, resume, opt_state), "wb")
        self.folder.write(files)
        self.saved = epoch

    def where(self):
        """What is on disk, for a message after a failure."""
        if self.best is None:
            return "no epoch finished, so nothing was saved"
        return (f"the best model of this run (epoch {self.best_epoch}, {self.best_text}) is in "
                f"{self.folder / 'model.npz'}")


def best_row(command, history):
    """The history row of the epoch ``model.npz`` holds: the first with the highest ``command.best``."""
    best = None
    for i in range(len(history["epoch"])):
        if best is None or command.best(history, i) > command.best(history, best):
            best = i
    return best


def metrics_csv_writer(history, fields):
    """A writer of the per-epoch history as CSV, one column per field of ``fields``."""
    rows = list(zip(*(history[k] for k in fields)))

    def write(f):
        writer = csv.writer(f)
        writer.writerow(fields)
        writer.writerows(rows)

    return write


def png_writer(draw, figsize):
    """A writer of a PNG: ``draw(fig)`` on a matplotlib figure rendered off-screen (no display needed)."""

    def write(f):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize, dpi=100)
        canvas = FigureCanvasAgg(fig)
        draw(fig)
        fig.tight_layout()
        with quiet_numerics():  # a diverged epoch's inf is simply not drawn
            # d2lrnn's mark: a run replaces only plots that carry it (training.runs.written_by_d2lrnn).
            # The canvas's own PNG writer: the same bytes as fig.savefig, in two thirds of its time (a
            # plot is written after every epoch).
            canvas.print_png(f, metadata={"Software": f"{PLOT_MARK} {__version__}"})

    return write


def restore_generators(last, resume, train_iter, history):
    """Put the random generators back where the run left them."""
    try:
        set_generator_state(resume["generator"])
        train_iter.set_rng_state(resume["loader_generator"])
        if history["epoch"][-1] != resume["epoch"]:
            raise ValueError("history and epoch disagree")
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise CheckpointError(f"{last} holds a damaged resume state ({err}): start a new run") from None


def restore_optimizer(last, updater, optimizer, steps_done):
    """Continue the optimizer where the run left it (SGD's only state: the schedule's step)."""
    saved = checkpoint.load_optimizer_state(last)
    if saved is not None:
        updater.load_state_dict(saved)
    elif optimizer != "sgd":
        raise CheckpointError(f"{last} holds no {optimizer} state to continue: start a new run")
    else:
        updater.t = steps_done
