#!/usr/bin/env python3
"""Draws prefill TFLOP/s per shape: bf16 against FP8, ragged and paged.

Reads one or more `attn-bench prefill --json` outputs and writes an SVG: one
panel per head dim, one group of bars per shape (batch x seq, mask), one bar
per path: ragged bf16, paged bf16 (page 16), the e4m3 cache with 16-bit MMAs,
FP8 compute over the e4m3 cache (fp8mma) and over ragged e4m3 q/k/v
(rag_fp8q). Standard library only, so it runs wherever attn-bench's JSON is.

    attn-bench prefill --quick --json --head-dim 128 > p128.json
    attn-bench prefill --quick --json --head-dim 256 > p256.json
    python3 bench/prefill_plot.py p128.json p256.json -o prefill-fp8.svg
"""
import argparse
import json
import sys

SERIES = [  # (JSON field, label, colour)
    ("tflops", "ragged bf16", "#1f77b4"),
    ("paged_p16_tflops", "paged bf16", "#aec7e8"),
    ("paged_p16_e4m3_tflops", "e4m3 cache, 16-bit MMAs", "#7f7f7f"),
    ("paged_p16_e4m3_fp8mma_tflops", "fp8mma (paged e4m3)", "#d62728"),
    ("ragged_e4m3_fp8mma_q8_tflops", "rag_fp8q (ragged e4m3)", "#ff9896"),
]
BAR, GAP, MARGIN, HEIGHT = 10, 16, 50, 300


def load(paths):
    rows = []
    for path in paths:
        with open(path) if path != "-" else sys.stdin as f:
            rows.extend(json.load(f)["prefill"])
    if not rows:
        sys.exit("prefill_plot.py: no prefill rows")
    return rows


def panel(rows, head_dim, x0, top):
    """SVG elements of one head dim's panel (left edge x0) and its width."""
    rows = [r for r in rows if r["head_dim"] == head_dim]
    group = len(SERIES) * BAR + GAP
    width = len(rows) * group + GAP
    h = HEIGHT - 2 * MARGIN
    y = lambda v: MARGIN + h - h * v / top
    out = [f'<rect x="{x0}" y="{MARGIN}" width="{width}" height="{h}" '
           'fill="none" stroke="#888"/>',
           f'<text x="{x0 + width / 2}" y="30" text-anchor="middle" '
           f'font-size="14">head dim {head_dim}, 32/8 heads</text>']
    for tick in range(0, int(top) + 1, 200):
        out.append(f'<line x1="{x0}" x2="{x0 + width}" y1="{y(tick)}" '
                   f'y2="{y(tick)}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 4}" y="{y(tick) + 4}" text-anchor="end" '
                   f'font-size="10">{tick}</text>')
    for i, r in enumerate(rows):
        gx = x0 + GAP + i * group
        for j, (field, _, colour) in enumerate(SERIES):
            v = r.get(field) or 0
            out.append(f'<rect x="{gx + j * BAR}" y="{y(v)}" width="{BAR - 1}" '
                       f'height="{MARGIN + h - y(v)}" fill="{colour}"/>')
        label = f'{r["batch"]}x{r["seq"] // 1024}k {"c" if r["causal"] else "f"}'
        out.append(f'<text x="{gx + len(SERIES) * BAR / 2}" y="{MARGIN + h + 14}" '
                   f'text-anchor="middle" font-size="10">{label}</text>')
    return out, width


def legend(entries, y):
    """SVG elements of a one-line legend of (label, colour) from x = MARGIN
    at baseline y, and the x where it ends."""
    out, x = [], MARGIN
    for label, colour in entries:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14}" y="{y}" font-size="11">{label}</text>')
        x += 14 + 7 * len(label) + 16
    return out, x


def write_svg(path, parts, width, height, ylabel="TFLOP/s"):
    """A white SVG of `parts` with a rotated y label on the left."""
    mid = MARGIN + (height - 2 * MARGIN) / 2
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="12" y="{mid}" font-size="11" transform="rotate(-90 12 {mid})" '
           f'text-anchor="middle">{ylabel}</text>'] + parts + ["</svg>"]
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="attn-bench prefill --json outputs")
    parser.add_argument("-o", "--out", required=True, help="SVG to write")
    args = parser.parse_args()
    rows = load(args.json)
    top = max(max((r.get(f) or 0) for f, _, _ in SERIES) for r in rows)
    top = (int(top) // 200 + 1) * 200
    parts, x = [], MARGIN
    for d in sorted({r["head_dim"] for r in rows}):
        elements, width = panel(rows, d, x, top)
        parts += elements
        x += width + MARGIN
    elements, lx = legend([(label, colour) for _, label, colour in SERIES], HEIGHT - 12)
    write_svg(args.out, parts + elements, max(x, lx), HEIGHT)
    print(f"prefill_plot.py: {len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
