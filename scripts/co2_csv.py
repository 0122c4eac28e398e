#!/usr/bin/env python3
"""Copies Mauna Loa's weekly CO2 series out of a statsmodels wheel into a CSV seqtrain reads.

Usage: co2_csv.py WHEEL OUT   (run by scripts/fetch_co2.sh)

The wheel's statsmodels/datasets/co2/co2.csv has a header `date,co2` and one row a week
(date as YYYYMMDD); weeks without a measurement have an empty co2 cell, kept empty here for
data.nan_policy to fill. Rows are checked (dates increasing, values numbers or empty) and
written to a temporary file beside OUT, then renamed into place; it says how many rows and
missing weeks it wrote.
"""
import os
import sys
import zipfile

MEMBER = "statsmodels/datasets/co2/co2.csv"


def fail(msg):
    print(f"co2_csv: error: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        fail("usage: co2_csv.py WHEEL OUT")
    wheel, out = sys.argv[1], sys.argv[2]
    try:
        with zipfile.ZipFile(wheel) as z:
            text = z.read(MEMBER).decode("ascii")
    except (OSError, zipfile.BadZipFile) as e:
        fail(f"{wheel} is not a readable wheel ({e}); fetch it again")
    except KeyError:
        fail(f"{wheel} has no {MEMBER}; is it a statsmodels wheel?")
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != "date,co2":
        fail(f"{MEMBER} in {wheel} does not start with the header date,co2")
    rows, missing, last = [], 0, None
    for n, line in enumerate(lines[1:], start=2):
        date, _, value = line.strip().partition(",")
        if not date.isdigit() or len(date) != 8 or (last is not None and date <= last):
            fail(f"{MEMBER} line {n}: date {date!r} is not a YYYYMMDD after {last}")
        if value:
            float(value)
        else:
            missing += 1
        rows.append(f"{date},{value}")
        last = date
    tmp = f"{out}.tmp-{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(tmp, "w") as f:
        f.write("date,co2\n" + "\n".join(rows) + "\n")
    os.replace(tmp, out)
    print(f"co2_csv: wrote {len(rows)} weeks ({missing} without a measurement) to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
