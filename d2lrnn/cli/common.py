"""What the ``d2lrnn`` commands share: the argument types, the parser whose errors are one line, the
help formatter, the metrics CSV writer, and the helpers of run folders (resume, Ctrl-C, memory check,
the random generators' states kept in ``last.npz``) and of timing."""

import argparse
import csv
import math
import os
import pathlib

from .. import checks
from ..backends import available_backends, generator_state
from ..checkpoint import checkpoint_kind
from ..errors import D2LRNNError, RunFolderError

#: The columns of a language model's ``metrics.csv``, the default of :func:`metrics_csv_writer`.
CSV_FIELDS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it is None/False or its help already says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block), exit code 2."""

    def error(self, message):
        message = message.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever was typed
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _number(text, kind):
    try:
        return kind(text)
    except ValueError:
        name = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None


def positive_int(text):
    """An integer >= 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text):
    """An integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def seed_value(text):
    """A seed: an integer from 0 to 2**32 - 1."""
    value = nonnegative_int(text)
    if value > checks.MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {checks.MAX_SEED}, got {value}")
    return value


def positive_float(text):
    """A finite number > 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {value:g}")
    return value


def nonnegative_float(text):
    """A finite number >= 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {value:g}")
    return value


def max_tokens(text):
    """-1 (the whole corpus) or a positive number of tokens."""
    value = _number(text, int)
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (the whole corpus) or at least 1, got {value}")
    return value


def fraction(text):
    """A number strictly between 0 and 1."""
    value = _number(text, float)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.1), got {value:g}")
    return value


def dropout_rate(text):
    """A dropout probability: 0 (none) up to, not including, 1."""
    value = _number(text, float)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1 (e.g. 0.2), got {value:g}")
    return value


def yes_no(text):
    """``True``/``False`` as a saved run writes them (``--raw`` itself takes no value)."""
    if text in ("True", "False"):
        return text == "True"
    raise argparse.ArgumentTypeError(f"must be True or False, not {text!r}")


def folder(text):
    """A folder name (not empty)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a folder name")
    return text


def backend_choice(text):
    """The name of a backend d2lrnn knows (its framework is checked when it is switched to)."""
    name = text.strip().lower()
    if name not in available_backends():
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}: choose one of "
                                         f"{', '.join(available_backends())}")
    return name


def beam_width(text):
    """A beam width: a whole number >= 1 (1 is greedy search)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (1: greedy search; e.g. 4), got {value}")
    return value


def file_name(text):
    """A file name (not empty)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a file name")
    return text


#: The type of each setting that ``train`` and ``translate-train`` both have: checks the command line,
#: and the settings a resumed run saved.
SHARED_SETTING_TYPES = {"num_layers": positive_int, "dropout": dropout_rate, "hidden": positive_int,
                        "batch_size": positive_int, "num_steps": positive_int, "lr": positive_float,
                        "clip": positive_float, "epochs": positive_int, "val_fraction": fraction,
                        "seed": seed_value}


def metrics_csv_writer(history, fields=CSV_FIELDS):
    """A writer of the per-epoch history as CSV, one column per field of ``fields`` (the language
    model's: ``epoch,train_ppl,val_ppl,tokens_per_sec,seconds``)."""
    rows = list(zip(*(history[k] for k in fields)))

    def write(f):
        writer = csv.writer(f)
        writer.writerow(fields)
        writer.writerows(rows)

    return write


def _run_state(epoch, train_iter, updater):
    """What ``last.npz`` keeps to resume after ``epoch``: the random generators' states (the shared one
    and the loader's), and the optimizer's state (None for SGD, which keeps nothing)."""
    resume = {"epoch": epoch, "generator": generator_state(), "loader_generator": train_iter.rng_state()}
    opt_state = updater.state_dict() if updater is not None else None
    if opt_state is not None and not opt_state["arrays"]:
        opt_state = None
    return resume, opt_state


def _refuse_too_large(num_params, given, fix):
    """Refuse a model of ``num_params`` numbers if they, their gradients and updates would not fit in this
    machine's memory; ``given`` names the settings that make it so, ``fix`` the ones to lower."""
    need = 4 * num_params * 4  # float32: params, grads, updates, slack
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return
    if need > have:
        raise D2LRNNError(f"{given} needs about {need / 2**30:.0f} GB for the model's "
                          f"parameters and their gradients, more than this machine's {have / 2**30:.0f} GB: "
                          f"use a smaller {fix}")


def _interrupted(saver, out, command):
    """The KeyboardInterrupt to leave with after Ctrl-C: what is saved, and how to continue."""
    if saver.saved is None:
        return KeyboardInterrupt("interrupted before the first epoch finished; nothing was saved")
    return KeyboardInterrupt(f"interrupted; epochs 1-{saver.saved} are saved in {out.path}: continue "
                             f"with: {command} --resume {out.path}")


def _duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


#: Per kind of run: the command that writes and resumes it, an example of its folder's name, what it is.
_RUN_KINDS = {"lm": ("d2lrnn train", "runs/timemachine-numpy-scratch-1", "a language model"),
              "seq2seq": ("d2lrnn translate-train", "runs/translate-numpy-scratch-1", "a translation")}


def _resume_folder(args, kind):
    """The folder ``--resume`` names and its ``last.npz``, checked to hold a run of ``kind`` ('lm' or
    'seq2seq'); one line naming the right command otherwise."""
    command, example, _ = _RUN_KINDS[kind]
    path = pathlib.Path(args.resume)
    if args.overwrite:
        raise D2LRNNError("--resume continues a run and --overwrite replaces one: give only one of them")
    if not path.is_dir():
        raise RunFolderError(f"--resume {path}: no such run folder: pass the folder a run wrote, "
                             f"e.g. {example}")
    last = path / "last.npz"
    if not last.is_file():
        raise RunFolderError(f"{path} holds no state to resume from (no last.npz): pass a folder that "
                             f"'{command}' wrote")
    found = checkpoint_kind(last)
    if found != kind:
        other, _, what = _RUN_KINDS[found]
        raise RunFolderError(f"{path} holds {what} run: continue it with {other} --resume {path}")
    return path, last


def _checkpoint_path(text):
    """The checkpoint file ``--checkpoint`` names: the file itself, or a run folder's best model."""
    path = pathlib.Path(text)
    if path.is_dir() and (path / "model.npz").is_file():
        path = path / "model.npz"
    return path
