"""The ``d2lrnn`` command: train a character RNN language model and generate text from it; train an
English-French translation model and translate with it.

``d2lrnn train`` loads a corpus, computes the n-gram baselines on the same train/validation
split, trains with a progress bar, then prints the perplexities next to the baselines,
two sample continuations, and where it wrote its files. Every run writes into a folder of its
own (:mod:`d2lrnn.training.runs`): after every epoch the best model so far (``model.npz``), the
metrics (``metrics.csv``), the plot (``perplexity.png``) and the state to resume from (``last.npz``),
as one set. ``d2lrnn generate`` continues a prefix with a saved model.

``d2lrnn translate-train`` trains the chapter's encoder-decoder on sentence pairs with a held-out
validation split, under the same run-folder rules (the plot is ``loss.png``, ``model.npz`` the
epoch with the best validation BLEU), then reports the BLEU of greedy and beam search and the
book's four sentences. ``d2lrnn translate`` translates sentences with a saved model.

:func:`main` takes an argument list and returns the exit code: 0 done, 1 training diverged,
2 bad arguments, input or output folder, 130 interrupted.

The two training commands are declarations (:mod:`d2lrnn.cli.lm`, :mod:`d2lrnn.cli.translate`) on one
shape (:mod:`d2lrnn.cli.command`, with what a run writes in :mod:`d2lrnn.cli.saving`); ``generate`` and
``translate`` are in :mod:`d2lrnn.cli.use`; :mod:`d2lrnn.cli.args` checks the arguments.
"""

import os
import sys

from .._version import __version__
from ..errors import D2LRNNError
from . import command, lm, saving, translate, use
from .args import Parser
from .lm import CELL_DEFAULTS, NGRAM_ORDERS, TRAIN_DEFAULTS
from .translate import TRANSLATE_DEFAULTS

__all__ = ["main", "build_parser", "command", "lm", "saving", "translate", "use", "CELL_DEFAULTS",
           "NGRAM_ORDERS", "TRAIN_DEFAULTS", "TRANSLATE_DEFAULTS"]


def build_parser():
    """The argument parser of ``d2lrnn`` with its ``train``, ``generate``, ``translate-train`` and
    ``translate`` commands."""
    parser = Parser(prog="d2lrnn", description="The RNN chapter of Dive into Deep Learning on NumPy, "
                    "PyTorch, TensorFlow, MXNet or JAX: train a character language model, generate text; "
                    "train an English-French translation model, translate.",
                    epilog="Run 'd2lrnn COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"d2lrnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    lm.TRAIN.add_parser(commands)
    use.add_generate_parser(commands)
    translate.TRANSLATE_TRAIN.add_parser(commands)
    use.add_translate_parser(commands)
    return parser


def _fail(message, code):
    one_line = str(message).replace("\r", "\\r").replace("\n", "\\n")
    print(f"d2lrnn: error: {one_line}", file=sys.stderr)
    return code


#: What to make smaller when a command runs out of memory.
_SMALLER = {"train": "--hidden, --batch-size or --num-steps",
            "translate-train": "--hidden, --embed-size, --batch-size or --num-steps",
            "generate": "--num-chars", "translate": "--beam, or translate fewer sentences at once"}


def _quiet_stdout():
    """After the reader of the output went away (``| head``): send what is left to /dev/null, so that
    Python's own flush at exit does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's StringIO)
        pass


def main(argv=None):
    """Run ``d2lrnn`` with ``argv`` (default: the command line) and return the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a one-line argument error
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        return args.run(args)
    except D2LRNNError as err:  # a diverged run too: its settings are what to change (the line says)
        return _fail(err, 2)
    except MemoryError:
        return _fail(f"out of memory: use a smaller {_SMALLER.get(args.command, '--hidden')}", 2)
    except BrokenPipeError:
        _quiet_stdout()
        return _fail("the output was closed before d2lrnn finished writing it (a pipe whose reader ended, "
                     "e.g. | head): nothing else was affected", 2)
    except OSError as err:  # the system refused a file: a path too long, a full disk, no permission
        where = f" ({err.filename})" if err.filename else ""
        return _fail(f"{err.strerror or err}{where}: check the path, the free space and the permissions", 2)
    except KeyboardInterrupt as err:
        print(f"\nd2lrnn: {str(err) or 'interrupted'}", file=sys.stderr)
        return 130
