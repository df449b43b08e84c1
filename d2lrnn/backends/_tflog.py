"""TensorFlow's C++ log lines, filtered by ``TF_CPP_MIN_LOG_LEVEL`` (no TensorFlow import here, so
every env can test it): what :mod:`d2lrnn.backends.tensorflow` lets through while TensorFlow loads."""

import os
import re

#: The line absl prints before the messages it logs ahead of its own initialisation.
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_LOG_LINE = re.compile(r"([IWEF])\d{4} ")  # absl's prefix: severity (info, warning, error, fatal), mmdd


def log_level():
    """TF_CPP_MIN_LOG_LEVEL: the user's value, else 2 (set for TensorFlow to read too)."""
    try:
        return int(os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2"))
    except ValueError:
        return 0  # a value TensorFlow cannot read either: hide nothing


def _severity(line):
    match = _LOG_LINE.match(line)
    return "IWEF".index(match.group(1)) if match else None


def at_level(text, level):
    """The lines of ``text`` (written while TensorFlow loads) that the threshold ``level`` lets through.

    Log lines below ``level`` go. absl's preamble announces the log lines after it and goes when
    they all do. Anything else (not TensorFlow's log) stays.
    """
    # Read bottom-up: ``announced`` is the highest severity between this line and the next preamble.
    kept, announced = [], None
    for line in reversed(text.splitlines(keepends=True)):
        if line.startswith(_ABSL_PREAMBLE):
            severity, announced = announced or 0, None
        else:
            severity = _severity(line)
            if severity is not None and (announced is None or severity > announced):
                announced = severity
        if severity is None or severity >= level:
            kept.append(line)
    return "".join(reversed(kept))
