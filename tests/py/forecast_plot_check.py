#!/usr/bin/python3
"""The forecast plots in a browser (ctest ForecastPlot, issue 38 item 4): trains a tiny synthetic
fleet with quantile forecasts through the binary, draws `backtest --plot` (a grid of 4 series,
3 folds) and `predict --plot --series` (one series), opens each SVG in headless Chromium (Debian's
`chromium`, driven by browser.py), takes a screenshot and checks that the page rendered: the SVG
has its size, no console error, one path per series and target for history and actual, one per
fold for forecasts and for each quantile band, axes and a legend, and the screenshot is not blank.

Usage: forecast_plot_check.py --binary build/seqtrain [--keep DIR]
Exit 0 = pass, 77 = skipped (no chromium), anything else = failure."""
import argparse
import os
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import Browser, chromium_path  # noqa: E402

CONFIG = """seed: 0
data:
  source: synthetic
  synthetic: {rows: 300, cells: 5}
  features: [voltage, current, temperature, soc]
  static_features: [capacity, resistance, ambient]
  targets: [voltage]
  lookback: 24
  horizon: 6
  normalize_scope: series
model: {type: lstm, hidden: 8}
train: {epochs: 1, batch_size: 64, loss: quantile, quantiles: [0.1, 0.25, 0.5, 0.75, 0.9]}
runtime: {threads: 1}
"""


def run(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"seqtrain {' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def png_pixels(path):
    """(width, height, distinct colours) of an 8-bit RGB(A) PNG, read with zlib alone."""
    data = open(path, "rb").read()
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[0:4], "big"), int.from_bytes(body[4:8], "big")
            channels = {2: 3, 6: 4}[body[9]]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 7 == 0:
            colours.update(bytes(line[i:i + 3]) for i in range(0, stride, channels * 5))
        prev = line
    return width, height, len(colours)


def check_svg(browser, svg, shot, want):
    browser.goto("file://" + svg)
    browser.wait_for("document.querySelector('svg') !== null", what="the SVG to load")
    size = browser.eval("(() => { const r = document.querySelector('svg').getBoundingClientRect();"
                        " return [r.width, r.height]; })()")
    assert size[0] > 400 and size[1] > 250, f"{svg}: the SVG renders {size}"
    count = lambda sel: browser.eval(f"document.querySelectorAll({sel!r}).length")  # noqa: E731
    for selector, n in want.items():
        got = count(selector)
        assert got == n, f"{svg}: {selector}: {got} drawn, expected {n}"
    for selector in ("text.legend", "path.axis", "text.tick", "text.axis-label"):
        assert count(selector) > 0, f"{svg}: no {selector}"
    # Every drawn path has a real extent on the page.
    empty = browser.eval("[...document.querySelectorAll('path[data-kind]')]"
                         ".filter(p => { const b = p.getBBox(); return !(b.width > 0 && b.height >= 0); }).length")
    assert empty == 0, f"{svg}: {empty} paths drawn with no extent"
    assert not browser.errors, f"{svg}: console errors {browser.errors}"
    browser.screenshot(shot)
    w, h, colours = png_pixels(shot)
    assert colours >= 4, f"{shot}: the screenshot holds {colours} colours: nothing was drawn"
    print(f"forecast_plot_check: {os.path.basename(svg)} rendered ({w}x{h} screenshot, {colours} colours sampled)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--keep", help="write the SVGs and screenshots here instead of a temporary directory")
    a = ap.parse_args()
    if not chromium_path():
        print("forecast_plot_check: chromium is not installed; skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "fleet.yaml")
        open(cfg, "w").write(CONFIG)
        run(a.binary, "train", cfg, "--quiet", "--overwrite", "--out", os.path.join(d, "run"))
        data = os.path.join(d, "fleet.csv")
        run(a.binary, "data", "export", cfg, "--out", data)
        bt_svg, p_svg = os.path.join(d, "backtest.svg"), os.path.join(d, "predict.svg")
        run(a.binary, "backtest", os.path.join(d, "run"), "--input", data, "--folds", "3", "--step", "12",
            "--out", os.path.join(d, "bt"), "--plot", bt_svg)
        run(a.binary, "predict", os.path.join(d, "run"), "--input", data, "--output", os.path.join(d, "p.csv"),
            "--plot", p_svg, "--series", "cell_004")
        with Browser() as b:
            # The grid: 4 series x 1 target; 3 folds, two bands (0.1-0.9, 0.25-0.75) each.
            check_svg(b, bt_svg, os.path.join(d, "backtest.png"), {
                "g.panel": 4, 'path[data-kind="history"]': 4, 'path[data-kind="actual"]': 4,
                'path[data-kind="forecast"]': 12, 'path[data-kind="band"]': 24,
                'path[data-kind="band"][data-quantiles="0.1-0.9"]': 12,
                'path[data-kind="forecast"][data-series="cell_003"][data-fold="2"]': 1})
            check_svg(b, p_svg, os.path.join(d, "predict.png"), {
                "g.panel": 1, 'path[data-kind="history"][data-series="cell_004"]': 1,
                'path[data-kind="actual"]': 1, 'path[data-kind="forecast"]': 1, 'path[data-kind="band"]': 2})
    return 0


if __name__ == "__main__":
    sys.exit(main())
