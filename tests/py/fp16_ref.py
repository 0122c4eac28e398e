"""numpy's float32 -> float16 conversion, the reference for seqtrain's fp16 rounding
(tests/test_fp16.cpp). Reads IN.npy (float32), writes OUT.npy (float64) holding, per input,
the float16 bit pattern as an integer (exact in float64).
Usage: fp16_ref.py IN.npy OUT.npy
"""
import sys

import numpy as np

x = np.load(sys.argv[1]).astype(np.float32)
with np.errstate(over="ignore"):
    bits = x.astype(np.float16).view(np.uint16)
np.save(sys.argv[2], bits.astype(np.float64))
