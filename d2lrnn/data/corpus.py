"""Reading a text corpus, cutting it into tokens, and turning tokens into indices.

The bundled corpora live next to this module; any UTF-8 text file can be used in their
place by passing its path. English text is cleaned the book's way (every run of
non-letters becomes one space, then strip and lowercase); text that is mostly Chinese,
Japanese or Korean keeps every character except the line breaks, and each character is
a token.
"""

import collections
import functools
import os
import pathlib
import re

import numpy as np

from ..errors import DataError
from .vocab import Vocab

DATA_DIR = pathlib.Path(__file__).resolve().parent

#: Names of the bundled corpora, accepted wherever a corpus is asked for.
CORPORA = ("timemachine", "tinyshakespeare", "hongloumeng")

_FILES = {
    "timemachine": "timemachine.txt",
    "tinyshakespeare": "tinyshakespeare.txt",
    "hongloumeng": "hongloumeng-ch1-10.txt",
}

TOKEN_TYPES = ("char", "word")

_NON_LETTERS_OR_BREAK = re.compile("[^A-Za-z\n]+")
# Kana, CJK ideographs (with extension A and compatibility forms) and Hangul syllables:
# the scripts written without spaces between words.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_SPACE = re.compile(r"\s+")


def corpus_path(name_or_path):
    """The file behind a bundled corpus name (see :data:`CORPORA`) or a path to a UTF-8 text file."""
    if isinstance(name_or_path, str) and name_or_path in _FILES:
        return DATA_DIR / _FILES[name_or_path]
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise DataError(f"corpus must be one of {', '.join(CORPORA)} or the path of a UTF-8 text file, "
                        f"got {name_or_path!r}")
    path = pathlib.Path(name_or_path).expanduser()
    if path.is_file():
        return path
    text = str(name_or_path)
    if path.exists():
        raise DataError(f"corpus path '{text}' is not a file: pass a path to a UTF-8 text file")
    if "/" in text or "\\" in text or path.suffix:
        raise DataError(f"corpus file '{text}' does not exist: check the path, "
                        f"or use one of the bundled corpora {', '.join(CORPORA)}")
    raise DataError(f"unknown corpus {text!r}: choose one of {', '.join(CORPORA)}, "
                    "or a path to a UTF-8 text file")


def read_text(name_or_path):
    """The whole text of a corpus, decoded as UTF-8 (a byte-order mark is dropped)."""
    path = corpus_path(name_or_path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"corpus file '{path}' cannot be read ({err.strerror}): "
                        "check its permissions") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"corpus file '{path}' is not UTF-8 text (byte 0x{data[err.start]:02x} at "
                        f"offset {err.start}): re-save it as UTF-8") from None
    if not text.strip():
        raise DataError(f"corpus file '{path}' is empty: give a file that holds some text")
    return text


def is_cjk(text):
    """Whether most non-space characters of ``text`` are Chinese, Japanese or Korean."""
    sample = _SPACE.sub("", text[:200_000])
    return bool(sample) and len(_CJK.findall(sample)) > len(sample) / 2


def _split_lines(text):
    """Lines as ``readlines`` cuts them (LF, CRLF or CR ends a line), without the line breaks."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@functools.lru_cache(maxsize=8)
def _read_lines(path, mtime_ns, size):
    # Keyed on the file's mtime and size so an edited file is read again.
    text = read_text(path)
    if is_cjk(text):
        return tuple(_split_lines(text)), True
    # One regex pass over the whole text (line breaks kept) is the book's per-line rule, faster.
    cleaned = _NON_LETTERS_OR_BREAK.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")).lower()
    return tuple(line.strip() for line in _split_lines(cleaned)), False


def _lines_and_script(name_or_path):
    path = corpus_path(name_or_path).resolve()
    stat = path.stat()
    return _read_lines(str(path), stat.st_mtime_ns, stat.st_size)


def read_corpus(name_or_path):
    """The lines of a corpus after cleaning (the book's rule for English, line breaks only for CJK)."""
    return list(_lines_and_script(name_or_path)[0])


def read_time_machine():
    """The lines of *The Time Machine*, cleaned as the book does: 3,221 of them."""
    return read_corpus("timemachine")


def _check_token(token):
    if token not in TOKEN_TYPES:
        raise DataError(f"unknown token type {token!r}: use 'char' or 'word'")


def tokenize(lines, token="word"):
    """Split each line into tokens: words (split on whitespace) or characters."""
    _check_token(token)
    if token == "word":
        return [line.split() for line in lines]
    return [list(line) for line in lines]


def index_dtype(vocab_size):
    """The smallest unsigned integer type that holds every index of a vocabulary (uint8 up to 256
    tokens): a corpus of n characters is then n bytes, not 8n."""
    return np.min_scalar_type(max(int(vocab_size) - 1, 0))


def compact(tokens):
    """``tokens`` as a flat array of indices in the smallest unsigned type that holds them (no copy
    when it already is one); anything that is not an integer array is converted to int64 first."""
    t = np.asarray(tokens)
    if t.dtype.kind not in "iu":
        t = np.asarray(tokens, dtype=np.int64)
    t = t.reshape(-1)
    if not len(t) or t.min() < 0:
        return t.astype(np.int64, copy=False)
    return t.astype(index_dtype(int(t.max()) + 1), copy=False)


def _char_indices(text):
    """The vocabulary of the characters of ``text`` and ``text`` as an index array (:func:`index_dtype`).

    ``Counter`` over a string runs in C and keeps first-appearance order (the tie rule of
    :class:`Vocab`); the indices come from a code-point lookup table, not a Python loop.
    """
    vocab = Vocab.from_counter(collections.Counter(text))
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    lookup = np.zeros(int(codes.max()) + 1 if len(codes) else 1, dtype=index_dtype(len(vocab)))
    chars = vocab.idx_to_token[1:]
    lookup[[ord(c) for c in chars]] = np.arange(1, len(chars) + 1)
    return lookup[codes], vocab


def _word_indices(lines):
    words = " ".join(lines).split()
    vocab = Vocab.from_counter(collections.Counter(words))
    index = vocab.token_to_idx
    return np.fromiter(map(index.__getitem__, words), dtype=index_dtype(len(vocab)), count=len(words)), vocab


def _check_max_tokens(max_tokens):
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or (
            max_tokens == 0 or max_tokens < -1):
        raise DataError(f"max_tokens is {max_tokens!r}: use -1 (the whole corpus) or a positive number of "
                        "tokens (--max-tokens)")


def load_corpus(corpus="timemachine", token="char", max_tokens=-1):
    """Token indices of a whole corpus and its vocabulary.

    The indices are an array of the smallest unsigned type that holds them (:func:`index_dtype`:
    one byte per character for an alphabet of up to 256 tokens); minibatches are int64.

    Lines are joined without a separator, as in the book, so with ``token='char'`` the
    stream has no line breaks. The vocabulary is built on the full text; ``max_tokens > 0``
    then keeps only the first ``max_tokens`` indices.
    """
    _check_token(token)
    _check_max_tokens(max_tokens)
    lines, cjk = _lines_and_script(corpus)
    if token == "word" and cjk:
        raise DataError(f"corpus {str(corpus)!r} is Chinese/Japanese/Korean text, which has no spaces "
                        "between words: use token='char'")
    indices, vocab = _char_indices("".join(lines)) if token == "char" else _word_indices(lines)
    if not len(indices):
        raise DataError(f"corpus {str(corpus)!r} has no {token} tokens after cleaning "
                        "(English text keeps only the letters A-Z): give a file with some text")
    if max_tokens > 0:
        indices = indices[:max_tokens]
    return indices, vocab


def load_corpus_time_machine(max_tokens=-1):
    """The book's function: character indices of *The Time Machine* (a list) and the vocabulary."""
    indices, vocab = load_corpus("timemachine", "char", max_tokens)
    return indices.tolist(), vocab


def train_val_split(corpus, val_fraction=0.1):
    """Split a token stream in two: the last ``round(len * val_fraction)`` tokens are held out.

    The held-out part is contiguous, so it can be read in order to measure perplexity.
    """
    if not 0 <= val_fraction < 1:
        raise DataError(f"val_fraction is {val_fraction}, outside [0, 1): "
                        "use e.g. 0.1 to hold out the last tenth of the corpus")
    num_val = int(round(len(corpus) * val_fraction))
    cut = len(corpus) - num_val
    return corpus[:cut], corpus[cut:]
