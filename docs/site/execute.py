"""Execute chapter notebooks on one backend, with the Python this script runs under.

``build.py`` starts this script once per backend with that backend's Python (a tox env's), so each
framework runs in the environment it is installed in, never two frameworks in one process::

    .tox/torch/bin/python docs/site/execute.py --backend torch chapters/gru.md=out/gru.ipynb ...

Each ``SOURCE=TARGET`` pair reads a Jupytext notebook and writes the executed ``.ipynb``. One kernel
serves all of them, reset between notebooks (as tests/chapters does), so the framework's import is
paid once. The kernel is this interpreter's (``sys.executable``), whatever kernelspecs the machine
has, and sees ``D2LRNN_BACKEND``, ``D2LRNN_QUICK`` and the working tree first on ``PYTHONPATH``.
Needs only what the backend envs have: jupytext, nbclient, ipykernel, tqdm.
"""

import argparse
import os
import pathlib
import sys

import jupytext
import nbformat
from ipykernel.kernelspec import get_kernel_dict
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from tqdm import tqdm

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Per cell: a hang guard far above any cell of a full-mode run on a 2-core CPU, not a speed target.
CELL_TIMEOUT = 3600


class ThisPython(KernelSpecManager):
    """Every kernel name resolves to an ipykernel on this interpreter."""

    def get_kernel_spec(self, kernel_name):
        return KernelSpec(resource_dir="", **get_kernel_dict())


def kernel_env(backend, quick):
    """The kernel's environment: the caller's, with the backend, the mode and this tree's d2lrnn first."""
    env = dict(os.environ)
    env["D2LRNN_BACKEND"] = backend
    env["D2LRNN_QUICK"] = "1" if quick else "0"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def execute(pairs, backend, quick):
    """Run each (source .md, target .ipynb) pair in one kernel; a failing cell keeps its error output.

    Returns the number of notebooks in which a cell raised.
    """
    manager = KernelManager(kernel_name="python3", kernel_spec_manager=ThisPython())
    manager.start_kernel(cwd=str(ROOT / "chapters"), env=kernel_env(backend, quick))
    failed = 0
    try:
        for source, target in tqdm(pairs, desc=f"executing on {backend}", unit="notebook"):
            nb = jupytext.read(source)
            nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
            client = NotebookClient(nb, km=manager, timeout=CELL_TIMEOUT, allow_errors=True,
                                    resources={"metadata": {"path": str(ROOT / "chapters")}})
            client.execute()
            del nb.cells[0]
            errors = [c for c in nb.cells if c.cell_type == "code"
                      and any(o.get("output_type") == "error" for o in c.outputs)]
            failed += bool(errors)
            nb.metadata["d2lrnn_site"] = {"backend": backend, "quick": quick, "failed_cells": len(errors)}
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            nbformat.write(nb, tmp)
            tmp.replace(target)  # a cache entry is complete or absent
    finally:
        manager.shutdown_kernel(now=True)
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--full", action="store_true", help="the notebooks' full settings (default: quick)")
    parser.add_argument("pairs", nargs="+", metavar="SOURCE=TARGET")
    args = parser.parse_args(argv)
    pairs = [tuple(pathlib.Path(p) for p in pair.split("=", 1)) for pair in args.pairs]
    failed = execute(pairs, args.backend, quick=not args.full)
    if failed:
        print(f"{failed} notebook(s) raised on {args.backend}; their pages show the error", file=sys.stderr)


if __name__ == "__main__":
    main()
