#!/usr/bin/env python3
"""plot_svg.py: the comparison chart of a bench report, as one self-contained SVG file.

Every bench script that writes a Markdown report (run.sh through report.py, matrix.sh through
matrix_report.py, gpt.sh through gpt_report.py, and the reports set_encoder.sh, pretrain.sh,
pretrain_accuracy.sh, gpt_quality.sh, gpt_precision_ratio.sh and serve.sh write) also writes
<prefix>.svg through this module: one implementation, standard library only (no matplotlib).

    sys.path.insert(0, "bench")   # or run from bench/
    import plot_svg
    plot_svg.write("bench/results/step-X.svg", "seqtrain step time, AMD EPYC, 2 threads",
                   [("W1", [("seqtrain", 254.4), ("torch 2.15 (PyPI)", 521.2)]),
                    ("W2", [("seqtrain", 865.9), ("torch 2.15 (PyPI)", 1085.3)])],
                   unit="ms/step", reference="seqtrain")

The chart: one block of horizontal bars per group (a workload, a workload and configuration, a
shape and precision), one bar per series (an engine) in that group, one colour per series across
the chart with a legend (the reference first, in the legend and in every group); each bar's
value at its end, and on every other series' bar of a group that has the reference's bar, the
reference's ratio over it (by default "seqtrain 2.05x": that bar's value / the reference's when
lower is better, the inverse when higher is better); an x axis
with ticks, gridlines and the unit, on a log scale when the values span more than LOG_SPAN (the
Debian torch 1.13 peer is 10-100x slower than the others); the title names the machine.

Elements carry classes for checks (tests/py/bench_plot_check.py): rect.bar (one per value),
text.value (one per bar), text.speedup (one per ratio), text.group, rect.swatch + text.legend
(one per series), text.title.
"""
import math
import os
from xml.sax.saxutils import escape

# Colour-blind-safe (Okabe-Ito), the reference series first.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999", "#F0E442", "#000000"]
ATTR = {'"': "&quot;"}  # escape()'s extra entities inside an attribute value
LOG_SPAN = 30.0  # max / min above this: log scale
WIDTH = 980
FONT = 12
CHAR_W = 0.58  # mean glyph width of the sans-serif font, in font sizes (for layout only)
BAR_H = 16
BAR_GAP = 3
GROUP_GAP = 14


def text_width(s, size=FONT):
    return len(s) * size * CHAR_W


def default_fmt(v):
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def wrap(s, width_px, size=FONT):
    """s in lines no wider than width_px (words kept whole; a longer word gets its own line)."""
    lines, cur = [], ""
    for word in s.split():
        cand = f"{cur} {word}" if cur else word
        if cur and text_width(cand, size) > width_px:
            lines.append(cur)
            cur = word
        else:
            cur = cand
    return lines + [cur] if cur else lines or [""]


def nice_step(span, target):
    """A 1-2-5 step giving about `target` intervals over span."""
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


class Scale:
    def __init__(self, values, log, x0, x1):
        lo, hi = min(values), max(values)
        if log is None:
            log = lo > 0 and hi / lo > LOG_SPAN
        self.log, self.x0, self.x1 = log, x0, x1
        if log:
            steps = [m * 10 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
                     for m in (1, 2, 5)]
            self.lo = max(t for t in steps if t <= lo * 0.95)  # the 1-2-5 values around the data
            self.hi = min(t for t in steps if t >= hi * 1.001)
            self.ticks = []  # (value, labelled): 1, 2, 5 per decade; over 3 decades the 1s
            decades = math.log10(self.hi / self.lo)
            decade = 10 ** math.floor(math.log10(self.lo) + 1e-9)
            while decade <= self.hi * 1.0001:
                for m in (1, 2, 5):
                    if self.lo <= m * decade <= self.hi * 1.0001:
                        self.ticks.append((m * decade, m == 1 or decades <= 3))
                decade *= 10
            self.ticks[0] = (self.ticks[0][0], True)  # the ends always labelled
            self.ticks[-1] = (self.ticks[-1][0], True)
        else:
            self.lo = min(0.0, lo)
            top = hi if hi > self.lo else self.lo + 1
            step = nice_step(top - self.lo, 6)
            self.hi = math.ceil(top / step - 1e-9) * step
            self.ticks = [(self.lo + k * step, True) for k in range(int(round((self.hi - self.lo) / step)) + 1)]

    def x(self, v):
        if self.log:
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.x0 + f * (self.x1 - self.x0)


def tick_label(v):
    if v >= 1000 and v == int(v):
        return f"{int(v):,}".replace(",", "\u2009")  # thin space: 10 000
    return f"{v:g}"


def chart(title, groups, unit, *, subtitle="", reference=None, ratio_name=None, lower_is_better=True,
          ratio_label=None, log=None, value_fmt=default_fmt, note=None):
    """The SVG text. groups: [(label, [(series, value or None), ...]), ...]; a None value draws no
    bar. reference: the series whose ratio over every other bar of its group is printed on that
    bar (None: no ratios); ratio_name: what the labels and the note call it (default reference,
    e.g. "seqtrain" for "seqtrain 1a2b3c4"); ratio_label(ratio) -> str formats a ratio (default
    "<ratio_name> 2.05x"). log: True, False, or None to choose by the values' span."""
    series = []
    for _, bars in groups:
        for name, v in bars:
            if v is not None and name not in series:
                series.append(name)
    if reference in series:  # the reference keeps the first colour
        series.remove(reference)
        series.insert(0, reference)
    colour = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    values = [v for _, bars in groups for _, v in bars if v is not None]
    if not values:
        raise ValueError("plot_svg.chart: no values to plot")
    name = ratio_name or reference
    if ratio_label is None:
        ratio_label = lambda r: f"{name} {r:.2f}x"  # noqa: E731
    if note is None and reference is not None:
        note = (f"On every other bar of a group: {name}'s speedup over it (that bar's {unit} / {name}'s)"
                if lower_is_better else f"On every other bar of a group: {name}'s ratio over it ({name}'s {unit} / that bar's)")

    out = []
    y = 28
    title_lines = wrap(title, WIDTH - 40, 16)
    for line in title_lines:
        out.append(f'<text class="title" x="20" y="{y}" font-size="16" font-weight="bold">{escape(line)}</text>')
        y += 20
    for line in wrap(subtitle, WIDTH - 40, 11) if subtitle else []:
        out.append(f'<text class="subtitle" x="20" y="{y}" font-size="11" fill="#444">{escape(line)}</text>')
        y += 15
    # Legend: swatch + name, wrapping into rows.
    y += 6
    lx = 20
    for s in series:
        w = 18 + text_width(s, 11) + 18
        if lx + w > WIDTH - 20 and lx > 20:
            lx, y = 20, y + 18
        out.append(f'<rect class="swatch" x="{lx:.1f}" y="{y - 10}" width="12" height="12" fill="{colour[s]}"/>')
        out.append(f'<text class="legend" x="{lx + 17:.1f}" y="{y}" font-size="11">{escape(s)}</text>')
        lx += w
    y += 8
    if note:
        for line in wrap(note, WIDTH - 40, 10):
            y += 14
            out.append(f'<text class="note" x="20" y="{y}" font-size="10" fill="#444">{escape(line)}</text>')
    y += 16

    # Plot area: group labels left, bars, then value + ratio text right of the bar ends.
    longest_label = max(text_width(str(g)) for g, _ in groups)
    left = int(min(max(longest_label + 30, 90), 300))
    right_text = 12 + max(text_width(value_fmt(v) + " ", 11) for v in values)
    if reference is not None:
        right_text += text_width(ratio_label(123.45), 11)
    x0, x1 = left, WIDTH - 20 - right_text
    scale = Scale(values, log, x0, x1)
    top = y
    body = []
    for label, bars in groups:
        present = sorted(((s, v) for s, v in bars if v is not None), key=lambda sv: series.index(sv[0]))
        lines = wrap(str(label), left - 20)
        block = max(len(present) * (BAR_H + BAR_GAP) - BAR_GAP, len(lines) * 14, BAR_H)
        ly = y + block / 2 - (len(lines) - 1) * 7 + 4
        tspans = "".join(f'<tspan x="{left - 10}" y="{ly + 14 * i:.1f}">{escape(line)}</tspan>'
                         for i, line in enumerate(lines))
        body.append(f'<text class="group" text-anchor="end" font-size="{FONT}">{tspans}</text>')
        ref = dict(present).get(reference)
        by = y
        for s, v in present:
            xe = scale.x(v)
            body.append(f'<rect class="bar" data-series="{escape(s, ATTR)}" x="{x0}" y="{by}" width="{max(xe - x0, 1):.1f}" '
                        f'height="{BAR_H}" fill="{colour[s]}"><title>{escape(f"{label}: {s}: {value_fmt(v)} {unit}")}'
                        f'</title></rect>')
            tx = max(xe, x0 + 1) + 5
            vt = value_fmt(v)
            body.append(f'<text class="value" x="{tx:.1f}" y="{by + BAR_H - 4}" font-size="11">{escape(vt)}</text>')
            if ref is not None and s != reference and ref > 0 and v > 0:
                r = v / ref if lower_is_better else ref / v
                body.append(f'<text class="speedup" x="{tx + text_width(vt + "  ", 11):.1f}" y="{by + BAR_H - 4}" '
                            f'font-size="11" font-weight="bold">{escape(ratio_label(r))}</text>')
            by += BAR_H + BAR_GAP
        y += block + GROUP_GAP
    bottom = y - GROUP_GAP + 6
    # Axis, gridlines, ticks, unit.
    axis = [f'<line x1="{x0}" y1="{bottom}" x2="{x1:.1f}" y2="{bottom}" stroke="#333"/>',
            f'<line x1="{x0}" y1="{top - 4}" x2="{x0}" y2="{bottom}" stroke="#333"/>']
    for t, labelled in scale.ticks:
        tx = scale.x(t)
        axis.append(f'<line class="grid" x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" y2="{bottom}" stroke="#ddd"/>')
        if not labelled:
            continue
        axis.append(f'<line x1="{tx:.1f}" y1="{bottom}" x2="{tx:.1f}" y2="{bottom + 4}" stroke="#333"/>')
        axis.append(f'<text class="tick" x="{tx:.1f}" y="{bottom + 16}" font-size="10" text-anchor="middle">'
                    f'{escape(tick_label(t))}</text>')
    better = "lower is better" if lower_is_better else "higher is better"
    axis.append(f'<text class="axis" x="{(x0 + x1) / 2:.1f}" y="{bottom + 34}" font-size="{FONT}" text-anchor="middle">'
                f'{escape(unit)} ({"log scale, " if scale.log else ""}{better})</text>')
    height = bottom + 48
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
            f'viewBox="0 0 {WIDTH} {height:.0f}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
            f'<title>{escape(title)}</title>'
            f'<rect width="100%" height="100%" fill="#fff"/>')
    return "\n".join([head] + out + axis + body + ["</svg>"]) + "\n"


def write(path, title, groups, unit, **kw):
    """chart(...) written to path (its directory made); returns path."""
    svg = chart(title, groups, unit, **kw)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(svg)
    return path
