"""Pure-numpy reader and writer for the safetensors format.

seqtrain writes its weights as safetensors; this module reads and writes them without the
`safetensors` pip package, so the PyTorch mirror works on any machine with numpy (torch 1.13
and 2.x alike). Layout: an 8-byte little-endian header length N, N bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``,
then the tensor bytes (little-endian, C order, offsets counted from the end of the header).

The reader enforces the same rules as seqtrain's C++ reader (src/io/safetensors.cpp) and
raises ValueError naming the file and tensor. BF16 has no numpy dtype: load_file widens it to
float32 (exactly), and save_file writes BF16 only for torch.bfloat16 tensors.
Writes are atomic: a temporary file is written, fsynced and renamed over the target.
"""

import json
import os

import numpy as np

__all__ = ["load_file", "read_file", "save_file"]

_MAX_HEADER = 100_000_000
_METADATA = "__metadata__"

# name -> numpy dtype; BF16 is stored as raw uint16 bits and widened on load.
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# (numpy kind, itemsize) -> name, so either byte order maps to the same safetensors dtype.
_BY_KIND = {("f", 8): "F64", ("f", 4): "F32", ("f", 2): "F16", ("i", 8): "I64", ("i", 4): "I32",
            ("i", 2): "I16", ("i", 1): "I8", ("u", 1): "U8", ("b", 1): "BOOL"}


def _fail(path, msg):
    raise ValueError(f"{path}: {msg}")


def _no_duplicates(path):
    # json.loads keeps the last of two equal keys; in a header that hides a tensor, so refuse.
    def hook(pairs):
        seen = {}
        for k, v in pairs:
            if k in seen:
                _fail(path, f"key '{k}' appears twice in the header; each name must be unique")
            seen[k] = v
        return seen
    return hook


def _is_uint(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def read_file(path):
    """Returns (tensors, metadata): dict name -> np.ndarray in file order, dict str -> str."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        _fail(path, f"file is {len(blob)} bytes, shorter than the 8-byte header length; not a safetensors file")
    n = int.from_bytes(blob[:8], "little")
    if n > _MAX_HEADER:
        _fail(path, f"header length {n} exceeds the format's limit of {_MAX_HEADER} bytes")
    if n > len(blob) - 8:
        _fail(path, f"header length {n} is larger than the {len(blob) - 8} bytes after it; the file is truncated")
    text = blob[8:8 + n]
    if not text.startswith(b"{"):
        _fail(path, "header does not start with '{'; not a safetensors file")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(path, f"header is not valid JSON: {e}")

    data = memoryview(blob)[8 + n:]
    metadata = header.pop(_METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        _fail(path, '"__metadata__" must be an object of string values')

    entries = []
    for name, info in header.items():
        if not isinstance(info, dict):
            _fail(path, f"header entry for tensor '{name}' is not an object")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in info:
                _fail(path, f"tensor '{name}' has no \"{key}\" in the header")
        dtype = _DTYPES.get(info["dtype"]) if isinstance(info["dtype"], str) else None
        if dtype is None:
            _fail(path, f"tensor '{name}' has unknown dtype {info['dtype']!r}")
        shape = info["shape"]
        if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
            _fail(path, f"tensor '{name}' has \"shape\" {shape!r}; expected non-negative integers")
        offs = info["data_offsets"]
        if not isinstance(offs, list) or len(offs) != 2 or not all(_is_uint(o) for o in offs) or offs[0] > offs[1]:
            _fail(path, f"tensor '{name}' has \"data_offsets\" {offs!r}; expected [begin, end], begin <= end")
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=object))  # python ints: no overflow
        if offs[1] - offs[0] != nbytes:
            _fail(path, f"tensor '{name}' spans {offs[1] - offs[0]} bytes but shape {shape} of "
                        f"{info['dtype']} needs {nbytes}")
        if offs[1] > len(data):
            _fail(path, f"tensor '{name}' ends at {offs[1]}, past the {len(data)} data bytes; the file is truncated")
        entries.append((offs[0], offs[1], name, info["dtype"], shape))

    entries.sort(key=lambda e: (e[0], e[1]))
    expected = 0
    for begin, end, name, _, _ in entries:
        if begin != expected:
            _fail(path, f"tensor '{name}' starts at {begin} but the previous data ends at {expected}; "
                        "tensors must be contiguous without gaps or overlaps")
        expected = end
    if expected != len(data):
        _fail(path, f"the file has {len(data) - expected} bytes after the last tensor")

    tensors = {}
    for begin, end, name, dt, shape in entries:
        arr = np.frombuffer(data[begin:end], dtype=_DTYPES[dt]).reshape(shape).copy()
        if dt == "BF16":  # bf16 is the top half of an f32, so widening is exact
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = arr
    return tensors, dict(metadata)


def load_file(path):
    """Returns dict name -> np.ndarray (BF16 widened to float32)."""
    return read_file(path)[0]


def _to_bytes(name, value):
    """(dtype name, shape, bytes) for a numpy array or a torch tensor."""
    if hasattr(value, "detach"):  # torch.Tensor, imported lazily so numpy-only users need no torch
        import torch
        t = value.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return "BF16", list(t.shape), t.view(torch.int16).numpy().astype("<i2").tobytes()
        value = t.numpy()
    arr = np.asarray(value)  # not ascontiguousarray: numpy 1.x turns 0-d arrays into shape (1,)
    dt = _BY_KIND.get((arr.dtype.kind, arr.dtype.itemsize))
    if dt is None:
        raise ValueError(f"tensor '{name}' has dtype {arr.dtype}, which safetensors cannot store")
    return dt, list(arr.shape), arr.astype(_DTYPES[dt], copy=False).tobytes(order="C")


def save_file(tensors, path, metadata=None):
    """Writes dict name -> array (numpy or torch) atomically, in the dict's order."""
    path = os.fspath(path)
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError(f"{path}: metadata keys and values must be strings")
        header[_METADATA] = dict(metadata)
    chunks, offset = [], 0
    for name, value in tensors.items():
        if name == _METADATA:
            raise ValueError(f"{path}: '{_METADATA}' is reserved and cannot name a tensor")
        dt, shape, raw = _to_bytes(name, value)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)  # data 8-byte aligned, like seqtrain's writer

    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(text).to_bytes(8, "little"))
            f.write(text)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dfd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename has happened
    finally:
        os.close(dfd)
