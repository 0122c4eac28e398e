"""Recomputes a backtest's metrics from its predictions.csv alone (tests/test_backtest.cpp, issue 38):
per fold, per fold and series, and overall, the MAE, RMSE, MAPE (actual 0 skipped), sMAPE (0 where
actual and forecast are both 0), MASE (each (fold, series, target)'s MAE over its naive_mae column,
averaged over series, then over targets), the pinball loss and the coverage of the outermost
levels, and the same errors of the last-value and seasonal-naive columns; then checks backtest.json
and backtest.csv against them. Usage: backtest_check.py OUT_DIR. Exit 0 when everything agrees to
1e-6 relative (the forecasts are float32: read back as float32, they are exactly what was scored); else prints each difference and exits 1."""
import csv
import json
import math
import struct
import sys
from collections import defaultdict

out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/predictions.csv")))
report = json.load(open(f"{out}/backtest.json"))
table = list(csv.DictReader(open(f"{out}/backtest.csv")))
levels = [k for k in rows[0] if k.startswith("forecast_q")]
quantiles = [float(k[len("forecast_q"):]) for k in levels]
fleet = report["series"] > 1 or "per_series" in report["folds"][0]["metrics"]
bad = []


def num(s):
    return float(s) if s != "" else math.nan


def f32(s):
    """A value of the forecasts' own precision: written with 9 digits, it is exactly one float32."""
    return struct.unpack("f", struct.pack("f", float(s)))[0] if s != "" else math.nan


def errors(group, column):
    """The metrics of `column` against `actual` over the rows of `group`."""
    by_target = defaultdict(list)
    for r in group:
        by_target[r["target"]].append(r)
    e = [f32(r[column]) - f32(r["actual"]) for r in group]
    a = [f32(r["actual"]) for r in group]
    f = [f32(r[column]) for r in group]
    ape = [abs(x / y) for x, y in zip(e, a) if y != 0]
    sape = [2 * abs(x) / (abs(y) + abs(z)) if abs(y) + abs(z) > 0 else 0 for x, y, z in zip(e, a, f)]
    out = {
        "mae": sum(abs(x) for x in e) / len(e),
        "rmse": math.sqrt(sum(x * x for x in e) / len(e)),
        "mape": 100 * sum(ape) / len(ape) if ape else math.nan,
        "smape": 100 * sum(sape) / len(sape),
    }
    # MASE: per target, the mean over (fold, series) of that window's MAE over its naive MAE.
    mases = []
    for target, trs in by_target.items():
        per = defaultdict(list)
        for r in trs:
            per[(r["fold"], r["series"])].append(r)
        m = [sum(abs(f32(r[column]) - f32(r["actual"])) for r in g) / len(g) / num(g[0]["naive_mae"])
             for g in per.values()]
        mases.append(sum(m) / len(m))
    out["mase"] = sum(mases) / len(mases)
    return out


def quantile_metrics(group):
    pin, n, cov = 0.0, 0, 0
    for r in group:
        a = f32(r["actual"])
        for q, k in zip(quantiles, levels):
            e = a - f32(r[k])
            pin += max(q * e, (q - 1) * e)
            n += 1
        cov += f32(r[levels[0]]) <= a <= f32(r[levels[-1]])
    return {"pinball": pin / n, "coverage": cov / len(group)}


def check(where, got, want, keys=None):
    for k, v in want.items():
        if keys is not None and k not in keys:
            continue
        g = got.get(k)
        if g is None and math.isnan(v):
            continue
        if g is None or abs(g - v) > 1e-6 * max(1.0, abs(v)):
            bad.append(f"{where} {k}: backtest says {g}, recomputed {v}")


def check_report(where, metrics, group):
    check(where, metrics, errors(group, "forecast"))
    if levels:
        check(where, metrics, quantile_metrics(group))
    for name in ("last_value", "seasonal_naive"):
        if group[0][name] != "":
            check(f"{where} baseline {name}", metrics["baseline"][name], errors(group, name))


csv_rows = {(r["fold"], r["series"], r["forecaster"]): r for r in table}
CSV_KEYS = ("mae", "rmse", "mape", "smape", "mase")
for fold in report["folds"]:
    k = str(fold["fold"])
    group = [r for r in rows if r["fold"] == k]
    check_report(f"fold {k}", fold["metrics"], group)
    check(f"backtest.csv fold {k}", {m: num(csv_rows[(k, "all", "model")][m]) for m in CSV_KEYS},
          errors(group, "forecast"), CSV_KEYS)
    if fleet:
        for series, metrics in fold["metrics"]["per_series"].items():
            check_report(f"fold {k} series {series}", metrics, [r for r in group if r["series"] == series])
check_report("overall", report["overall"], rows)
check("backtest.csv overall", {m: num(csv_rows[("all", "all", "model")][m]) for m in CSV_KEYS},
      errors(rows, "forecast"), CSV_KEYS)
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"backtest_check: {len(rows)} predictions, {len(report['folds'])} folds agree")
