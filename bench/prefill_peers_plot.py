#!/usr/bin/env python3
"""Draws prefill TFLOP/s against sequence length, attn beside its peers.

Reads the JSON that `bench/sdpa.py --out` writes for an `attn-bench prefill
--by-seq` run and writes an SVG: one panel per head dim and mask, the
sequence length on the x axis (16k tokens per batch at every length), one
line per kernel: attn's ragged and paged (page 16) prefill, cuDNN and
FlashAttention 2 through SDPA, FlexAttention (with --flex), and the bf16
GEMM rate of the same run as a dashed ceiling. Standard library only.

    attn-bench prefill --by-seq --ragged-only --json > by-seq.json
    python3 bench/sdpa.py by-seq.json --flex --out by-seq-peers.json
    python3 bench/prefill_peers_plot.py by-seq-peers.json -o prefill-peers.svg
"""
import argparse
import json
import sys

from prefill_plot import MARGIN, legend, write_svg  # bench/, beside this script

SERIES = [  # (label, colour, value of a row)
    ("attn ragged", "#1f77b4", lambda r: r["attn_tflops"]),
    # attn-bench writes 0 for a column it skipped (--ragged-only).
    ("attn paged", "#aec7e8", lambda r: r["config"].get("paged_p16_tflops") or None),
    ("cuDNN", "#2ca02c", lambda r: r["backends"]["CUDNN_ATTENTION"]["tflops"]),
    ("FlashAttention 2", "#ff7f0e",
     lambda r: r["backends"]["FLASH_ATTENTION"]["tflops"]),
    ("FlexAttention", "#9467bd", lambda r: (r.get("flex") or {}).get("tflops")),
]
WIDTH, HEIGHT = 260, 260


def panel(rows, series, title, x0, top, ceiling):
    """SVG elements of one panel (left edge x0)."""
    h = HEIGHT - 2 * MARGIN
    y = lambda v: MARGIN + h - h * v / top
    step = WIDTH / max(1, len(rows) - 1)
    x = lambda i: x0 + i * step
    out = [f'<rect x="{x0}" y="{MARGIN}" width="{WIDTH}" height="{h}" '
           'fill="none" stroke="#888"/>',
           f'<text x="{x0 + WIDTH / 2}" y="{MARGIN - 10}" text-anchor="middle" '
           f'font-size="13">{title}</text>']
    for tick in range(0, int(top) + 1, 200):
        out.append(f'<line x1="{x0}" x2="{x0 + WIDTH}" y1="{y(tick)}" '
                   f'y2="{y(tick)}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 4}" y="{y(tick) + 4}" text-anchor="end" '
                   f'font-size="10">{tick}</text>')
    out.append(f'<line x1="{x0}" x2="{x0 + WIDTH}" y1="{y(ceiling)}" '
               f'y2="{y(ceiling)}" stroke="#000" stroke-dasharray="4 3"/>')
    for i, r in enumerate(rows):
        seq = r["config"]["seq"]
        label = f"{seq // 1024}k" if seq >= 1024 else str(seq)
        out.append(f'<text x="{x(i)}" y="{MARGIN + h + 14}" text-anchor="middle" '
                   f'font-size="10">{label}</text>')
    for _, colour, value in series:
        points = [(x(i), y(v)) for i, r in enumerate(rows)
                  if (v := value(r)) is not None]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            out.append(f'<polyline points="{path}" fill="none" '
                       f'stroke="{colour}" stroke-width="2"/>')
        for px, py in points:
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" '
                       f'fill="{colour}"/>')
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="bench/sdpa.py --out of a --by-seq run")
    parser.add_argument("-o", "--out", required=True, help="SVG to write")
    args = parser.parse_args()
    try:
        with open(args.json) as f:
            run = json.load(f)
        rows, ceiling = run["rows"], run["gemm_tflops"]
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"prefill_peers_plot.py: cannot read '{args.json}': {err}")
    if not rows:
        sys.exit("prefill_peers_plot.py: no rows")
    series = [s for s in SERIES if any(s[2](r) is not None for r in rows)]
    top = max([ceiling] + [v for r in rows for _, _, f in series
                           if (v := f(r)) is not None])
    top = (int(top) // 200 + 1) * 200
    panels = sorted({(r["config"]["head_dim"], r["config"]["causal"])
                     for r in rows})
    parts, x0 = [], MARGIN
    for d, causal in panels:
        mine = sorted((r for r in rows if r["config"]["head_dim"] == d and
                       r["config"]["causal"] == causal),
                      key=lambda r: r["config"]["seq"])
        heads = f'{mine[0]["config"]["q_heads"]}/{mine[0]["config"]["kv_heads"]}'
        title = f'head dim {d}, {"causal" if causal else "full"}, {heads}'
        parts += panel(mine, series, title, x0, top, ceiling)
        x0 += WIDTH + MARGIN
    elements, lx = legend([(label, colour) for label, colour, _ in series] +
                          [("bf16 GEMM", "#000")], HEIGHT - 8)
    write_svg(args.out, parts + elements, max(x0, lx), HEIGHT)
    print(f"prefill_peers_plot.py: {len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
