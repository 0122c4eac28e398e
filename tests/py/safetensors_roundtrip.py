"""Reads the every-dtype file that tests/test_python_mirror.cpp writes with seqtrain's C++ writer,
checks each value with the pure-numpy reader, and writes everything but BF16 (which numpy cannot
hold) back with the numpy writer, so the C++ side can compare the two writers byte for byte.
Usage: safetensors_roundtrip.py IN OUT. Exit 0 on success.
"""

import sys

import numpy as np

from seqtrain_torch import read_file, save_file

# Must match SafetensorsPythonMirror.NumpyReaderAndWriterAgreeWithCpp.
EXPECTED = {
    "f64": np.array([1 / 3, -1e300], dtype=np.float64),
    "f32": np.array([[1, -2, 3.5], [0, 1e-30, -7]], dtype=np.float32),
    "f16": np.array([1.0, -(2.0 ** -24), np.inf], dtype=np.float16),
    "bf16": np.array([1.0, -3.0], dtype=np.float32),  # widened by the reader
    "i64": np.array([-1, 2 ** 63 - 1], dtype=np.int64),
    "i32": np.array([42], dtype=np.int32),
    "i16": np.array([-3, 3], dtype=np.int16),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "u8": np.array([0, 255], dtype=np.uint8),
    "bool": np.array([False, True]),
    "scalar": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
}


def main(src, dst):
    tensors, meta = read_file(src)
    if list(tensors) != list(EXPECTED):
        print(f"names/order {list(tensors)} != {list(EXPECTED)}", file=sys.stderr)
        return 1
    for name, want in EXPECTED.items():
        got = tensors[name]
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            print(f"{name}: got {got!r} ({got.dtype}), expected {want!r} ({want.dtype})", file=sys.stderr)
            return 1
    if meta != {"a": "1", "b": "two"}:
        print(f"metadata {meta}", file=sys.stderr)
        return 1
    save_file({k: v for k, v in tensors.items() if k != "bf16"}, dst, metadata=meta)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
