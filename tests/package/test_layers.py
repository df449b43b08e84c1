"""The package's architecture, read from its source: every module imports only from the layers below its
own (or from its own folder), never from the package faces (``d2lrnn/__init__.py``, and ``d2lrnn/zh/``: the
same face with the backend in the import line), and no chain of imports comes back to where it started.

The layers, bottom up (units in parentheses may import each other; the others of a layer may not)::

    (errors, checks, keys, _version)  what every layer may use
    (backends, ops)                   the shim: one module per framework, the contract declared once
    data | models                     corpora and iterators; cells, the stacker, native-layer adapters
    training                          one loop with hooks, optimizers, checkpoints, run folders
    lm | seq2seq                      the two tasks
    book | cli                        the book's names and call forms; the command line

Imports inside functions count too: a lazy import hides a cycle, it does not remove it.
"""

import ast
import pathlib

import pytest

import d2lrnn

# The package's source, parsed: the same files in every env, whatever the backend.
pytestmark = pytest.mark.once

PACKAGE = pathlib.Path(d2lrnn.__file__).resolve().parent
LAYERS = [[("errors", "checks", "keys", "_version")], [("backends", "ops")], [("data",), ("models",)],
          [("training",)], [("lm",), ("seq2seq",)], [("book",), ("cli",)]]
LEVEL = {unit: level for level, groups in enumerate(LAYERS) for group in groups for unit in group}
GROUP = {unit: group for groups in LAYERS for group in groups for unit in group}
# the package faces (and what the faces with the framework in the import line share): they may import
# anything, and nothing imports them
FACE = ("__init__", "__main__", "_pinning", "zh", "en")


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name):
    """Whether the dotted ``name`` is a module or package of d2lrnn (not an attribute of one)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path):
    """The d2lrnn modules that the file ``path`` imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names if alias.name.split(".")[0] == "d2lrnn"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "d2lrnn":
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                targets.add(child if is_module(child) else target)
    return targets


def unit_of(name):
    """The top-level module or folder of d2lrnn that ``name`` belongs to ('' for the face)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def graph():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {t for t in imports_of(path) if t != name} for name, path in modules.items()}


def test_every_unit_of_the_package_has_a_layer():
    units = {unit_of(name) for name in graph()} - {"", *FACE}
    assert units <= set(LEVEL), f"modules outside the layer table: {sorted(units - set(LEVEL))}"


def test_no_module_imports_a_package_face():
    wrong = [f"{name} imports {target}, a face of the package" for name, targets in graph().items()
             if unit_of(name) not in ("", *FACE) for target in targets
             if target == "d2lrnn" or unit_of(target) in FACE]
    assert not wrong, "\n".join(wrong)


def test_every_import_goes_down_the_layers():
    wrong = []
    for name, targets in graph().items():
        unit = unit_of(name)
        if unit not in LEVEL:  # the face, or a module the first test reports
            continue
        for target in targets:
            other = unit_of(target)
            if other in LEVEL and LEVEL[other] >= LEVEL[unit] and other not in GROUP[unit]:
                wrong.append(f"{name} (layer {LEVEL[unit]}) imports {target} (layer {LEVEL[other]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycle():
    edges, state, cycles = graph(), {}, []

    def visit(name, path):
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
