"""The shape every training command of ``d2lrnn`` has, once: ``train`` and ``translate-train`` are two
:class:`TrainingCommand` declarations on it (:mod:`d2lrnn.cli.lm`, :mod:`d2lrnn.cli.translate`).

A run: the settings (a new run's defaults, or a resumed run's own, checked as the command line checks
them), the data, the backend, then a folder of the run's own (:mod:`d2lrnn.training.runs`) in which
every epoch leaves one set of files: ``model.npz`` when the epoch is the best so far, ``metrics.csv``,
the plot, and ``last.npz`` to resume from. A run that diverges, is interrupted or cannot write ends in
one line that says what is on disk; a finished run reports on its best epoch and lists its files.
"""

import argparse
import os
import pathlib
import uuid

from .. import checks
from ..backends import available_backends, backend_name, use_backend
from ..errors import CheckpointError, D2LRNNError, RunFolderError, TrainingError
from ..training import checkpoint, memory
from ..training.metrics import clock
from ..training.optim import Schedule
from ..training.runs import open_run_folder
from ..training.step import check_precision
from .args import HelpFormatter, add_device, backend_choice, folder, limit_text, placement
from .resumed import check_history, run_id_of, short
from .saving import RunSaver, restore_generators, restore_optimizer

#: The learning rate over a run after its warm-up (``--schedule``).
SCHEDULES = ("constant", "cosine", "linear")


class TrainingCommand:
    """What one training command declares; :meth:`run` is the same for all.

    Class attributes: ``name`` (the command), ``kind`` (its checkpoints' kind, see
    :func:`d2lrnn.training.checkpoint.checkpoint_kind`), ``what`` (its runs, for messages),
    ``example`` (a run folder), ``defaults`` (setting -> default), ``types`` (setting -> the argument
    type that checks it), ``choices`` (setting -> the allowed values), ``shown`` (how the help shows a
    default of None), ``renewable`` (the settings a resumed run may be given again, as new totals),
    ``added`` (settings added after runs were first saved: ``{setting: the value a run saved without it
    used}``, which need not be today's default),
    ``csv_fields`` (the columns of ``metrics.csv``), ``model_settings`` (the model's config keys that
    settings give: ``{key: setting}``), ``plot`` (the plot's file name) and ``help`` and
    ``description`` for the parser. The hooks below are what differs between commands.
    """

    name = kind = what = example = out_pattern = plot = help = description = ""
    defaults, types, choices, shown = {}, {}, {}, {}
    renewable, added, csv_fields = ("epochs",), {}, ()
    model_settings = {}

    # -- the command line ----------------------------------------------------------------------

    def add_parser(self, commands):
        """The command's parser: its settings (default None, so that ``--resume`` can tell what was
        given), the backend, the output folder or the run to resume, and the progress switch."""
        parser = commands.add_parser(self.name, help=self.help, description=self.description,
                                     formatter_class=HelpFormatter)
        parser.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                            help=f"{', '.join(available_backends())} (default: $D2LRNN_BACKEND, else numpy; "
                                 "with --resume, the run's)")

        def setting(flag, help, **kwargs):
            key = flag[2:].replace("-", "_")
            kind = self.types.get(key, str)
            parser.add_argument(flag, default=None, type=kind, **kwargs,
                                help=f"{help} (default: {self.default_text(key)}){limit_text(kind)}")

        self.add_settings(parser, setting)
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--out", type=folder, default=None, metavar="DIR",
                           help=f"output folder (default: a new {self.out_pattern}); one that "
                                "holds another run is refused unless --overwrite")
        renewable = ", ".join(f"--{key}" for key in self.renewable)
        where.add_argument("--resume", type=folder, default=None, metavar="DIR",
                           help="continue the interrupted run in DIR from its last finished epoch, with its "
                                f"settings (only {renewable}, --backend, --device and --no-progress may be "
                                "given)")
        parser.add_argument("--overwrite", action="store_true",
                            help="let a new run replace the run in --out (its files are replaced when the "
                                 "first epoch ends)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        add_device(parser)
        parser.set_defaults(run=self.run)
        return parser

    def default_text(self, key):
        """How the help shows a setting's default."""
        return self.shown.get(key, self.defaults[key])

    def add_settings(self, parser, setting):
        """Add the command's own options, each through ``setting(flag, help, **kwargs)``."""

    # -- what a command declares ----------------------------------------------------------------

    def check(self, args):
        """Refuse settings that cannot go together, before anything is read (after they are filled)."""

    def read(self, args):
        """What can be read before the backend is chosen (NumPy only, so bad input fails before a
        framework is imported)."""

    def data(self, args, early):
        """The run's data on the active backend (``early``: what :meth:`read` returned), as a namespace
        with at least ``train_iter`` (the hooks below add to it what they work out)."""

    def stem(self, args, backend):
        """The run folder's name before its number."""

    def summary(self, args, backend, data):
        """The line that says what the run trains, on what, how."""

    def note(self, args, resumed):
        """A line printed after the summary (or None)."""

    def before_training(self, args, data):
        """What a run prints and works out once its folder is taken (baselines), kept in ``data``."""

    def info(self, path, follow_symlinks=True):
        """The checked ``info`` of a checkpoint of this command's kind (its hparams, history, resume)."""

    def build(self, args, data):
        """A fresh model."""

    def updater(self, args, net, data):
        """The compiled training step with its optimizer and ``data.schedule`` (:func:`run_schedule`)."""

    def steps_per_epoch(self, data):
        return len(data.train_iter)

    def add_schedule_settings(self, setting, ema_use):
        """``--schedule``, ``--warmup`` and ``--ema``, as every training command has them; ``ema_use`` says
        what the averaged weights are used for (e.g. 'validate, save and generate with')."""
        setting("--schedule", "learning rate over training after the warm-up", choices=SCHEDULES)
        setting("--warmup", "steps of linear learning-rate warm-up from 0", metavar="STEPS")
        setting("--ema", f"{ema_use} an exponential moving average of the weights with this decay (e.g. "
                "0.999; 0: the weights themselves)", metavar="DECAY")

    def optimizer_summary(self, args):
        """How a run steps, for its summary line: 'Adam lr 0.002, 100 warm-up steps, cosine decay, ...'."""
        training = f"{'Adam' if args.optimizer == 'adam' else 'SGD'} lr {args.lr:g}"
        if args.warmup:
            training += f", {args.warmup} warm-up steps"
        if args.schedule != "constant":
            training += f", {args.schedule} decay"
        if getattr(args, "weight_decay", 0):
            training += f", weight decay {args.weight_decay:g}"
        if args.ema:
            training += f", averaged weights (EMA {args.ema:g})"
        if getattr(args, "precision", "float32") != "float32":
            training += f", {args.precision} products"
        return training

    def digest(self, data):
        """A fingerprint of the data: a resumed run must read the same."""

    def load_run(self, path, args, data, digest):
        """``(net, history, resume state)`` from a run's ``last.npz``, its data checked against
        ``digest``."""

    def writer(self, net, data, hparams, history, resume=None, opt_state=None):
        """The checkpoint writer of ``net`` (with the resume state for ``last.npz``)."""

    def hparams(self, args, backend, digest, data):
        """The settings a checkpoint records."""

    def best(self, history, i):
        """The key by which the run's best epoch is chosen, for the epoch in row ``i`` of ``history``
        (higher is better; the first of equals is kept)."""

    def best_text(self, history, i):
        """What makes row ``i`` the best, for messages (``validation perplexity 5.21``)."""

    def fit(self, args, net, data, history, on_epoch, updater):
        """Train; return the history."""

    def stopped_early(self, args, history):
        """The line that says why a run ended before its last epoch."""

    def plot_writer(self, history, data, title, best_epoch):
        """The writer of the run's plot."""

    def title(self, args, backend):
        """The plot's title."""

    def report(self, args, out, data, epochs_done):
        """Print the best epoch's figures (read from ``model.npz``)."""

    # -- the run, the same for every command -----------------------------------------------------

    def run(self, args):
        """The command: settings, data, then the training on the chosen backend."""
        start = clock()
        args.run_id = uuid.uuid4().hex  # marks the run's checkpoints: a resumed run keeps its own
        saved_backend = self.resume_settings(args) if args.resume else self.fill_settings(args)
        self.check(args)
        early = self.read(args)
        with use_backend(args.backend or saved_backend or backend_name()) as module:
            self.check_backend(args)
            return self.train_here(args, module.__name__.rsplit(".", 1)[-1], start, early)

    def check_backend(self, args):
        """Refuse settings the chosen backend cannot run, once it is the active one and before anything is
        written: ``--precision bfloat16`` needs its automatic mixed precision (torch)."""
        check_precision(getattr(args, "precision", "float32"))

    def fill_settings(self, args):
        """A new run: every setting not given takes its default."""
        for key, value in self.defaults.items():
            if getattr(args, key) is None:
                setattr(args, key, value)

    def saved_setting(self, last, key, value):
        """A setting a run saved, checked as the command line checks it."""
        if value is None and self.defaults[key] is None:
            return None
        try:
            if key in self.choices:
                if value not in self.choices[key]:
                    allowed = ", ".join(self.choices[key])
                    raise argparse.ArgumentTypeError(f"is {short(value)}, not one of {allowed}")
                return value
            check = self.types.get(key)
            if check is None and not isinstance(value, str):
                raise argparse.ArgumentTypeError(f"is {short(value)}, not a text")
            return check(str(value)) if check else value
        except argparse.ArgumentTypeError as err:
            raise CheckpointError(f"{last} is corrupt: its setting {key} {err}: start a new run") from None

    def given(self, key, value):
        """A setting as given on the command line, comparable with the run's own."""
        return value

    def names_a_file(self, key, value):
        """Whether the saved setting ``key`` is the path of a file the run read (a corpus of the reader's
        own): d2lrnn opens no file a checkpoint names, so a resumed run needs it given again."""
        return False

    def resume_settings(self, args):
        """``--resume DIR``: the run's own settings (the ``renewable`` ones may raise the totals), each
        checked as the command line checks it; returns the backend the run was on."""
        path, last = self.resume_folder(args)
        info = self.info(last)
        saved, resume = info["hparams"], info["resume"]
        epoch = resume.get("epoch") if isinstance(resume, dict) else None
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not 1 <= epoch <= checks.MAX_EPOCHS:
            raise CheckpointError(f"{last} holds no resume state: it is not a run's last.npz")
        for key in self.defaults:
            default = self.added.get(key)
            value = self.saved_setting(last, key, saved.get(key, default))
            given = getattr(args, key)
            if self.names_a_file(key, value):
                if given is None:
                    flag = f"--{key.replace('_', '-')}"
                    raise D2LRNNError(f"the run in {path} was trained on the file {short(value)}: pass it "
                                      f"again with {flag} PATH to resume (d2lrnn opens no file that a "
                                      "checkpoint names; the run checks it is the same text)")
                continue
            if key not in self.renewable and given is not None and self.given(key, given) != value:
                raise D2LRNNError(f"--resume continues the run with its own settings: drop "
                                  f"--{key.replace('_', '-')} (the run used {value})")
            if given is None:
                setattr(args, key, value)
        check_history(last, info["history"], self.csv_fields, epoch)
        args.run_id = run_id_of(last, saved)
        backend = saved.get("backend")
        if backend not in available_backends():
            raise CheckpointError(f"{last} is corrupt: its setting backend is {short(backend)}, not one of "
                                  f"{', '.join(available_backends())}: start a new run")
        if epoch >= args.epochs:
            raise D2LRNNError(f"the run in {path} has already finished {epoch} of {args.epochs} "
                              f"epochs: pass --epochs N with N > {epoch} to train it further")
        self.check_resumed(args, path, info)
        return backend

    def check_model(self, last, config, args):
        """The model a run's ``last.npz`` holds has the settings the run records (``model_settings``:
        ``{the model's config key: the setting}``)."""
        for key, setting in self.model_settings.items():
            if config.get(key) != getattr(args, setting):
                raise CheckpointError(f"{last} is corrupt: its settings say --{setting.replace('_', '-')} "
                                      f"{getattr(args, setting)} but its model has {key} {config.get(key)}: "
                                      "start a new run")

    def check_resumed(self, args, path, info):
        """Refuse to resume a run that has nothing left to do by the command's own measure."""

    def resume_folder(self, args):
        """The folder ``--resume`` names and its ``last.npz``, checked to hold a run of this command whose
        best model is of the same run (a run started with ``--overwrite`` and killed while it renamed its
        first epoch's files leaves a folder that mixes two runs)."""
        path = pathlib.Path(args.resume)
        if args.overwrite:
            raise D2LRNNError("--resume continues a run and --overwrite replaces one: give only one of them")
        try:
            if not path.is_dir():
                raise RunFolderError(f"--resume {path}: no such run folder: pass the folder a run wrote, "
                                     f"e.g. {self.example}")
            last, best = path / "last.npz", path / "model.npz"
            if not os.path.lexists(last):
                raise RunFolderError(f"{path} holds no state to resume from (no last.npz): pass a folder "
                                     f"that 'd2lrnn {self.name}' wrote")
        except OSError as err:
            if isinstance(err, RunFolderError):
                raise
            raise RunFolderError(f"--resume {path}: {err.strerror or err}: pass the folder a run wrote") \
                from None
        kind = checkpoint.checkpoint_kind(last, follow_symlinks=False)
        if kind != self.kind:
            other = COMMANDS[kind]
            raise RunFolderError(f"{path} holds {other.what} run: continue it with d2lrnn {other.name} "
                                 f"--resume {path}")
        if not os.path.lexists(best):
            raise RunFolderError(f"{path} holds last.npz but no model.npz, the run's best model: it is not a "
                                 "whole run folder; start a new run")
        runs = {name: run_id_of(file, self.info(file, follow_symlinks=False)["hparams"]) for name, file in
                (("last.npz", last), ("model.npz", best))}
        if runs["last.npz"] != runs["model.npz"]:
            raise RunFolderError(f"{path} mixes the files of two runs (its model.npz is not from the run of "
                                 "its last.npz: a run started with --overwrite was stopped while it saved "
                                 "its first epoch): start again with --overwrite, or choose another --out")
        return path, last

    def train_here(self, args, backend, start, early):
        """The run on the already active backend."""
        args.placement = placement(args.device)  # where the model lives: build, load_run and report use it
        data = self.data(args, early)
        data.schedule = run_schedule(args, self.steps_per_epoch(data))  # refused here, before any output
        digest = self.digest(data)
        resumed = args.resume is not None
        with open_run_folder(args.resume or args.out, "runs", self.stem(args, backend), args.overwrite,
                             resumed) as out:
            print(self.summary(args, backend, data))
            note = self.note(args, resumed)
            if note:
                print(note)
            print(f"output folder {out.path}", flush=True)
            self.before_training(args, data)
            if resumed:
                net, history, resume = self.load_run(out / "last.npz", args, data, digest)
                self.check_model(out / "last.npz", net.config(), args)
                restore_generators(out / "last.npz", resume, data.train_iter, history)
                print(f"resuming after epoch {history['epoch'][-1]} of {args.epochs}", flush=True)
            else:
                net, history = self.build(args, data), None
            updater = self.updater(args, net, data)
            if resumed:
                restore_optimizer(out / "last.npz", updater, args.optimizer,
                                  history["epoch"][-1] * self.steps_per_epoch(data))
            hparams = self.hparams(args, backend, digest, data)
            if args.run_id is not None:  # None: a run saved before runs were marked, resumed
                hparams["run"] = args.run_id
            saver = RunSaver(self, out, data, hparams, self.title(args, backend), history, updater)
            try:
                history = self.fit(args, net, data, history, saver, updater)
            except TrainingError as err:
                raise TrainingError(f"{err.cause}; {saver.where()}", err.epoch, err.step) from None
            except KeyboardInterrupt:
                raise interrupted(saver, out, f"d2lrnn {self.name}") from None
            if history["epoch"][-1] < args.epochs:
                print(self.stopped_early(args, history))
            self.report(args, out, data, history["epoch"][-1])
            print(f"\nwall time {duration(clock() - start)}")
            for what, name in (("checkpoint", "model.npz"), ("metrics", "metrics.csv"), ("plot", self.plot),
                               ("resume", "last.npz")):
                print(f"{what:<11} {out / name}")
        return 0


def run_schedule(args, steps_per_epoch):
    """The run's learning rate by step (a :class:`~d2lrnn.training.optim.Schedule` over its ``--epochs``),
    or None for a constant rate without warm-up."""
    if args.schedule == "constant" and not args.warmup:
        return None
    total = args.epochs * steps_per_epoch
    if args.warmup >= total:
        epochs = f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
        raise D2LRNNError(f"--warmup {args.warmup} is not shorter than the run's {total} steps ({epochs} of "
                          f"{steps_per_epoch}): use a smaller --warmup")
    return Schedule(args.lr, total, args.warmup, args.schedule)


#: The commands by the kind of run they write, filled as they are declared.
COMMANDS = {}


def register(command):
    """Make ``command`` (a :class:`TrainingCommand`) known by the kind of its runs."""
    COMMANDS[command.kind] = command
    return command


def refuse_too_large(need, given, fix):
    """Refuse a run that needs ``need`` bytes to train (:func:`d2lrnn.training.memory.training_bytes`) if
    that is more than this machine's memory; ``given`` names the settings that make it so, ``fix`` the ones
    to lower."""
    have = memory.physical_memory()
    if have is not None and need > have:
        raise D2LRNNError(f"{given} needs about {memory.size_text(need)} to train (parameters, gradients, "
                          f"optimizer state and what the backward pass keeps), more than this machine's "
                          f"{memory.size_text(have)}: use a smaller {fix}")


def interrupted(saver, out, command):
    """The KeyboardInterrupt to leave with after Ctrl-C: what is saved, and how to continue."""
    if saver.saved is None:
        return KeyboardInterrupt("interrupted before the first epoch finished; nothing was saved")
    return KeyboardInterrupt(f"interrupted; epochs 1-{saver.saved} are saved in {out.path}: continue "
                             f"with: {command} --resume {out.path}")


def duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def checkpoint_path(text):
    """The checkpoint file ``--checkpoint`` names: the file itself, or a run folder's best model."""
    path = pathlib.Path(text)
    if path.is_dir() and (path / "model.npz").is_file():
        path = path / "model.npz"
    return path
