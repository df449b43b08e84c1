"""Run the book's own cells with d2lrnn in place of the book's package, section by section.

    python bench/book_check.py                       # every column whose Python is there
    python bench/book_check.py --columns torch mxnet --sections rnn-concise gru
    python bench/book_check.py --python tensorflow-keras2=/tmp/venv/bin/python --write

The book's markdown is read from ``--book`` (default ``../shared/book/d2l-zh`` beside the repository;
the book is not stored in the repository). For each section and column the checker takes the
section's code cells for the column's framework, in order: the cells tagged ``#@tab`` with that
framework or ``all`` (untagged cells are MXNet's, as in the book's sources). It changes nothing but:

* the import line: ``from d2l import torch as d2l`` (or mxnet, tensorflow, paddle) becomes
  ``from d2lrnn.zh import torch as d2l``;
* the epoch counts, so a section runs in minutes: on a line that sets ``num_epochs``, 500 becomes 30
  and 300 (seq2seq) becomes 60 (``Edition.epochs``; ``--epochs 500=3 300=6`` sets others);
* IPython's ``%`` lines (``%matplotlib inline``) are dropped.

Each section runs in a fresh process per column, with the column's Python (the tox env's,
``.tox/<env>/bin/python``, or one given with ``--python ENV=PATH``), ``D2LRNN_BACKEND`` set to its
backend and this checkout's d2lrnn first on the path. The numpy and jax columns have no framework cells:
they run the ``#@tab all`` cells after ``import d2lrnn as d2l`` and the standard modules the book's
import cells bring, skipping the ``all`` cells that use a name only a framework cell defines (counted in
the table). A cell ``ok`` ran to the end; otherwise the table shows the first failing cell's error in one
line. ``--write`` puts the table into bench/RESULTS.md as the section ``book-check-<edition>``.

What belongs to one edition of the book (where its sections are, their order, its import lines and
epoch counts) is in :data:`EDITIONS`; the English edition is another entry there.
"""

import argparse
import ast
import builtins
import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

try:
    from _common import ROOT, tox_python
    from results import write_section
except ImportError:  # imported as bench.book_check
    from bench._common import ROOT, tox_python
    from bench.results import write_section


@dataclasses.dataclass(frozen=True)
class Edition:
    """What the checker needs to know about one edition of the book."""

    name: str
    path: pathlib.Path  # where its chapters' markdown is, by default
    sections: tuple  # the markdown files (without .md) in the chapters' order
    imports: dict  # the import line of each framework tag -> its d2lrnn form
    epochs: dict  # on a line setting num_epochs: the book's count -> the checker's
    untagged: str = "mxnet"  # the framework of a cell without #@tab
    input_cell: re.Pattern = re.compile(r"^```\{\.python \.input\}[^\n]*\n(.*?)^```", re.S | re.M)


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
}


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the table: a tox env, the backend it runs, and whose cells."""

    env: str
    backend: str
    tab: str  # the book's #@tab name of the framework, or "all" for the #@tab all cells only
    environ: tuple = ()  # extra (name, value) pairs for the process


COLUMNS = (
    Column("torch", "torch", "pytorch"),
    Column("mxnet", "mxnet", "mxnet"),
    Column("tensorflow-keras2", "tensorflow", "tensorflow", (("TF_USE_LEGACY_KERAS", "1"),)),
    Column("tensorflow", "tensorflow", "tensorflow"),
    Column("paddle", "paddle", "paddle"),
    Column("numpy", "numpy", "all"),
    Column("jax", "jax", "all"),
)

#: What the book's import cells bring besides the framework, for the columns that run no framework cell.
STANDARD_IMPORTS = "import collections\nimport math\nimport os\nimport random\nimport re\n"

#: One thread per process, as in tox.ini: the checker's runs share the machine with other work.
THREADS = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                  "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                                  "MXNET_CPU_WORKER_NTHREADS")}

#: Runs the cells handed to it as JSON, in one namespace, and reports how far they got as JSON.
RUNNER = r"""
import json, sys, traceback
cells, report = json.load(open(sys.argv[1])), sys.argv[2]
namespace, result = {"__name__": "__main__"}, {"ran": 0}
for i, source in enumerate(cells):
    try:
        exec(compile(source, f"<cell {i}>", "exec"), namespace)
    except BaseException as e:
        lines = [line for line in str(e).splitlines() if line.strip()] or [""]
        result["error"] = f"cell {i}: {type(e).__name__}: {lines[0].strip()}"
        traceback.print_exc()
        break
    result["ran"] = i + 1
json.dump(result, open(report, "w"))
"""


def cells_of(markdown, edition):
    """The code cells of a section: ``[(tabs, source)]``, tabs the frameworks named by ``#@tab``."""
    cells = []
    for match in edition.input_cell.finditer(markdown):
        source = match.group(1)
        first = source.split("\n", 1)[0].strip()
        if first.startswith("#@tab"):
            tabs = {t.strip() for t in first[len("#@tab"):].split(",")}
        else:
            tabs = {edition.untagged}
        cells.append((tabs, source))
    return cells


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
        elif re.search(r"\bnum_epochs\b[^=]*=", line):
            for book, short in edition.epochs.items():
                line = re.sub(rf"\b{book}\b", str(short), line)
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


def run_section(sources, column, python, timeout, log=None):
    """Run ``sources`` in a fresh process of ``python``; ``(status, seconds, figures)``, status ``"ok"``
    or the first failing cell's error in one line, figures the lines the cells printed that give a
    training's result (``perplexity 8.1, ...``, ``loss 0.020, ...``)."""
    env = dict(os.environ, **THREADS, D2LRNN_BACKEND=column.backend, MPLBACKEND="Agg", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.update(dict(column.environ))
    with tempfile.TemporaryDirectory() as tmp:
        cells, report = pathlib.Path(tmp, "cells.json"), pathlib.Path(tmp, "report.json")
        cells.write_text(json.dumps(sources))
        start = time.perf_counter()
        try:
            done = subprocess.run([python, "-c", RUNNER, str(cells), str(report)], cwd=tmp, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
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
    return status, seconds, figures


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def table(edition, columns, rows):
    """The markdown table: one row per section, one column per env."""
    head = "| section | " + " | ".join(c.env for c in columns) + " |"
    lines = [head, "|---" * (len(columns) + 1) + "|"]
    for section in rows:
        cells = [rows[section].get(c.env, "not run").replace("|", "\\|") for c in columns]
        lines.append(f"| {section} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", choices=sorted(EDITIONS), default="d2l-zh")
    parser.add_argument("--book", type=pathlib.Path, help="the folder of the chapters' markdown")
    parser.add_argument("--columns", nargs="+", choices=[c.env for c in COLUMNS],
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
    parser.add_argument("--book-package", action="store_true",
                        help="keep the book's import line: run the cells on the book's own d2l package "
                             "(installed in the --python given), to compare the numbers they print")
    return parser.parse_args(argv)


def pythons(args):
    """The Python of each env: given with --python, else the tox env's."""
    given = dict(item.split("=", 1) for item in args.python)
    return {c.env: given.get(c.env) or str(tox_python(c.env, args.tox_dir)) for c in COLUMNS}


def main(argv=None):
    args = parse_args(argv)
    edition = EDITIONS[args.edition]
    if args.epochs:
        edition = dataclasses.replace(edition, epochs={int(book): int(short) for book, short in
                                                      (item.split("=", 1) for item in args.epochs)})
    book = args.book or edition.path
    if not book.is_dir():
        sys.exit(f"book_check: no folder {book} (give the chapters' markdown with --book)")
    python = pythons(args)
    columns = [c for c in COLUMNS
               if (c.env in args.columns if args.columns else pathlib.Path(python[c.env]).exists())]
    sections = args.sections or [s for s in edition.sections if (book / f"{s}.md").exists()]
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    rows = {}
    for section in sections:
        path = book / f"{section}.md"
        if not path.exists():
            sys.exit(f"book_check: {path} does not exist")
        cells = cells_of(path.read_text(encoding="utf-8"), edition)
        rows[section] = {}
        for column in columns:
            sources, skipped = plan(cells, column, edition, args.book_package)
            if not sources:
                rows[section][column.env] = f"— ({skipped} framework-dependent cells)" if skipped else "—"
                continue
            log = args.logs / f"{section}.{column.env}.log" if args.logs else None
            status, seconds, figures = run_section(sources, column, python[column.env], args.timeout, log)
            if status == "ok" and skipped:
                status = f"ok ({skipped} framework-dependent cells skipped)"
            rows[section][column.env] = status
            print(f"{section:34} {column.env:18} {seconds:5.0f} s  {status}  {'; '.join(figures)}",
                  flush=True)
    text = table(edition, columns, rows)
    print(text)
    if args.write and not args.book_package:
        epochs = ", ".join(f"{a} -> {b}" for a, b in edition.epochs.items())
        write_section(f"book-check-{edition.name}",
                      f"## The book's cells with d2lrnn ({edition.name}, `bench/book_check.py`)\n\n"
                      f"Each section's cells for each env in a fresh process, only the import line changed "
                      f"and epochs shrunk ({epochs}); numpy and jax run the `#@tab all` cells.\n\n{text}\n")


if __name__ == "__main__":
    main()
