"""Text corpora of the decoder task, read from the staged files (docs/tasks.md#decoder_lm).

Every corpus is a list of :class:`Document`: ``text`` is what the model reads and ``words``
the whitespace word count of the original document (used by word perplexity).

- NLTK mix (training corpus): Brown (tags stripped), movie reviews, ABC, State of the Union,
  webtext, inaugural. A document is one file, or a run of 50 consecutive non-empty lines for
  ABC and webtext. Split by document: ``bucket = int(sha256("corpus/member#chunk"), 16) % 100``;
  buckets 0-1 test, 2-3 validation, the rest train.
- Tiny Shakespeare (smoke): first 90% of the characters train, last 10% held out.
- Wikipedia (WikiExtractor ``<doc>`` blocks; first line the title, dropped; bodies with at
  least 50 words), WikiText-2 test (62 articles, lm-eval ``wikitext_detokenizer``), C4 (one
  document per line).
"""
from __future__ import annotations

import hashlib
import re
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .files import data_path

NLTK_CORPORA = ("brown", "movie_reviews", "abc", "state_union", "webtext", "inaugural")
LINE_CHUNKED = {"abc", "webtext"}
LINES_PER_CHUNK = 50
SKIPPED_MEMBERS = {"README", "CONTENTS", "cats.txt"}
SPLIT_BUCKETS = {"test": range(0, 2), "validation": range(2, 4), "train": range(4, 100)}
MIN_WIKIPEDIA_WORDS = 50


@dataclass(frozen=True)
class Document:
    """One document: ``doc_id`` is stable (``corpus/member#chunk`` for the NLTK mix).

    ``words`` and ``bytes`` are the denominators of word and byte perplexity: those of ``text``
    itself, except for WikiText where lm-eval takes both from the page before detokenization.
    """

    doc_id: str
    text: str
    words: int
    bytes: int


def word_count(text: str) -> int:
    return len(text.split())


def document(doc_id: str, text: str) -> Document:
    return Document(doc_id, text, word_count(text), len(text.encode("utf-8")))


def decode_text(raw: bytes) -> str:
    """UTF-8, falling back to cp1252 with replacement for the files that are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def brown_detag(text: str) -> str:
    """Brown's ``word/tag`` tokens to words, one sentence per line; the quote tokens (two
    back-ticks, two apostrophes) become ``"``."""
    lines = []
    for line in text.splitlines():
        words = [tok.rsplit("/", 1)[0] for tok in line.split()]
        if words:
            lines.append(" ".join('"' if w in ("``", "''") else w for w in words))
    return "\n".join(lines)


def nltk_documents(corpus: str) -> list[Document]:
    """The documents of one NLTK corpus, in zip order."""
    if corpus not in NLTK_CORPORA:
        raise ValueError(f"unknown NLTK corpus {corpus!r}; known: {', '.join(NLTK_CORPORA)}")
    return list(_nltk_documents(corpus, data_path(f"nltk/{corpus}.zip")))


@lru_cache(maxsize=None)
def _nltk_documents(corpus: str, path: Path) -> tuple[Document, ...]:
    docs = []
    with zipfile.ZipFile(path) as zf:
        for member in zf.namelist():
            if member.endswith("/") or member.rsplit("/", 1)[-1] in SKIPPED_MEMBERS:
                continue
            text = decode_text(zf.read(member))
            if corpus == "brown":
                text = brown_detag(text)
            if corpus in LINE_CHUNKED:
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                chunks = ["\n".join(lines[i:i + LINES_PER_CHUNK])
                          for i in range(0, len(lines), LINES_PER_CHUNK)]
            else:
                chunks = [text.strip()]
            for i, chunk in enumerate(chunks):
                if chunk:
                    docs.append(document(f"{member}#{i}", chunk))
    return tuple(docs)


def split_of(doc_id: str) -> str:
    """``train``, ``validation`` or ``test`` from the sha256 bucket of the document id."""
    bucket = int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest(), 16) % 100
    return next(name for name, buckets in SPLIT_BUCKETS.items() if bucket in buckets)


def nltk_mix(split: str) -> list[Document]:
    """Documents of the NLTK mix in ``split`` (corpora in a fixed order, zip order within)."""
    if split not in SPLIT_BUCKETS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLIT_BUCKETS)}")
    return [d for c in NLTK_CORPORA for d in nltk_documents(c) if split_of(d.doc_id) == split]


NLTK_SOURCES = tuple(f"nltk/{c}.zip" for c in NLTK_CORPORA)
SHAKESPEARE_SOURCE = "text/tinyshakespeare.txt"
SHAKESPEARE_TRAIN_FRACTION = 0.9


def tinyshakespeare(split: str) -> list[Document]:
    """One document: the first 90% of the characters (``train``) or the last 10% (``test``)."""
    text = data_path(SHAKESPEARE_SOURCE).read_text(encoding="utf-8")
    cut = int(len(text) * SHAKESPEARE_TRAIN_FRACTION)
    if split == "train":
        part = text[:cut]
    elif split in ("test", "validation"):
        part = text[cut:]
    else:
        raise ValueError(f"unknown split {split!r}; use train, validation or test")
    return [document(f"tinyshakespeare#{split}", part)]


TRAINING_CORPORA = {"nltk_mix": (nltk_mix, NLTK_SOURCES),
                    "tinyshakespeare": (tinyshakespeare, (SHAKESPEARE_SOURCE,))}


def training_corpus(name: str, split: str) -> list[Document]:
    if name not in TRAINING_CORPORA:
        raise ValueError(f"unknown training corpus {name!r}; known: {', '.join(TRAINING_CORPORA)}")
    return TRAINING_CORPORA[name][0](split)


WIKIPEDIA_SOURCE = "text/wikipedia_en.utf8"
WIKITEXT_SOURCE = "text/wikitext2_test.tokens"
C4_SOURCE = "text/c4_en_sample.utf8"
_DOC_RE = re.compile(r"<doc [^>]*>\n(.*?)</doc>", re.S)
_WIKITEXT_TITLE = re.compile(r"^ = [^=].*[^=] = $")


def wikipedia() -> list[Document]:
    """Article bodies (title line dropped) with at least 50 words: 614 documents, 277,789 words."""
    text = data_path(WIKIPEDIA_SOURCE).read_text(encoding="utf-8")
    docs = []
    for i, block in enumerate(_DOC_RE.findall(text)):
        body = block.split("\n", 1)[1].strip() if "\n" in block else ""
        if word_count(body) >= MIN_WIKIPEDIA_WORDS:
            docs.append(document(f"wikipedia#{i}", body))
    return docs


def wikitext_detokenizer(string: str) -> str:
    """lm-evaluation-harness 0.4 ``wikitext_detokenizer`` (tasks/wikitext/preprocess_wikitext.py)."""
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    string = string.replace(" @-@ ", "-")
    string = string.replace(" @,@ ", ",")
    string = string.replace(" @.@ ", ".")
    string = string.replace(" : ", ": ")
    string = string.replace(" ; ", "; ")
    string = string.replace(" . ", ". ")
    string = string.replace(" ! ", "! ")
    string = string.replace(" ? ", "? ")
    string = string.replace(" , ", ", ")
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    string = string.replace(" 's", "'s")
    return string


def wikitext_words(page: str) -> int:
    """lm-eval's word count of a WikiText page, taken before detokenization:
    ``len(re.split(r"\\s+", page))`` (leading and trailing whitespace count as empty words)."""
    return len(re.split(r"\s+", page))


def wikitext_pages() -> list[str]:
    """The 62 articles of the tokenized WikiText-2 test file, each from its `` = Title = `` line."""
    lines = data_path(WIKITEXT_SOURCE).read_text(encoding="utf-8").splitlines(keepends=True)
    pages: list[list[str]] = []
    for line in lines:
        if _WIKITEXT_TITLE.match(line.rstrip("\n")):
            pages.append([])
        if pages:
            pages[-1].append(line)
    return ["".join(p) for p in pages]


def wikitext() -> list[Document]:
    """Detokenized WikiText-2 test articles; words and bytes counted on the page before
    detokenization, as lm-eval's ``process_results`` does."""
    return [Document(f"wikitext#{i}", wikitext_detokenizer(p), wikitext_words(p),
                     len(p.encode("utf-8"))) for i, p in enumerate(wikitext_pages())]


def c4() -> list[Document]:
    """One document per non-empty line: 118 documents, 53,603 words."""
    text = data_path(C4_SOURCE).read_text(encoding="utf-8")
    return [document(f"c4#{i}", line)
            for i, line in enumerate(ln for ln in text.split("\n") if ln.strip())]


EVAL_CORPORA = {"wikipedia": (wikipedia, (WIKIPEDIA_SOURCE,)),
                "wikitext": (wikitext, (WIKITEXT_SOURCE,)),
                "c4": (c4, (C4_SOURCE,))}
