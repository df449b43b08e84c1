"""The book's data hub (``d2l.DATA_HUB``, ``d2l.download``, ``d2l.download_extract``), served from the
files bundled with d2lrnn: nothing is downloaded.

The book's cells register a dataset in ``DATA_HUB`` (a name, a URL and a SHA-1) and ask for its local
path with ``download(name)`` or, for an archive, the folder it unpacks to with ``download_extract(name)``.
Here the names of the bundled datasets, ``time_machine`` and ``fra-eng``, give the bundled files (the
same text: ``timemachine.txt`` is the file the book's hub serves, byte for byte), whatever URL a cell
registers; any other name is a one-line error that says how to read a file of one's own.
"""

import pathlib

from ..data.corpus import corpus_path
from ..data.translation import pairs_path
from ..errors import DataError

#: Stands where the book's cells put the data server's address: ``d2l.DATA_URL + 'timemachine.txt'``.
DATA_URL = "bundled-with-d2lrnn/"

#: name -> (where the book downloads it from, its SHA-1): what the book's cells register. The bundled
#: names are served from the package whatever is registered under them.
DATA_HUB = {
    "time_machine": (DATA_URL + "timemachine.txt", None),
    "fra-eng": (DATA_URL + "fra-eng.zip", None),
}


def _bundled(name):
    if name == "time_machine":
        return corpus_path("timemachine")
    if name == "fra-eng":
        return pairs_path()
    known = ", ".join(sorted(set(DATA_HUB) | {"time_machine", "fra-eng"}))
    raise DataError(f"d2lrnn downloads nothing and bundles no dataset {name!r} (it bundles time_machine and "
                    f"fra-eng; registered: {known}): read a file of your own with open(path), "
                    "d2l.load_corpus(path) or d2l.read_data_nmt(path)")


def download(name, cache_dir=None):
    """The local path of dataset ``name``: the bundled file (``cache_dir``, where the book keeps its
    downloads, is not used: nothing is fetched or written)."""
    return str(_bundled(name))


def download_extract(name, folder=None):
    """The folder that dataset ``name``'s archive unpacks to: for ``fra-eng``, the bundled folder with
    ``fra.txt`` (or the folder of the full ``fra.txt`` named by ``$D2LRNN_FRA_TXT``); for
    ``time_machine`` (a plain file), the folder holding it."""
    return str(pathlib.Path(_bundled(name)).parent)
