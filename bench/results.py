"""bench/RESULTS.md is written by more than one script: each owns named sections of it.

A section is the text between ``<!-- section:NAME -->`` and ``<!-- /section:NAME -->``. A script
replaces its own sections and keeps everyone else's: :func:`write_section` for one section,
:func:`other_sections` for a script (bench/run.py) that rewrites the rest of the file.
"""

import pathlib
import re

RESULTS = pathlib.Path(__file__).resolve().parent / "RESULTS.md"
_SECTION = re.compile(r"<!-- section:(?P<name>[\w.-]+) -->\n.*?<!-- /section:(?P=name) -->\n?", re.S)


def section(name, body):
    """``body`` wrapped in the markers of section ``name``."""
    return f"<!-- section:{name} -->\n{body.rstrip()}\n<!-- /section:{name} -->\n"


def sections(text):
    """``{name: the marked text}`` of every section in ``text``, in order."""
    return {m.group("name"): m.group(0) for m in _SECTION.finditer(text)}


def other_sections(path=RESULTS, mine=()):
    """The sections of ``path`` whose names are not in ``mine``, joined (empty if there are none)."""
    text = path.read_text() if path.exists() else ""
    kept = [block if block.endswith("\n") else block + "\n"
            for name, block in sections(text).items() if name not in mine]
    return "".join(kept)


def write_section(name, body, path=RESULTS):
    """Replace section ``name`` of ``path`` with ``body`` (appended at the end if it is new)."""
    text = path.read_text() if path.exists() else ""
    new = section(name, body)
    existing = sections(text).get(name)
    if existing is not None:
        text = text.replace(existing, new)
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + new
    path.write_text(text)
    return path
