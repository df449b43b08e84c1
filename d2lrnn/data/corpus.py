"""Reading a text corpus, cutting it into tokens, and turning tokens into indices.

The bundled corpora live next to this module; any UTF-8 text file can be used in their
place by passing its path. English text is cleaned the book's way (every run of
non-letters becomes one space, then strip and lowercase); text that is mostly Chinese,
Japanese or Korean keeps every character except the line breaks, and each character is
a token. With ``raw=True`` (:func:`load_corpus`) nothing is cleaned: every character of the file is
a token, case, punctuation and line breaks included.
"""

import codecs
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
# Kana, Hangul syllables and every block of CJK ideographs: the unified ideographs, extension A, the
# compatibility ideographs, and beyond the Basic Multilingual Plane extensions B to F and I, the
# compatibility supplement (U+20000-U+2FA1F) and extensions G and H (U+30000-U+323AF): the scripts
# written without spaces between words.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
                  "\U00020000-\U0002fa1f\U00030000-\U000323af]")
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


def read_utf8(path, what="corpus file"):
    """The text of the file ``path`` decoded as UTF-8 (a byte-order mark is dropped), or one
    DataError line naming ``what`` it is and the fix."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{what} '{path}' cannot be read ({err.strerror}): check its permissions") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{what} '{path}' is not UTF-8 text (byte 0x{data[err.start]:02x} at "
                        f"offset {err.start}): re-save it as UTF-8") from None


def read_text(name_or_path):
    """The whole text of a corpus, decoded as UTF-8 (a byte-order mark is dropped)."""
    path = corpus_path(name_or_path)
    text = read_utf8(path)
    if not text.strip():
        raise DataError(f"corpus file '{path}' is empty: give a file that holds some text")
    return text


def is_cjk(text):
    """Whether most non-space characters of ``text`` are Chinese, Japanese or Korean."""
    head = text[:200_000]
    if head.isascii():  # no CJK character is ASCII: one C pass instead of two regex passes
        return False
    sample = _SPACE.sub("", head)
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


#: Characters per slice when a whole text is converted piece by piece (bounded temporary memory).
CHUNK = 1 << 20


def _ordered_vocab(counts, first_seen):
    """A :class:`Vocab` from ``{token: count}``, ties broken by first appearance (``{token: position}``)."""
    order = sorted(counts, key=first_seen.__getitem__)
    return Vocab.from_counter(collections.Counter({token: counts[token] for token in order}))


def _char_indices(text):
    """The vocabulary of the characters of ``text`` and ``text`` as an index array (:func:`index_dtype`).

    ``Counter`` over a string runs in C and keeps first-appearance order (the tie rule of
    :class:`Vocab`); the indices come from a code-point lookup table, not a Python loop, applied
    :data:`CHUNK` characters at a time so the 4-byte code points of the whole text never exist at once.
    """
    vocab = Vocab.from_counter(collections.Counter(text))
    chars = vocab.idx_to_token[1:]
    lookup = np.zeros(max(map(ord, chars), default=0) + 1, dtype=index_dtype(len(vocab)))
    lookup[[ord(c) for c in chars]] = np.arange(1, len(chars) + 1)
    indices = np.empty(len(text), dtype=lookup.dtype)
    for start in range(0, len(text), CHUNK):
        codes = np.frombuffer(text[start:start + CHUNK].encode("utf-32-le"), dtype=np.uint32)
        np.take(lookup, codes, out=indices[start:start + len(codes)])
    return indices, vocab


def _byte_indices(data):
    """Vocabulary and indices of a byte string whose tokens are its bytes (cleaned English text).

    Counting and indexing run on the bytes in slices of :data:`CHUNK`: memory is the text's bytes
    plus one byte per character for the indices.
    """
    codes = np.frombuffer(data, dtype=np.uint8)
    counts = np.zeros(256, dtype=np.int64)
    for start in range(0, len(codes), CHUNK):
        counts += np.bincount(codes[start:start + CHUNK], minlength=256)
    present = np.flatnonzero(counts)
    vocab = _ordered_vocab({chr(b): int(counts[b]) for b in present},
                           {chr(b): data.find(bytes([b])) for b in present})
    lookup = np.zeros(256, dtype=index_dtype(len(vocab)))
    lookup[present] = [vocab.token_to_idx[chr(b)] for b in present]
    indices = np.empty(len(codes), dtype=lookup.dtype)
    for start in range(0, len(codes), CHUNK):
        np.take(lookup, codes[start:start + CHUNK], out=indices[start:start + CHUNK])
    return indices, vocab


# The cleaning as a byte map: letters lowercased, CR and LF line breaks, every other byte a space (the
# UTF-8 bytes of a non-ASCII character are all non-letters, as the character is).
_CLEAN_BYTES = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 else 10 if c in (10, 13) else 32
                     for c in range(256))
_SPACE_BYTE, _TWO_LETTERS = 32, re.compile(rb"[A-Za-z]{2}")


def _pieces(data, size):
    """``data`` cut into pieces of about ``size`` bytes, each cut between two letters, where the
    cleaning of either side does not depend on the other (the last piece takes what is left)."""
    start = 0
    while start < len(data):
        pair = _TWO_LETTERS.search(data, start + size) if start + size < len(data) else None
        stop = pair.start() + 1 if pair else len(data)
        yield data[start:stop]
        start = stop


def _clean_piece(piece):
    """One piece of :func:`_english_chars`: the letters, and one space where a run of non-letters
    separates two letters of the same line."""
    x = np.frombuffer(piece.translate(_CLEAN_BYTES), dtype=np.uint8)
    letter = x > _SPACE_BYTE  # a-z; the rest is spaces (32) and line breaks (10)
    run_starts = np.flatnonzero((x[1:] == _SPACE_BYTE) & letter[:-1]) + 1  # a space right after a letter
    not_space = np.flatnonzero(x != _SPACE_BYTE)
    run_ends = np.searchsorted(not_space, run_starts)  # where each run of spaces stops
    inside = run_ends < len(not_space)
    keep = letter.copy()
    keep[run_starts[inside][letter[not_space[run_ends[inside]]]]] = True  # the run stops at a letter
    return x[keep].tobytes()


def _english_chars(data, piece_size=CHUNK // 4):
    """The book's cleaning of English text, lines joined, as ASCII bytes: the char-token stream.

    The same as joining the stripped lines of :func:`read_corpus` (each run of non-letters one
    space, then strip and lowercase), computed on the file's bytes a piece at a time with a byte
    map and NumPy: no Python object per line or per match, a few bytes of memory per character.
    """
    return b"".join(_clean_piece(piece) for piece in _pieces(data, piece_size))


def _read_bytes(path):
    """The file's bytes, checked to be UTF-8 (piece by piece), without a byte-order mark."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"corpus file '{path}' cannot be read ({err.strerror}): "
                        "check its permissions") from None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(data), CHUNK):
            decoder.decode(data[start:start + CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        read_text(path)  # its one-line error names the first bad byte
    return data[3:] if data.startswith(codecs.BOM_UTF8) else data


def _char_stream(name_or_path):
    """Indices and vocabulary of a corpus's characters, line breaks left out (see :func:`load_corpus`)."""
    path = corpus_path(name_or_path)
    data = _read_bytes(path)
    if is_cjk(data[:800_000].decode("utf-8", errors="ignore")):  # every character but the line breaks
        return _char_indices("".join(_split_lines(data.decode("utf-8"))))
    chars = _english_chars(data)
    if not chars and not data.decode("utf-8").strip():
        read_text(path)  # the file holds only white space: its one-line error
    del data
    return _byte_indices(chars)


def read_raw_text(name_or_path):
    """The text of a corpus exactly as the file holds it, the tokens of ``raw=True``: decoded as UTF-8,
    a leading byte-order mark dropped and CRLF / CR line breaks written as LF, nothing else changed."""
    path = corpus_path(name_or_path)
    text = _read_bytes(path).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _raw_stream(name_or_path):
    """Indices and vocabulary of every character of a corpus (see :func:`read_raw_text`)."""
    text = read_raw_text(name_or_path)
    if not text.strip():
        read_text(name_or_path)  # the file is empty or holds only white space: its one-line error
    return _char_indices(text)


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


def load_corpus(corpus="timemachine", token="char", max_tokens=-1, raw=False):
    """Token indices of a whole corpus and its vocabulary.

    The indices are an array of the smallest unsigned type that holds them (:func:`index_dtype`:
    one byte per character for an alphabet of up to 256 tokens); minibatches are int64.

    Lines are joined without a separator, as in the book, so with ``token='char'`` the
    stream has no line breaks. ``raw=True`` (characters only) skips the cleaning: every
    character of the file is a token, case, punctuation and line breaks kept (CRLF and CR become
    LF, a byte-order mark is dropped: :func:`read_raw_text`); Tiny Shakespeare then has 65
    characters, 66 tokens with ``<unk>``. The vocabulary is built on the full text;
    ``max_tokens > 0`` then keeps only the first ``max_tokens`` indices.
    """
    _check_token(token)
    _check_max_tokens(max_tokens)
    if raw and token != "char":
        raise DataError(f"raw=True keeps every character of the file as a token and has no {token!r} tokens: "
                        "use token='char' with raw=True, or raw=False for words")
    if raw:
        indices, vocab = _raw_stream(corpus)
    elif token == "char":
        indices, vocab = _char_stream(corpus)
    else:
        lines, cjk = _lines_and_script(corpus)
        if cjk:
            raise DataError(f"corpus {str(corpus)!r} is Chinese/Japanese/Korean text, which has no spaces "
                            "between words: use token='char'")
        indices, vocab = _word_indices(lines)
    if not len(indices):
        raise DataError(f"corpus {str(corpus)!r} has no {token} tokens after cleaning "
                        "(English text keeps only the letters A-Z): give a file with some text")
    if 0 < max_tokens < len(indices):
        indices = indices[:max_tokens].copy()  # a copy: the rest of the corpus is freed
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
