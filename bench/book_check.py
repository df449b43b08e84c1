"""Run the book's own cells with d2lrnn in place of the book's package, section by section.

    python bench/book_check.py                       # d2l-zh: every column whose Python is there
    python bench/book_check.py --columns torch mxnet --sections rnn-concise gru
    python bench/book_check.py --python tensorflow-keras2=/tmp/venv/bin/python --write
    python bench/book_check.py --edition en          # d2l-en 1.0, compared with the book's package
    python bench/book_check.py --edition en --face book --reference /work/ref --save book.json
    python bench/book_check.py --edition en --repo ../wt-en --against book.json --columns torch mxnet
    python bench/book_check.py --edition en --columns tensorflow --path tensorflow=/work/ref/numpy23

The book's markdown is read from ``--book`` (default ``../shared/book/d2l-zh``, or ``d2l-en`` with
``--edition en``, beside the repository; the book is not stored in the repository). For each section
and column the checker takes the section's code cells for the column's framework, in order: the cells
tagged with that framework or ``all``. It changes nothing but:

* the import line: ``from d2l import torch as d2l`` (or mxnet, tensorflow, paddle, jax) becomes
  ``from d2lrnn.zh import torch as d2l`` (``d2lrnn.en`` for the English edition);
* the epoch counts, so a section runs in minutes (``Edition.epochs``; ``--epochs 500=3 300=6`` sets
  others): d2l-zh, on a line that sets ``num_epochs``, 500 becomes 30 and 300 (seq2seq) 60; d2l-en, the
  count after ``max_epochs=`` (``d2l.Trainer(max_epochs=100, ...)``): 100 becomes 20, 50 (GRU, LSTM)
  10, 30 (seq2seq) 15, and 5 (the sequence section) stays;
* IPython's ``%`` lines (``%matplotlib inline``, d2lbook's ``%%tab``) are dropped.

The two editions' sources mark cells differently. d2l-zh: a first line ``#@tab pytorch, mxnet``;
an untagged cell is MXNet's. d2l-en 1.0: d2lbook notebooks, a first line ``%%tab pytorch, mxnet``
(``all`` for every framework) and, inside cells, ``if tab.selected('mxnet', 'pytorch'):`` branches.
The checker runs them as d2lbook does for a reader who selected the framework: a ``tab`` object in
the namespace answers ``tab.selected`` (``bench/book_runner.py``), and d2lbook's own setup cell
(``%load_ext d2lbook.tab``, the only untagged one) is dropped, as d2lbook's build drops it; another
untagged cell would be PyTorch's, d2l-en's default tab.

Each section runs in a fresh process per column, with the column's Python (the tox env's,
``.tox/<env>/bin/python``, or one given with ``--python ENV=PATH``), ``D2LRNN_BACKEND`` set to its
backend and this checkout's d2lrnn first on the path (``--repo PATH``: another checkout's, read only).
The process's working folder is in a temporary folder of the checker's own, beside a ``data`` folder
holding d2lrnn's bundled corpora (``d2lrnn/data``): ``timemachine.txt``, whose SHA-1 is the one the
book's package checks, and ``fra-eng.zip``, the bundled 18,066 pairs zipped as ``fra-eng/fra.txt``
(its SHA-1 cannot be the book's: the book's archive holds the full ``fra.txt``). With ``--face book``
the import line stays as the book prints it, so the cells run on the book's own ``d2l`` (in the
column's Python, or from ``--reference DIR``: ``DIR/d2l103`` and ``DIR/deps-<env>`` go on the path;
``bench/book_reference.sh`` makes them), and its ``d2l.download`` answers with those two files and
refuses any other name: nothing is downloaded.

d2l-zh's numpy and jax columns have no framework cells: they run the ``#@tab all`` cells after
``import d2lrnn as d2l`` and the standard modules the book's import cells bring, skipping the ``all``
cells that use a name only a framework cell defines (counted in the table). d2l-en has JAX cells, and
its ``jax`` column runs them; its ``tensorflow`` column runs Keras 2 (``TF_USE_LEGACY_KERAS=1``), the
Keras of the book's TensorFlow cells, which also need NumPy below 2.4 (they call ``int()`` on a
one-element tensor): ``--path tensorflow=DIR`` puts a folder holding one before the env's packages.
A cell ``ok`` ran to the end; otherwise the table shows the first failing cell's error in one line.

Fidelity (d2l-en): every ``d2l.Trainer.fit`` is recorded through the book's progress board,
``d2l.ProgressBoard.draw(x, y, label, every_n)``, which the trainer calls with the training and
validation loss or perplexity (labels ``train_ppl``, ``val_ppl``, ``train_loss``, ``val_loss``); the
checker keeps each fit's last plotted point per label, and random generators are seeded (``--seed``,
0) before the first cell. ``--save FILE`` keeps a run's table and figures as JSON; ``--against FILE
...`` prints each fit's last figures beside the mean of saved runs' (the book's package, ``--face
book``, one run per seed) with their ratio, and how far apart the saved runs are. For d2l-en the runs
of the book's package saved in ``bench/book_check_d2l-en_book.json`` (seed 0) and
``bench/book_check_d2l-en_book_seed1.json`` are the default ``--against``. ``--write`` puts the tables
into bench/RESULTS.md as the section ``book-check-<edition>``.

What belongs to one edition of the book (where its sections are, their order, its columns, import
lines, cell marks and epoch counts) is in :data:`EDITIONS`.
"""

import argparse
import ast
import builtins
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

try:
    from _common import ROOT, tox_python
    from results import write_section
except ImportError:  # imported as bench.book_check
    from bench._common import ROOT, tox_python
    from bench.results import write_section


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the table: a tox env, the backend it runs, and whose cells."""

    env: str
    backend: str
    tab: str  # the book's tab name of the framework, or "all" for the #@tab all cells only
    environ: tuple = ()  # extra (name, value) pairs for the process


ZH_COLUMNS = (
    Column("torch", "torch", "pytorch"),
    Column("mxnet", "mxnet", "mxnet"),
    Column("tensorflow-keras2", "tensorflow", "tensorflow", (("TF_USE_LEGACY_KERAS", "1"),)),
    Column("tensorflow", "tensorflow", "tensorflow"),
    Column("paddle", "paddle", "paddle"),
    Column("numpy", "numpy", "all"),
    Column("jax", "jax", "all"),
)

EN_COLUMNS = (
    Column("torch", "torch", "pytorch"),
    Column("mxnet", "mxnet", "mxnet"),
    Column("tensorflow", "tensorflow", "tensorflow", (("TF_USE_LEGACY_KERAS", "1"),)),
    Column("jax", "jax", "jax"),
)


@dataclasses.dataclass(frozen=True)
class Edition:
    """What the checker needs to know about one edition of the book."""

    name: str
    path: pathlib.Path  # where its chapters' markdown is, by default
    sections: tuple  # the markdown files (without .md) in the chapters' order
    imports: dict  # the import line of each framework tag -> its d2lrnn form
    epochs: dict  # the book's epoch count -> the checker's
    columns: tuple = ZH_COLUMNS
    untagged: str = "mxnet"  # the framework of a cell without a tab mark
    tab_mark: str = "#@tab"  # the first line of a cell that names its frameworks
    epoch_line: re.Pattern = re.compile(r"\bnum_epochs\b[^=]*=")  # a line that sets the epoch count
    #: the count itself on such a line (group 1); None: every number of ``epochs`` on the line
    epoch_count: re.Pattern = None
    d2lbook: bool = False  # cells ask d2lbook's ``tab.selected``; each fit's figures are recorded, seeded
    references: tuple = ()  # saved runs of the book's own package (one per seed), the default --against
    input_cell: re.Pattern = re.compile(r"^```\{\.python \.input[^\n]*\n(.*?)^```", re.S | re.M)


EDITIONS = {
    "d2l-zh": Edition(
        name="d2l-zh",
        path=ROOT.parent / "shared" / "book" / "d2l-zh",
        sections=("sequence", "text-preprocessing", "language-models-and-dataset", "rnn", "rnn-scratch",
                  "rnn-concise", "bptt", "gru", "lstm", "deep-rnn", "bi-rnn",
                  "machine-translation-and-dataset", "encoder-decoder", "seq2seq", "beam-search"),
        imports={f"from d2l import {fw} as d2l": f"from d2lrnn.zh import {fw} as d2l"
                 for fw in ("torch", "mxnet", "tensorflow", "paddle")},
        epochs={500: 30, 300: 60},
    ),
    "d2l-en": Edition(
        name="d2l-en",
        path=ROOT.parent / "shared" / "book" / "d2l-en",
        sections=("sequence", "text-sequence", "language-model", "rnn", "rnn-scratch", "rnn-concise", "bptt",
                  "lstm", "gru", "deep-rnn", "bi-rnn", "machine-translation-and-dataset", "encoder-decoder",
                  "seq2seq", "beam-search"),
        imports={f"from d2l import {fw} as d2l": f"from d2lrnn.en import {fw} as d2l"
                 for fw in ("torch", "mxnet", "tensorflow", "jax")},
        epochs={100: 20, 50: 10, 30: 15},
        columns=EN_COLUMNS,
        untagged="pytorch",  # d2lbook's default tab: the first of d2l-en's config.ini tabs
        tab_mark="%%tab",
        epoch_line=re.compile(r"\bmax_epochs\s*="),
        epoch_count=re.compile(r"\bmax_epochs\s*=\s*(\d+)"),
        d2lbook=True,
        references=(ROOT / "bench" / "book_check_d2l-en_book.json",
                    ROOT / "bench" / "book_check_d2l-en_book_seed1.json"),
    ),
}
#: The short names ``--edition`` also takes.
ALIASES = {"zh": "d2l-zh", "en": "d2l-en"}

#: d2lbook's setup cell, which its build drops from every framework's notebook.
D2LBOOK_SETUP = "%load_ext d2lbook.tab"

#: What the book's import cells bring besides the framework, for the columns that run no framework cell.
STANDARD_IMPORTS = "import collections\nimport math\nimport os\nimport random\nimport re\n"

#: One thread per process, as in tox.ini: the checker's runs share the machine with other work.
THREADS = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                  "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                                  "MXNET_CPU_WORKER_NTHREADS")}

#: The process's program: loads bench/book_runner.py by its path (argv[3]) and runs the cells with it.
RUNNER = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("book_runner", sys.argv[3])
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
runner.main(sys.argv[1:3])
"""
RUNNER_FILE = pathlib.Path(__file__).resolve().with_name("book_runner.py")

#: d2lrnn's bundled corpora the book's package reads, and their SHA-1s (d2lrnn/data/README.md).
CORPORA = {"timemachine.txt": ("timemachine.txt", "090b5e7e70c295757f55df93cb0a180b9691891a"),
           "fra-eng.zip": ("fra-eng/fra.txt", "de0b57105785086e2901a4e1eedf19072d4a2fde")}

#: The fidelity bar: a fit's last figure within this share of the book package's.
TOLERANCE = 0.05


@dataclasses.dataclass
class Run:
    """How one section went in one column."""

    status: str  # "ok" or the first failing cell's error in one line
    seconds: float
    figures: list  # lines the cells printed with a training's result (perplexity 8.1, ...)
    fits: list = None  # per Trainer.fit, {label: [x, y]}: the last point the progress board drew


def cells_of(markdown, edition):
    """The code cells of a section: ``[(tabs, source)]``, tabs the frameworks its tab mark names.

    d2lbook's setup cell is left out."""
    cells = []
    for match in edition.input_cell.finditer(markdown):
        source = match.group(1)
        if D2LBOOK_SETUP in source:
            continue
        first = source.split("\n", 1)[0].strip()
        if first.startswith(edition.tab_mark):
            tabs = {t.strip() for t in first[len(edition.tab_mark):].split(",")}
        else:
            tabs = {edition.untagged}
        cells.append((tabs, source))
    return cells


def shrink_epochs(line, edition):
    """A line that sets the epoch count, with the edition's shorter count."""
    if edition.epoch_count is None:
        for book, short in edition.epochs.items():
            line = re.sub(rf"\b{book}\b", str(short), line)
        return line

    def shorter(match):
        count = int(match.group(1))
        return match.group(0)[:match.start(1) - match.start(0)] + str(edition.epochs.get(count, count))
    return edition.epoch_count.sub(shorter, line)


def adapt(source, edition, keep_import=False):
    """A cell as the checker runs it: the d2lrnn import (the book's own with ``keep_import``), fewer
    epochs, no IPython magics."""
    lines = []
    for line in source.splitlines():
        if line.lstrip().startswith("%"):
            continue
        stripped = line.strip()
        if stripped in edition.imports and not keep_import:
            line = line.replace(stripped, edition.imports[stripped])
        elif edition.epoch_line.search(line):
            line = shrink_epochs(line, edition)
        lines.append(line)
    return "\n".join(lines) + "\n"


def names(source):
    """(names a cell defines, names it reads) by a look at its syntax."""
    defined, read = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return defined, read


def plan(cells, column, edition, keep_import=False):
    """The sources the column runs, and how many ``all`` cells it skips (numpy, jax: those needing a
    name only a framework cell defines). A framework column runs nothing in a section with no cell of its
    framework: its ``all`` cells alone would only fail on the names the framework cells define."""
    if column.tab != "all":
        if not any(column.tab in tabs for tabs, _ in cells):
            return [], 0  # the section has no cell of this framework (deep-rnn, bi-rnn on TensorFlow)
        return [adapt(s, edition, keep_import) for tabs, s in cells if column.tab in tabs or "all" in tabs], 0
    framework_only = set()
    for tabs, source in cells:
        if "all" not in tabs:
            framework_only |= names(adapt(source, edition))[0]
    known = set(dir(builtins)) | names(STANDARD_IMPORTS)[0] | {"d2l"}
    run, skipped = [STANDARD_IMPORTS + "import d2lrnn as d2l\n"], 0
    for tabs, source in cells:
        if "all" not in tabs:
            continue
        source = adapt(source, edition)
        defined, read = names(source)
        if (read - defined - known) & framework_only:
            framework_only |= defined
            skipped += 1
            continue
        known |= defined
        run.append(source)
    return (run if len(run) > 1 else []), skipped


def options(column, edition, book_face, seed=0):
    """What the runner does besides running the cells (``bench/book_runner.py``)."""
    opts = {}
    if edition.d2lbook:
        opts.update(tab=column.tab, seed=seed, record=True)
    if book_face:
        opts["offline"] = {}  # filled with the corpora's paths by run_section
    return opts


def place_corpora(folder, repo=ROOT):
    """Put d2lrnn's bundled corpora into ``folder`` as the book's package names them; ``{name: path}``.

    A copy whose SHA-1 is not the bundled one's (d2lrnn/data/README.md) is refused."""
    folder.mkdir()
    placed = {}
    for name, (bundled, sha1) in CORPORA.items():
        source = repo / "d2lrnn" / "data" / bundled
        if hashlib.sha1(source.read_bytes()).hexdigest() != sha1:
            raise SystemExit(f"book_check: {source} is not the bundled corpus (SHA-1 {sha1} expected)")
        target = folder / name
        if name.endswith(".zip"):
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.write(source, bundled)
        else:
            shutil.copyfile(source, target)
        placed[name] = str(target)
    return placed


def search_path(column, repo, reference, extra=()):
    """PYTHONPATH for the column's process: the d2lrnn checkout, the folders ``extra`` (``--path``), the
    book's package from ``reference`` (``DIR/d2l103``, ``DIR/deps-<env>``) where given, then what the
    caller had."""
    paths = [str(repo), *map(str, extra)]
    if reference is not None:
        paths += [str(p) for p in (reference / "d2l103", reference / f"deps-{column.env}") if p.is_dir()]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(paths)


def run_section(sources, column, python, timeout, log=None, opts=None, repo=ROOT, reference=None, extra=()):
    """Run ``sources`` in a fresh process of ``python``, in a temporary folder beside the bundled
    corpora; a :class:`Run`. Its figures are the lines the cells printed that give a training's result
    (``perplexity 8.1, ...``, ``loss 0.020, ...``), its fits what the runner recorded (``opts["record"]``)."""
    env = dict(os.environ, **THREADS, D2LRNN_BACKEND=column.backend, MPLBACKEND="Agg", PYTHONHASHSEED="0",
               PYTHONPATH=search_path(column, repo, reference, extra))
    env.update(dict(column.environ))
    if pathlib.Path(repo).resolve() != ROOT:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # another checkout is read, never written to
    opts = dict(opts or {})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        cells, report, workdir = tmp / "cells.json", tmp / "report.json", tmp / "run"
        workdir.mkdir()
        placed = place_corpora(tmp / "data")  # ../data from the working folder, as the book's package reads
        if "offline" in opts:
            opts["offline"] = placed
        cells.write_text(json.dumps({"cells": sources, "options": opts}))
        start = time.perf_counter()
        result = {}
        try:
            command = [python, "-c", RUNNER, str(cells), str(report), str(RUNNER_FILE)]
            done = subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout)
            output = done.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode(errors="replace")
            status = f"timed out after {timeout} s"
        else:
            result = json.loads(report.read_text()) if report.exists() else {}
            status = result.get("error") or ("ok" if result.get("ran") == len(sources)
                                             else f"exited {done.returncode}: {last_line(output)}")
        seconds = time.perf_counter() - start
    if log is not None:
        log.write_text(output)
    figures = [line.split(",")[0] for line in output.splitlines() if re.match(r"(perplexity|loss) \d", line)]
    return Run(status, seconds, figures, result.get("fits"))


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def describe_fits(fits):
    """``fit 1: train_ppl 8.12, val_ppl 9.03; fit 2: ...`` (the last point of each label)."""
    return "; ".join(f"fit {i}: " + ", ".join(f"{label} {point[1]:.4g}" for label, point in fit.items())
                     for i, fit in enumerate(fits or [], 1))


def table(edition, columns, rows):
    """The markdown table: one row per section, one column per env."""
    head = "| section | " + " | ".join(c.env for c in columns) + " |"
    lines = [head, "|---" * (len(columns) + 1) + "|"]
    for section in rows:
        cells = [rows[section].get(c.env, "not run").replace("|", "\\|") for c in columns]
        lines.append(f"| {section} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fidelity(runs, references):
    """Each fit's last figures beside the saved runs': ``[(section, env, fit, label, [saved], this)]``.

    ``runs`` and each of ``references`` (saved runs, e.g. of the book's package under several seeds) are
    ``{section: {env: {"fits": [...]}}}``; ``saved`` holds the figure of each saved run that has it, and
    a figure this run lacks is None."""
    rows = []
    sections = list(dict.fromkeys(s for reference in references for s in reference))
    for section in sections:
        envs = list(dict.fromkeys(e for reference in references for e in reference.get(section, {})))
        for env in envs:
            saved = [(reference.get(section, {}).get(env) or {}).get("fits") or []
                     for reference in references]
            these = (runs.get(section, {}).get(env) or {}).get("fits") or []
            count = max(len(fits) for fits in saved)
            for i in range(max(count, len(these)) if count else 0):
                fits = [f[i] for f in saved if i < len(f)] + ([these[i]] if i < len(these) else [])
                for label in sorted(set().union(*fits), key=label_order):
                    values = [f[i][label][1] for f in saved if i < len(f) and label in f[i]]
                    this = these[i][label][1] if i < len(these) and label in these[i] else None
                    rows.append((section, env, i + 1, label, values, this))
    return rows


def label_order(label):
    """Training figures before validation ones, then by name."""
    return (not label.startswith("train"), label)


def fidelity_table(rows, reference_name="the book's d2l", this_name="this run"):
    """The markdown table of :func:`fidelity`'s rows: the saved runs' mean (their range where more than
    one), this run's figure, its ratio to the mean and whether that is within the bar, and how far apart
    the saved runs themselves are (largest over smallest, less one)."""
    lines = [f"| section | env | fit | figure | {reference_name} | {this_name} | ratio | "
             "spread of the saved runs |", "|---" * 8 + "|"]
    for section, env, fit, label, values, this in rows:
        mean = sum(values) / len(values) if values else None
        saved = number(mean)
        if len(values) > 1:
            saved += f" ({number(min(values))} to {number(max(values))})"
        if mean is None or this is None:
            ratio = "—"
        else:
            ratio = f"{this / mean:.3f}" + ("" if abs(this / mean - 1) <= TOLERANCE else " (outside 5%)")
        spread = f"{max(values) / min(values) - 1:.1%}" if len(values) > 1 else "—"
        lines.append(f"| {section} | {env} | {fit} | {label} | {saved} | {number(this)} | {ratio} "
                     f"| {spread} |")
    return "\n".join(lines)


def number(value):
    return "—" if value is None else f"{value:.4g}"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", choices=sorted(EDITIONS) + sorted(ALIASES), default="d2l-zh")
    parser.add_argument("--book", type=pathlib.Path, help="the folder of the chapters' markdown")
    parser.add_argument("--columns", nargs="+",
                        help="the envs to run (default: every one whose Python is there)")
    parser.add_argument("--sections", nargs="+", help="the sections to run (default: all)")
    parser.add_argument("--tox-dir", type=pathlib.Path, help="where the tox envs are (default: .tox)")
    parser.add_argument("--python", action="append", default=[], metavar="ENV=PATH",
                        help="the Python of an env, instead of the tox env's")
    parser.add_argument("--epochs", nargs="+", metavar="BOOK=SHORT",
                        help="the epoch counts to set instead of the edition's (e.g. 500=3 300=6: the "
                             "table of sections that run to the end in a tenth of the time)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one section may run")
    parser.add_argument("--logs", type=pathlib.Path, help="a folder for each run's output")
    parser.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    parser.add_argument("--face", choices=("d2lrnn", "book"), default="d2lrnn",
                        help="d2lrnn: the import line becomes d2lrnn's; book: it stays, and the cells run on "
                             "the book's own d2l package (in the --python given, or from --reference)")
    parser.add_argument("--book-package", action="store_true", help="the same as --face book")
    parser.add_argument("--reference", type=pathlib.Path,
                        help="with --face book: a folder made by bench/book_reference.sh "
                             "(d2l103, deps-<env>)")
    parser.add_argument("--path", action="append", default=[], metavar="ENV=DIR",
                        help="a folder to put on one env's path, before the packages installed there "
                             "(e.g. tensorflow=DIR with NumPy below 2.4 for the book's TensorFlow cells)")
    parser.add_argument("--repo", type=pathlib.Path, default=ROOT,
                        help="the d2lrnn checkout to run, first on PYTHONPATH (default: this one)")
    parser.add_argument("--seed", type=int, default=0,
                        help="d2l-en: the seed of the Python, NumPy and framework generators (default 0)")
    parser.add_argument("--save", type=pathlib.Path,
                        help="write the run's table and figures to this JSON file")
    parser.add_argument("--against", type=pathlib.Path, nargs="+",
                        help="runs saved with --save (the book's package, one per seed) to compare each "
                             "fit's figures with (d2l-en's default with --face d2lrnn: "
                             "bench/book_check_d2l-en_book*.json)")
    args = parser.parse_args(argv)
    args.edition = ALIASES.get(args.edition, args.edition)
    if args.book_package:
        args.face = "book"
    if args.reference is not None and not EDITIONS[args.edition].d2lbook:
        parser.error("--reference holds the book's d2l 1.0.3, the English edition's package: use it with "
                     "--edition en (d2l-zh's package is the one installed in --python)")
    known = [c.env for c in EDITIONS[args.edition].columns]
    for env in args.columns or ():
        if env not in known:
            parser.error(f"--columns: {env!r} is not a column of {args.edition} ({', '.join(known)})")
    return args


def pythons(args, columns):
    """The Python of each env: given with --python, else the tox env's."""
    given = dict(item.split("=", 1) for item in args.python)
    return {c.env: given.get(c.env) or str(tox_python(c.env, args.tox_dir)) for c in columns}


def main(argv=None):
    args = parse_args(argv)
    edition = EDITIONS[args.edition]
    if args.epochs:
        edition = dataclasses.replace(edition, epochs={int(book): int(short) for book, short in
                                                      (item.split("=", 1) for item in args.epochs)})
    book = args.book or edition.path
    if not book.is_dir():
        sys.exit(f"book_check: no folder {book} (give the chapters' markdown with --book)")
    book_face = args.face == "book"
    python = pythons(args, edition.columns)
    extra_paths = {}
    for item in args.path:
        env, folder = item.split("=", 1)
        extra_paths.setdefault(env, []).append(pathlib.Path(folder))
    columns = [c for c in edition.columns
               if (c.env in args.columns if args.columns else pathlib.Path(python[c.env]).exists())]
    missing = [c.env for c in columns if not pathlib.Path(python[c.env]).exists()]
    if missing:
        sys.exit(f"book_check: no Python for {', '.join(missing)} (looked for {python[missing[0]]}): "
                 f"make the env with `tox -e {missing[0]} --notest`, or give --python {missing[0]}=PATH")
    sections = args.sections or [s for s in edition.sections if (book / f"{s}.md").exists()]
    against = args.against or (list(edition.references) if not book_face else [])
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    rows, runs = {}, {}
    for section in sections:
        path = book / f"{section}.md"
        if not path.exists():
            sys.exit(f"book_check: {path} does not exist")
        cells = cells_of(path.read_text(encoding="utf-8"), edition)
        rows[section], runs[section] = {}, {}
        for column in columns:
            sources, skipped = plan(cells, column, edition, book_face)
            if not sources:
                rows[section][column.env] = f"— ({skipped} framework-dependent cells)" if skipped else "—"
                continue
            log = args.logs / f"{section}.{column.env}.log" if args.logs else None
            run = run_section(sources, column, python[column.env], args.timeout, log,
                              options(column, edition, book_face, args.seed), args.repo, args.reference,
                              extra_paths.get(column.env, ()))
            status = run.status
            if status == "ok" and skipped:
                status = f"ok ({skipped} framework-dependent cells skipped)"
            rows[section][column.env] = status
            runs[section][column.env] = {"status": status, "seconds": round(run.seconds, 1), "fits": run.fits}
            print(f"{section:34} {column.env:18} {run.seconds:5.0f} s  {status}  "
                  f"{'; '.join(run.figures)}{describe_fits(run.fits)}", flush=True)
    text = table(edition, columns, rows)
    print(text)
    if args.save:
        args.save.write_text(json.dumps({"edition": edition.name, "face": args.face, "epochs": edition.epochs,
                                         "seed": args.seed, "runs": runs}, indent=1) + "\n")
    compared = ""
    saved = [json.loads(path.read_text()) for path in against if path.exists()]
    if saved:
        references = [{s: {e: r for e, r in by_env.items() if e in runs.get(s, {})}
                       for s, by_env in reference["runs"].items() if s in runs} for reference in saved]
        seeds = ", ".join(str(reference.get("seed")) for reference in saved)
        book = all(reference.get("face") == "book" for reference in saved)
        rows_compared = fidelity(runs, references)
        if rows_compared:
            compared = fidelity_table(rows_compared,
                                      f"the book's d2l (seeds {seeds})" if book else f"saved (seeds {seeds})",
                                      f"the book's d2l (seed {args.seed})" if book_face else "d2lrnn")
    if compared:
        print(f"\nEach fit's last figures against {', '.join(str(p) for p in against)}:\n{compared}")
    if args.write and not book_face:
        write_section(f"book-check-{edition.name}", summary(edition, text, compared))


def summary(edition, text, compared=""):
    """The RESULTS.md section of a run: what was run, the table, and the figures compared."""
    epochs = ", ".join(f"{a} -> {b}" for a, b in edition.epochs.items())
    which = ("each env runs its framework's cells (`%%tab`), TensorFlow on Keras 2" if edition.d2lbook
             else "numpy and jax run the `#@tab all` cells")
    body = (f"## The book's cells with d2lrnn ({edition.name}, `bench/book_check.py`)\n\n"
            f"Each section's cells for each env in a fresh process, only the import line changed "
            f"and epochs shrunk ({epochs}); {which}.\n\n{text}")
    if compared:
        body += f"\n\nEach fit's last figures beside the book's own package's:\n\n{compared}"
    return body + "\n"

if __name__ == "__main__":
    main()
