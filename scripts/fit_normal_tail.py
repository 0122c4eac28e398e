#!/usr/bin/env python3
"""Fits the polynomial Q of src/backend/cpu/kernels/fast_math.h's normal_tail_scaled().

Phi(-b) e^{b^2/2} = erfc(a) e^{a^2} / 2 (a = b / sqrt 2) is approximated as t Q(t), with
t = 1 / (1 + a/2) mapping a in [0, inf) onto (0, 1]. Q is fit in *relative* error (the tail of
Phi must stay accurate where it is tiny) by iteratively reweighted least squares (Lawson's
algorithm, which moves a least-squares fit towards the minimax one) on points spread over t
for a in [0, 12] (x down to -17; the tests check |x| <= 12). Standard library only. Prints the coefficients, rounded to float, highest degree first (Horner's order), and the
fit's worst relative error in double.
"""
import math
import struct

DEGREE = 8
POINTS = 1500
ITERATIONS = 40
A_MAX = 12.0


def to_float(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def erfcx(a):
    """erfc(a) e^{a^2}, in double (erfc does not underflow for the a used here)."""
    return math.erfc(a) * math.exp(a * a)


def solve(m, rhs):
    """Gaussian elimination with partial pivoting."""
    n = len(rhs)
    rows = [row[:] + [b] for row, b in zip(m, rhs)]
    for i in range(n):
        pivot = max(range(i, n), key=lambda r: abs(rows[r][i]))
        rows[i], rows[pivot] = rows[pivot], rows[i]
        for r in range(n):
            if r != i:
                f = rows[r][i] / rows[i][i]
                for c in range(i, n + 1):
                    rows[r][c] -= f * rows[i][c]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def fit():
    t_min = 1 / (1 + 0.5 * A_MAX)
    samples = []  # (t, Q(t) wanted)
    for k in range(POINTS + 1):
        t = t_min + (1 - t_min) * (0.5 - 0.5 * math.cos(math.pi * k / POINTS))  # denser at the ends
        a = (1 / t - 1) / 0.5
        samples.append((t, erfcx(a) / t))
    weights = [1.0] * len(samples)
    for _ in range(ITERATIONS):
        normal = [[0.0] * (DEGREE + 1) for _ in range(DEGREE + 1)]
        rhs = [0.0] * (DEGREE + 1)
        for (t, q), w in zip(samples, weights):
            w /= q * q  # relative error
            powers = [t**j for j in range(DEGREE + 1)]
            for i in range(DEGREE + 1):
                rhs[i] += w * powers[i] * q
                for j in range(DEGREE + 1):
                    normal[i][j] += w * powers[i] * powers[j]
        coeffs = solve(normal, rhs)
        errors = [abs(sum(c * t**j for j, c in enumerate(coeffs)) - q) / q for t, q in samples]
        worst = max(errors)
        weights = [w * (e / worst + 1e-3) for w, e in zip(weights, errors)]
        total = sum(weights)
        weights = [w / total * len(weights) for w in weights]
    return coeffs, worst


def main():
    coeffs, worst = fit()
    print(f"worst relative error of the fit (double): {worst:.3g}")
    # Halved: the kernel wants Phi's tail, erfc / 2 (halving a float is exact).
    for c in reversed(coeffs):
        print(repr(to_float(to_float(c) / 2)))


if __name__ == "__main__":
    main()
