#!/usr/bin/env python3
"""Draws docs/bench.svg from bench/results/current.csv, and prints the
markdown tables that bench/RESULTS.md and the README show from the same file.

    python3 bench/plot.py            # (re)write docs/bench.svg
    python3 bench/plot.py --check    # exit 1 if docs/bench.svg or bench/RESULTS.md's tables
                                     # are not what the CSV gives
    python3 bench/plot.py --table    # the markdown tables, one per suite

Standard library only (a hand-written SVG, no matplotlib), so it runs
anywhere. The CSV has one row per measured point: suite, model, T, impl, ms,
gpu, date, commit and the archived section it comes from; lines starting
with '#' are comments. A suite with more than one implementation gets a row
of panels (one per token count T, log time axis); a suite with one is
printed as a table only.
"""
import argparse
import csv
import io
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSV_PATH = os.path.join(ROOT, "bench", "results", "current.csv")
SVG_PATH = os.path.join(ROOT, "docs", "bench.svg")
RESULTS_PATH = os.path.join(ROOT, "bench", "RESULTS.md")
OURS = "moe-mlir"
COLORS = ["#1f5fa8", "#e8892b", "#8c8c8c", "#5aa05a"]

# Layout, in SVG user units (pixels).
LABEL_W = 210  # model names
PANEL_W = 250
PANEL_GAP = 60  # room for the value labels past the longest bar
BAR_H = 11
BAR_GAP = 2
GROUP_GAP = 9
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def read_rows(path=CSV_PATH):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.lstrip().startswith("#")]
    rows = list(csv.DictReader(lines))
    for row in rows:
        row["T"] = int(row["T"])
        row["ms_text"] = row["ms"]  # as recorded, for the tables
        row["ms"] = float(row["ms"])
    return rows


def ordered(values):
    """Distinct values in order of first appearance."""
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def suites(rows):
    """[(suite, its rows)] in file order."""
    return [(s, [r for r in rows if r["suite"] == s]) for s in ordered(r["suite"] for r in rows)]


def describe(rows):
    """'H200, 2026-11-29, commit 6caa5e7' (each distinct value once)."""
    parts = []
    for key in ("gpu", "date", "commit"):
        values = ordered(r[key] for r in rows)
        parts.append(("commit " if key == "commit" else "") + " / ".join(values))
    return ", ".join(parts)


def fmt_ms(ms):
    """Three significant digits, no exponent."""
    digits = max(0, 2 - int(math.floor(math.log10(ms))))
    return "%.*f" % (digits, ms)


def lookup(rows, key="ms"):
    return {(r["model"], r["T"], r["impl"]): r[key] for r in rows}


def fmt_ratio(ratio):
    return ("%.2f×" if ratio < 10 else "%.1f×") % ratio


def markdown(rows):
    """One markdown table per suite: ms per implementation, and for each peer
    its time over ours (how many times faster moe-mlir is)."""
    out = []
    for suite, srows in suites(rows):
        impls = ordered(r["impl"] for r in srows)
        peers = [i for i in impls if i != OURS]
        ms = lookup(srows)
        recorded = lookup(srows, "ms_text")
        out.append("%s layers (%s):\n" % (suite, describe(srows)))
        head = ["model", "T"] + ["%s ms" % i for i in impls] + ["vs %s" % p for p in peers]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for model in ordered(r["model"] for r in srows):
            for t in ordered(r["T"] for r in srows if r["model"] == model):
                cells = [model, str(t)]
                cells += [recorded[(model, t, i)] if (model, t, i) in ms else "—" for i in impls]
                for p in peers:
                    if (model, t, p) in ms and (model, t, OURS) in ms:
                        cells.append(fmt_ratio(ms[(model, t, p)] / ms[(model, t, OURS)]))
                    else:
                        cells.append("—")
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def text(x, y, s, size=11, anchor="start", weight="normal", fill="#222"):
    return '<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" font-weight="%s" fill="%s">%s</text>' % (
        x, y, size, anchor, weight, fill, esc(s))


def svg(rows):
    plotted = [(s, r) for s, r in suites(rows) if len(ordered(x["impl"] for x in r)) > 1]
    impls_all = ordered(r["impl"] for _, srows in plotted for r in srows)
    color = {impl: COLORS[i % len(COLORS)] for i, impl in enumerate(impls_all)}
    max_panels = max(len(ordered(r["T"] for r in srows)) for _, srows in plotted)
    width = LABEL_W + max_panels * (PANEL_W + PANEL_GAP) + 10

    body = []
    y = 24
    body.append(text(10, y, "One MoE layer call, ms, log scale (shorter is faster); (n×): the peer's time "
                     "over moe-mlir's. Medians of CUDA-graph replays (hf_loop: eager).", 13, weight="bold"))
    y += 20
    x = 10
    for impl in impls_all:
        body.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, y - 10, color[impl]))
        body.append(text(x + 17, y, impl, 12))
        x += 30 + 7 * len(impl)
    y += 14

    for suite, srows in plotted:
        impls = ordered(r["impl"] for r in srows)
        models = ordered(r["model"] for r in srows)
        ts = ordered(r["T"] for r in srows)
        ms = lookup(srows)
        y += 26
        body.append(text(10, y, "%s layers — %s" % (suite, describe(srows)), 13, weight="bold"))
        y += 10
        group_h = len(impls) * (BAR_H + BAR_GAP) - BAR_GAP
        panel_h = len(models) * (group_h + GROUP_GAP) + 8
        top = y + 22
        for p, t in enumerate(ts):
            x0 = LABEL_W + p * (PANEL_W + PANEL_GAP)
            values = [v for (m, tt, i), v in ms.items() if tt == t]
            lo = math.floor(math.log10(min(values)))
            hi = math.ceil(math.log10(max(values)))
            if hi == lo:
                hi += 1

            def xpos(v, x0=x0, lo=lo, hi=hi):
                return x0 + (math.log10(v) - lo) / (hi - lo) * PANEL_W

            body.append(text(x0 + PANEL_W / 2, y + 14, "T = %d" % t, 12, "middle", "bold"))
            for d in range(lo, hi + 1):
                gx = xpos(10.0 ** d)
                body.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (gx, top, gx, top + panel_h))
                body.append(text(gx, top + panel_h + 13, "%g" % 10.0 ** d, 10, "middle",
                                 fill="#555"))
            body.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>' % (x0, top, x0, top + panel_h))
            gy = top + 4
            for model in models:
                if p == 0:
                    body.append(text(LABEL_W - 8, gy + group_h / 2 + 4, model, 11, "end"))
                by = gy
                for impl in impls:
                    v = ms.get((model, t, impl))
                    if v is not None:
                        bx = xpos(v)
                        body.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
                            x0, by, max(bx - x0, 1.0), BAR_H, color[impl]))
                        label = fmt_ms(v)
                        if impl != OURS and (model, t, OURS) in ms:
                            label += " (%s)" % fmt_ratio(v / ms[(model, t, OURS)])
                        body.append(text(bx + 3, by + BAR_H - 2, label, 9, fill="#333"))
                    by += BAR_H + BAR_GAP
                gy += group_h + GROUP_GAP
        y = top + panel_h + 16

    height = y + 14
    body.append(text(10, height - 4, "Data: bench/results/current.csv (drawn by bench/plot.py; "
                     "the runs are described in bench/RESULTS.md).", 10, fill="#555"))
    head = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>\n'
            '<rect width="100%%" height="100%%" fill="white"/>\n' % (width, height, width, height, FONT))
    return head + "\n".join(body) + "\n</svg>\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed SVG instead of writing it")
    parser.add_argument("--table", action="store_true", help="print the markdown tables")
    parser.add_argument("--csv", default=CSV_PATH)
    parser.add_argument("--out", default=SVG_PATH)
    args = parser.parse_args()
    rows = read_rows(args.csv)
    if args.table:
        sys.stdout.write(markdown(rows))
        return 0
    drawing = svg(rows)
    if args.check:
        stale = []
        with io.open(args.out, encoding="utf-8") as f:
            if f.read() != drawing:
                stale.append("%s (run python3 bench/plot.py)" % os.path.relpath(args.out, ROOT))
        with io.open(RESULTS_PATH, encoding="utf-8") as f:
            results = f.read()
        for table in markdown(rows).split("\n\n"):
            if table.startswith("|") and table.strip() not in results:
                stale.append("%s: its table starting %r (python3 bench/plot.py --table)"
                             % (os.path.relpath(RESULTS_PATH, ROOT), table.split("\n")[2]))
        for line in stale:
            print("stale: " + line)
        if not stale:
            print("docs/bench.svg and bench/RESULTS.md match %s" % os.path.relpath(args.csv, ROOT))
        return 1 if stale else 0
    with io.open(args.out, "w", encoding="utf-8") as f:
        f.write(drawing)
    print("wrote %s" % os.path.relpath(args.out, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
