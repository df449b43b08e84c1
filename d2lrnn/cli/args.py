"""The ``d2lrnn`` command line's arguments: the types that check each value (one line when it is wrong),
the parser whose errors are one line with exit code 2, and the help formatter."""

import argparse
import math

from .. import checks, ops
from ..backends import available_backends, backend_name
from ..errors import ArgumentError


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it is None/False or its help already says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
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


def decay_rate(text):
    """The decay of a moving average: 0 (none) up to, not including, 1."""
    value = _number(text, float)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 (none) and below 1 (e.g. 0.999), got {value:g}")
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


def at_most(kind, limit):
    """The argument type ``kind`` (e.g. :func:`positive_int`), refusing a value above ``limit``; its
    ``limit`` attribute lets the help state it."""

    def check(text):
        value = kind(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {_shown(limit)}, got {text.strip()[:40]}")
        return value

    check.limit = limit
    check.__name__ = kind.__name__
    return check


def _shown(limit):
    return f"{limit:,}" if isinstance(limit, int) else f"{limit:g}"


def limit_text(kind):
    """`` (at most 8,192)`` for an argument type with a limit (:func:`at_most`), else ``''``."""
    limit = getattr(kind, "limit", None)
    return "" if limit is None else f" (at most {_shown(limit)})"


def beam_width(text):
    """A beam width: a whole number from 1 (greedy search) to :data:`d2lrnn.checks.MAX_BEAM`."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (1: greedy search; e.g. 4), got {value}")
    if value > checks.MAX_BEAM:
        raise argparse.ArgumentTypeError(f"must be at most {checks.MAX_BEAM} (each beam is a row of the "
                                         f"decoder per sentence; e.g. 4), got {text.strip()[:40]}")
    return value


beam_width.limit = checks.MAX_BEAM


def file_name(text):
    """A file name (not empty)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a file name")
    return text


#: The type of each setting that ``train`` and ``translate-train`` both have: checks the command line,
#: and the settings a resumed run saved.
SHARED_SETTING_TYPES = {"num_layers": at_most(positive_int, checks.MAX_LAYERS), "dropout": dropout_rate,
                        "hidden": at_most(positive_int, checks.MAX_HIDDEN),
                        "batch_size": at_most(positive_int, checks.MAX_BATCH),
                        "num_steps": at_most(positive_int, checks.MAX_NUM_STEPS), "lr": positive_float,
                        "clip": positive_float, "epochs": at_most(positive_int, checks.MAX_EPOCHS),
                        "val_fraction": fraction, "seed": seed_value}


#: ``--device``'s help, the same on every command.
DEVICE_HELP = ("gpu: the backend's first GPU, cpu: the CPU (default: the framework's own choice, the CPU "
               "except on JAX, which takes its default device)")


def add_device(parser):
    """``--device cpu|gpu``: where the model lives (not a setting of the run: a resumed run may move)."""
    parser.add_argument("--device", choices=("cpu", "gpu"), default=None, help=DEVICE_HELP)


def placement(choice):
    """The active backend's device for ``--device`` (None: the framework's own choice); a GPU that is not
    there is a one-line error."""
    if choice is None:
        return None
    if choice == "cpu":
        return ops.cpu()
    if ops.num_gpus() == 0:
        raise ArgumentError(f"--device gpu: {backend_name()} sees no GPU here: leave --device out (or give "
                            "--device cpu) to run on the CPU")
    return ops.try_gpu()
