"""One MyST page per section from its notebook executed on each backend.

The prose and the code come once (every backend ran the same notebook); each code cell's outputs
follow in a tab set with one tab per backend, all tab sets of a page synchronised (choosing torch
once shows torch everywhere). A cell whose printed text differs beyond printing precision
(``compare.agree``) gets a mark and a table of its differing lines, one column per backend.
"""

import base64
import re

import compare

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_IMAGE_TYPES = {"image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpg"}


def _fence(text, info="text"):
    """A code fence long enough not to be closed by backticks inside ``text``."""
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}\n"


def _merged(outputs):
    """The outputs with consecutive writes to one stream joined (kernels split them at random points)."""
    merged = []
    for out in outputs:
        if (out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1]["name"] == out["name"]):
            merged[-1] = {**merged[-1], "text": merged[-1]["text"] + out["text"]}
        else:
            merged.append(dict(out))
    return merged


def printed_text(outputs):
    """What a cell printed, as text: streams, plain-text results, markdown, tracebacks; no images."""
    parts = []
    for out in _merged(outputs):
        kind = out.get("output_type")
        if kind == "stream":
            parts.append(out["text"])
        elif kind == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        elif "image/svg+xml" not in out.get("data", {}) and "image/png" not in out.get("data", {}):
            data = out.get("data", {})
            parts.append(data.get("text/markdown") or data.get("text/plain", ""))
    return "\n".join(p.rstrip("\n") for p in parts)


def _output_blocks(outputs, image_name, alt):
    """MyST for one backend's outputs of one cell, and the images it refers to ({relative path: bytes})."""
    blocks, images = [], {}
    for out in _merged(outputs):
        kind, data = out.get("output_type"), out.get("data", {})
        if kind == "stream":
            cls = "output stderr" if out["name"] == "stderr" else "output"
            blocks.append(f"```{{code-block}} text\n:class: {cls}\n\n{out['text'].rstrip()}\n```\n"
                          if "```" not in out["text"] else _fence(out["text"]))
        elif kind == "error":
            blocks.append(_fence(_ANSI.sub("", "\n".join(out.get("traceback", []))), "text"))
        elif (mime := next((m for m in _IMAGE_TYPES if m in data), None)) is not None:
            raw = data[mime]
            payload = raw.encode() if mime == "image/svg+xml" else base64.b64decode(raw)
            rel = f"{image_name}-{len(images)}.{_IMAGE_TYPES[mime]}"
            images[rel] = payload
            blocks.append(f"```{{image}} /{rel}\n:alt: {alt}\n:class: output-plot\n:loading: lazy\n```\n")
        elif "text/markdown" in data:
            blocks.append(data["text/markdown"].rstrip() + "\n")
        elif "text/html" in data:
            blocks.append(f"```{{raw}} html\n{data['text/html'].rstrip()}\n```\n")
        elif "text/plain" in data:
            blocks.append(_fence(data["text/plain"]))
    return blocks, images


def _differences(texts):
    """A table of the lines that differ between backends: a row per backend, its lines one under another."""
    rows = compare.differing_lines(texts)
    if not rows:
        return ""

    def cell(line):
        line = line.strip().replace("`", "'").replace("|", "\\|")[:150]
        return f"`{line}`" if line else "(none)"

    table = ["| backend | what it printed there |", "| --- | --- |"]
    table += [f"| {b} | " + "<br>".join(cell(row[b]) for row in rows) + " |" for b in texts]
    return ("```{dropdown} The lines that differ, side by side\n:class-container: backend-diff\n\n"
            + "\n".join(table) + "\n```\n")


def code_cell(source, outputs, number, section, title):
    """MyST for one code cell: its source, then its outputs in one tab per backend (``outputs`` maps
    backend -> outputs). Returns (text, images)."""
    parts, images = [_fence(source, "python")], {}
    if not any(outputs.values()):
        return parts[0], images
    texts = {b: printed_text(o) for b, o in outputs.items()}
    failed = [b for b, o in outputs.items() if any(x.get("output_type") == "error" for x in o)]
    if failed:
        parts.append(f"{{bdg-danger}}`raised on {', '.join(failed)}`\n")
    elif len(outputs) > 1 and not compare.agree(texts):
        parts.append("{bdg-warning}`differs between backends`\n")
    parts.append("::::{tab-set}\n:sync-group: backend\n:class: backend-outputs\n")
    for backend, outs in outputs.items():
        alt = f"{title}: plot made by code cell {number} on the {backend} backend"
        blocks, imgs = _output_blocks(outs, f"outputs/{section}/{section}-{backend}-cell{number}", alt)
        images.update(imgs)
        body = "\n".join(blocks) if blocks else "*(no output)*\n"
        parts.append(f":::{{tab-item}} {backend}\n:sync: {backend}\n\n{body}\n:::\n")
    parts.append("::::\n")
    if not failed and len(outputs) > 1 and not compare.agree(texts):
        parts.append(_differences(texts))
    return "\n".join(parts), images


def section_page(section, notebooks, backends):
    """The page of ``section`` from {backend: executed notebook}: (MyST text, images, title)."""
    cells = notebooks[backends[0]].cells
    title = next((ln[2:].strip() for c in cells if c.cell_type == "markdown"
                  for ln in c.source.splitlines() if ln.startswith("# ")), section)
    parts, images, number = [], {}, 0
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            parts.append(cell.source.rstrip() + "\n")
        elif cell.cell_type == "code":
            number += 1
            outputs = {b: notebooks[b].cells[i].outputs for b in backends}
            text, imgs = code_cell(cell.source, outputs, number, section, title)
            parts.append(text)
            images.update(imgs)
    failed = [b for b in backends if notebooks[b].metadata.get("d2lrnn_site", {}).get("failed_cells")]
    if failed:
        note = f"A cell raised on {', '.join(failed)}; its tab shows the error."
        parts.insert(1, f"```{{warning}}\n{note}\n```\n")
    return "\n".join(parts), images, title


def chapters_index(sections, titles, backends, mode):
    """The chapters' landing page with their toctree."""
    toc = "\n".join(sections)
    return (f"# The chapters\n\nEach section is one notebook of `chapters/`, run on {len(backends)} "
            f"backends ({', '.join(backends)}) with the {mode}. Under every code cell a tab per backend "
            "shows what that backend printed and plotted; choosing a tab chooses it on the whole page. "
            "A cell marked {bdg-warning}`differs between backends` printed numbers that differ by more "
            "than their last printed digit; its differing lines are listed side by side below it.\n\n"
            f"```{{toctree}}\n:maxdepth: 1\n\n{toc}\n```\n")
