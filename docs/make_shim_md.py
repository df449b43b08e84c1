"""Write docs/shim.md, the shim's reference, from the contract d2lrnn/backends/_spec.py.

Run ``python docs/make_shim_md.py`` after changing the contract; tests/backends/test_shim.py fails
while docs/shim.md and the contract disagree.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / "d2lrnn" / "backends" / "_spec.py"
OUT = ROOT / "docs" / "shim.md"


def shim_reference():
    """The text of docs/shim.md: the contract's functions by group, each with its signature and docstring."""
    source = SPEC.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    parts = ["# The shim's functions\n",
             "Generated from `d2lrnn/backends/_spec.py` by `docs/make_shim_md.py`: every backend\n"
             "defines these functions with these signatures, and `d2l.<name>` (or `d2lrnn.ops.<name>`)\n"
             "calls the active backend's.\n"]
    groups = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        group = next(line for line in reversed(lines[:node.lineno - 1]) if line.startswith("# -- "))
        if group not in groups:  # the comment line that opens each group of functions
            groups.add(group)
            parts.append(f"## {group[5:].rstrip(' -')}\n")
        doc = ast.get_docstring(node)
        parts.append(f"### `{node.name}({ast.unparse(node.args)})`\n\n{doc}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    OUT.write_text(shim_reference(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
