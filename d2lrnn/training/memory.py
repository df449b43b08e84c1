"""How much memory there is, and how much a model takes: checked before anything is allocated, so that a
setting or a checkpoint too large for the machine is one line, not an out-of-memory kill."""

import os

GB = 2**30


def physical_memory():
    """The machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def size_text(nbytes):
    """``nbytes`` for a message: ``1.5 GB``, ``35 MB``, ``1,088 bytes``."""
    if nbytes >= 0.1 * GB:
        return f"{nbytes / GB:.1f} GB"
    if nbytes >= 2**20:
        return f"{nbytes / 2**20:.0f} MB"
    return f"{nbytes:,} bytes"
