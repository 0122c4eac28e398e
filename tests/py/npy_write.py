"""Writes .npy files with numpy for tests/test_npy.cpp: every supported dtype in format
versions 1.0, 2.0 and 3.0 and several shapes, plus arrays the reader must refuse.

Element i (C order) of a supported file is, by dtype kind (so the C++ side can check it
without numpy): signed (i % 100) - 50, unsigned i % 200, float i * 0.25 - 3, bool i % 3 == 0.
Usage: npy_write.py OUT_DIR
"""
import sys

import numpy as np
from numpy.lib import format as npf


def values(dtype, shape):
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    kind = np.dtype(dtype).kind
    if kind == "i":
        v = (i % 100) - 50
    elif kind == "u":
        v = i % 200
    elif kind == "f":
        v = i * 0.25 - 3
    else:
        v = i % 3 == 0
    return v.astype(dtype).reshape(shape)


def main(out):
    dtypes = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64"]
    shapes = {"s3": (4, 5, 3), "s2": (6, 7), "s1": (9,), "s0": (0, 2, 2)}
    for version in [(1, 0), (2, 0), (3, 0)]:
        for dt in dtypes:
            for name, shape in shapes.items():
                with open(f"{out}/v{version[0]}_{dt}_{name}.npy", "wb") as f:
                    npf.write_array(f, values(dt, shape), version=version)
    np.save(f"{out}/auto.npy", values("float32", (2, 3, 4)))
    np.save(f"{out}/fortran.npy", np.asfortranarray(values("float32", (3, 4))))
    np.save(f"{out}/bigendian.npy", values(">f4", (3, 4)))
    np.save(f"{out}/object.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(f"{out}/complex.npy", np.ones((2, 2), dtype=np.complex64))
    np.save(f"{out}/strings.npy", np.array(["ab", "cd"]))
    np.save(f"{out}/half.npy", np.ones((2, 2), dtype=np.float16))
    np.save(f"{out}/structured.npy", np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    # A dataset pair: X [N, T, F] float64 and y [N, H, targets] float32, and labels [N] int64.
    np.save(f"{out}/X.npy", values("float64", (10, 4, 3)))
    np.save(f"{out}/Y.npy", values("float32", (10, 2, 2)))
    np.save(f"{out}/labels.npy", values("int64", (10,)))
    np.save(f"{out}/labels_short.npy", values("int64", (9,)))


if __name__ == "__main__":
    main(sys.argv[1])
