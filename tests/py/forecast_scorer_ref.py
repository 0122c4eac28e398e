"""numpy's scoring of a windowed split for tests/test_forecast_scorer.cpp: reads series.csv
(the raw series), setup.json (targets, feature columns, lookback, horizon, the split's rows, the
training rows, the season) and pred.npy ([N, horizon * targets], the forecasts in units), and
writes report.json with the model's and the baselines' MAE, RMSE, MAPE, sMAPE and MASE, pooled
and per target, computed straight from the CSV's values."""
import json
import sys

import numpy as np

d = sys.argv[1]
setup = json.load(open(f"{d}/setup.json"))
cols = open(f"{d}/series.csv").readline().strip().split(",")
data = np.loadtxt(f"{d}/series.csv", delimiter=",", skiprows=1, dtype=np.float64)
pred = np.load(f"{d}/pred.npy").astype(np.float64)
L, H, m = setup["lookback"], setup["horizon"], setup["season"]
targets = setup["targets"]
T = len(targets)
b, e = setup["rows"]
tb, te = setup["train_rows"]
starts = list(range(b, e - L - H + 1))
assert len(starts) == pred.shape[0], (len(starts), pred.shape)


def metrics(f, a, scale):
    err = f - a
    nz = a != 0
    denom = np.abs(a) + np.abs(f)
    sape = np.where(denom > 0, 2 * np.abs(err) / np.where(denom > 0, denom, 1), 0.0)
    mae = float(np.mean(np.abs(err)))
    return {"mae": mae, "rmse": float(np.sqrt(np.mean(err * err))),
            "mape": float(100 * np.mean(np.abs(err[nz] / a[nz]))), "smape": float(100 * np.mean(sape)),
            "mase": mae / scale}


def report(forecast):
    """forecast(t, s, h): target t's forecast for step h of the window starting at row s."""
    per, fs, acts = {}, [], []
    for t, name in enumerate(targets):
        col = data[:, cols.index(name)]
        f = np.array([forecast(t, s, h) for s in starts for h in range(H)])
        a = np.array([col[s + L + h] for s in starts for h in range(H)])
        train = col[tb:te]
        lag = max(m, 1)
        per[name] = metrics(f, a, float(np.mean(np.abs(train[lag:] - train[:-lag]))))
        fs.append(f)
        acts.append(a)
    pooled = metrics(np.concatenate(fs), np.concatenate(acts), 1.0)
    pooled["mase"] = float(np.mean([per[n]["mase"] for n in targets]))
    pooled["per_target"] = per
    return pooled


out = report(lambda t, s, h: pred[starts.index(s), h * T + t])
col = {t: data[:, cols.index(n)] for t, n in enumerate(targets)}
out["baseline"] = {
    "last_value": report(lambda t, s, h: col[t][s + L - 1]),
    "seasonal_naive": report(lambda t, s, h: col[t][s + L - m + h % m]),
}
json.dump(out, open(f"{d}/report.json", "w"))
