"""Build the d2lrnn website into ``site/``: the chapters with every backend's outputs in tabs, and the docs.

    python docs/site/build.py                                   # every section, every backend, quick mode
    python docs/site/build.py --sections rnn,rnn-scratch --backends numpy,torch
    python docs/site/build.py --full                            # the notebooks' full settings (hours)

Steps: (1) each chapter notebook is executed on each backend by ``execute.py`` under that backend's
Python (``<tox dir>/<backend>/bin/python``), unless ``site/.build/executed/`` already has it for the
same notebook text, backend, mode and d2lrnn source; (2) one MyST page per section is written from
the executed notebooks (prose and code once, each code cell's outputs in one tab per backend, cells
whose printed numbers differ between backends marked, with the differing lines side by side); (3)
Sphinx builds the pages, the API pages (autodoc) and the command line page (sphinx-argparse).
"""

import argparse
import ast
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import mathjax
import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import render  # noqa: E402  (this folder's module, found through the line above)
from compare import BACKENDS  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHAPTERS = ROOT / "chapters"
#: Pages written by hand, copied into the source tree as they are.
STATIC_PAGES = ("index.md", "api.md", "cli.md")


def book_order():
    """The sections in the book's order: ``EXPECTED`` of tests/chapters/test_notebooks.py, read without
    importing the test module (it imports d2lrnn and pytest)."""
    tree = ast.parse((ROOT / "tests/chapters/test_notebooks.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise RuntimeError("EXPECTED not found in tests/chapters/test_notebooks.py")


def all_sections():
    """Every chapters/*.md: the book's sections in its order, any other after them by name."""
    order = book_order()
    stems = [p.stem for p in CHAPTERS.glob("*.md")]
    return sorted(stems, key=lambda s: (order.index(s) if s in order else len(order), s))


def source_digest():
    """A digest of d2lrnn's source and data files and of the executor: a change to any re-executes."""
    h = hashlib.sha256()
    files = sorted(p for p in (ROOT / "d2lrnn").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files + [HERE / "execute.py"]:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_path(cache, section, backend, quick, digest):
    """Where the executed notebook of ``section`` on ``backend`` lives, keyed by everything it depends on."""
    key = hashlib.sha256(b"\0".join([(CHAPTERS / f"{section}.md").read_bytes(), backend.encode(),
                                     b"quick" if quick else b"full", digest.encode()])).hexdigest()[:16]
    return cache / f"{section}.{backend}.{'quick' if quick else 'full'}.{key}.ipynb"


def backend_python(tox_dir, backend):
    """The Python of the tox env of ``backend``."""
    return pathlib.Path(tox_dir) / backend / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_envs(tox_dir, backends, create):
    """Fail with the command that makes them when a backend's env is missing (or make them, ``create``)."""
    missing = [b for b in backends if not backend_python(tox_dir, b).exists()]
    if missing and create:
        cmd = [sys.executable, "-m", "tox", "--workdir", str(tox_dir), "--notest", "-e", ",".join(missing)]
        subprocess.run(cmd, cwd=ROOT, check=True)
        missing = [b for b in backends if not backend_python(tox_dir, b).exists()]
    if missing:
        sys.exit(f"no env for {', '.join(missing)} in {tox_dir}: run `tox --notest -e {','.join(missing)}` "
                 "(or pass --create-envs, or --tox-dir where they are)")


def execute_missing(sections, backends, quick, cache, tox_dir):
    """Run ``execute.py`` once per backend on that backend's sections that are not cached."""
    digest = source_digest()
    for backend in backends:
        todo = [(s, cache_path(cache, s, backend, quick, digest)) for s in sections]
        todo = [(s, path) for s, path in todo if not path.exists()]
        for _, path in todo:  # the same section, backend and mode run on older sources
            for stale in path.parent.glob(path.name.rsplit(".", 2)[0] + ".*.ipynb"):
                stale.unlink()
        if not todo:
            continue
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        cmd = [str(backend_python(tox_dir, backend)), str(HERE / "execute.py"), "--backend", backend]
        cmd += ([] if quick else ["--full"]) + [f"{CHAPTERS / s}.md={path}" for s, path in todo]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return {s: {b: nbformat.read(cache_path(cache, s, b, quick, digest), as_version=4) for b in backends}
            for s in sections}


def _selection(src):
    """What the sources in ``src`` were written for (None if nothing was)."""
    path = src / "site.json"
    return json.loads(path.read_text()) if path.exists() else None


def clean(out, keep):
    """Remove the built site and its sources, all but the folder ``keep`` (the cache). A folder without
    ``.build/`` is not one this script made, and is left alone."""
    if not (out / ".build").is_dir():
        return
    for path in [*out.iterdir(), *(out / ".build").glob("*")]:
        if path == keep or path == out / ".build":
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def write_if_changed(path, text):
    """Write only a changed file, so that Sphinx re-reads only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def copy_mathjax(static):
    """MathJax 3 (TeX input, CommonHTML output, its web fonts) from the django-static-mathjax wheel, so the
    site loads no script or font from elsewhere."""
    es5 = pathlib.Path(mathjax.__file__).parent / "static/mathjax/es5"
    target = static / "mathjax"
    if (target / "tex-chtml.js").exists():
        return
    for part in ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y"):
        source = es5 / part
        if source.is_dir():
            shutil.copytree(source, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / part)


def write_sources(src, executed, backends, quick):
    """The Sphinx source tree: the hand-written pages, one generated page per section, the toc."""
    for name in STATIC_PAGES:
        write_if_changed(src / name, (HERE / "pages" / name).read_text())
    sections = list(executed)
    titles = {}
    for section, notebooks in executed.items():
        page, images, titles[section] = render.section_page(section, notebooks, backends)
        for rel, data in images.items():
            path = src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)
        write_if_changed(src / "chapters" / f"{section}.md", page)
    mode = "quick settings (D2LRNN_QUICK=1)" if quick else "full settings"
    write_if_changed(src / "chapters/index.md", render.chapters_index(sections, titles, backends, mode))
    write_if_changed(src / "site.json", json.dumps({"sections": sections, "backends": backends,
                                                    "quick": quick}, indent=1))


def sphinx(src, out, doctrees):
    """Build the HTML; Sphinx re-reads only the sources that changed since the last build."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(HERE), "-d", str(doctrees), "-q",
           str(src), str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Build the d2lrnn website into site/.")
    parser.add_argument("--sections", help="comma-separated sections (default: every chapters/*.md)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated (default: all six)")
    parser.add_argument("--full", action="store_true", help="the notebooks' full settings (default: quick)")
    parser.add_argument("--out", default=str(ROOT / "site"), help="output folder (default: site/)")
    parser.add_argument("--tox-dir", default=os.environ.get("D2LRNN_TOX_DIR", str(ROOT / ".tox")),
                        help="where the backends' tox envs are (default: $D2LRNN_TOX_DIR or .tox)")
    parser.add_argument("--create-envs", action="store_true", help="make missing backend envs with tox")
    args = parser.parse_args(argv)

    sections = args.sections.split(",") if args.sections else all_sections()
    unknown = [s for s in sections if not (CHAPTERS / f"{s}.md").exists()]
    backends = args.backends.split(",")
    if unknown or not set(backends) <= set(BACKENDS):
        sys.exit(f"unknown section or backend: {unknown or backends}")
    order = all_sections()
    sections.sort(key=order.index)
    out = pathlib.Path(args.out).resolve()
    work = out / ".build"
    ensure_envs(args.tox_dir, backends, args.create_envs)
    executed = execute_missing(sections, backends, not args.full, work / "executed", args.tox_dir)
    src = work / "src"
    if _selection(src) != {"sections": sections, "backends": backends, "quick": not args.full}:
        clean(out, keep=work / "executed")  # another selection: no page of the last one stays behind
    write_sources(src, executed, backends, not args.full)
    sphinx(src, out, work / "doctrees")
    copy_mathjax(out / "_static")
    shown = out.relative_to(pathlib.Path.cwd()) if out.is_relative_to(pathlib.Path.cwd()) else out
    print(f"site built: {out}/index.html (serve it with: python -m http.server -d {shown})")


if __name__ == "__main__":
    main()
