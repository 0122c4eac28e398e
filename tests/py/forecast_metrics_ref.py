"""numpy's forecast metrics for tests/test_forecast_metrics.cpp: reads forecast.npy, actual.npy
([N] float32) and train.npy (the training values), writes metrics.json with MAE, RMSE, MAPE
(skipping actual 0), sMAPE (0 where both are 0) and MASE for lag 1 and lag 5."""
import json
import sys

import numpy as np

d = sys.argv[1]
f = np.load(f"{d}/forecast.npy").astype(np.float64)
a = np.load(f"{d}/actual.npy").astype(np.float64)
train = np.load(f"{d}/train.npy").astype(np.float64)
e = f - a
nz = a != 0
denom = np.abs(a) + np.abs(f)
sape = np.where(denom > 0, 2 * np.abs(e) / np.where(denom > 0, denom, 1), 0.0)
mae = np.mean(np.abs(e))
out = {
    "mae": mae,
    "rmse": float(np.sqrt(np.mean(e * e))),
    "mape": float(100 * np.mean(np.abs(e[nz] / a[nz]))),
    "smape": float(100 * np.mean(sape)),
    "mase1": float(mae / np.mean(np.abs(train[1:] - train[:-1]))),
    "mase5": float(mae / np.mean(np.abs(train[5:] - train[:-5]))),
}
json.dump({k: float(v) for k, v in out.items()}, open(f"{d}/metrics.json", "w"))
