#!/usr/bin/env python3
"""Draws decode's share of the read bandwidth against the bytes of a call.

Reads one or more `attn-bench decode --json` outputs and writes an SVG: one
panel per KV dtype, one series per head ratio (q heads / KV heads), x the
bytes a call reads and writes (log scale), y the fraction of the read
bandwidth measured in the same run, with the targets (bf16 96%, FP8 92% of
the roof) as dashed lines. Standard library only, so it runs wherever
attn-bench's JSON is.

    attn-bench decode --json > decode.json
    python3 bench/decode_roof.py decode.json -o decode-roof.svg

With `--peer SDPA_JSON` (`bench/sdpa.py decode.json --out SDPA_JSON`), the
bf16 panel also draws cuDNN's share of the roof on the same calls, as
hollow markers on dashed lines.
"""
import argparse
import json
import math
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
# Targets for calls of >= 256 MB: bf16 96%, FP8 92% of the read roof.
TARGETS = {"bf16": 0.96, "f16": 0.96, "e4m3": 0.92, "e5m2": 0.92}
WIDTH, HEIGHT, MARGIN = 420, 300, 50


def load(paths):
    rows = []
    for path in paths:
        with open(path) if path != "-" else sys.stdin as f:
            rows.extend(json.load(f)["decode"])
    for row in rows:
        for key in ("kv", "q_heads", "kv_heads", "bytes", "fraction_of_read"):
            if key not in row:
                sys.exit(f"decode_roof.py: a row lacks '{key}' (an attn-bench "
                         "older than the bytes field?)")
    return rows


def panel(rows, kv, x0, lo, hi, peer=()):
    """The SVG elements of one dtype's panel, left edge at x0; `peer`: rows
    of (q_heads, kv_heads, bytes, fraction) drawn hollow."""
    out = []
    w, h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def px(b):
        return x0 + MARGIN + w * (math.log10(b) - lo) / (hi - lo)

    def py(f):
        return MARGIN + h * (1 - f)

    out.append(f'<rect x="{x0 + MARGIN}" y="{MARGIN}" width="{w}" height="{h}" '
               'fill="none" stroke="#888"/>')
    out.append(f'<text x="{x0 + WIDTH / 2}" y="{MARGIN - 20}" '
               f'text-anchor="middle" font-size="14">{kv} KV cache</text>')
    for f in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{x0 + MARGIN - 6}" y="{py(f) + 4}" '
                   f'text-anchor="end" font-size="10">{int(f * 100)}%</text>')
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        label = f"{10 ** e / 1e6:g} MB" if e >= 6 else f"{10 ** e / 1e3:g} kB"
        out.append(f'<text x="{px(10 ** e)}" y="{MARGIN + h + 14}" '
                   f'text-anchor="middle" font-size="10">{label}</text>')
    if kv in TARGETS:
        y = py(TARGETS[kv])
        out.append(f'<line x1="{x0 + MARGIN}" y1="{y}" x2="{x0 + MARGIN + w}" '
                   f'y2="{y}" stroke="#444" stroke-dasharray="4 3"/>')
    def draw(series, color, hollow=False):
        """A series of (bytes, fraction): a line and its markers (hollow on a
        dashed line for the peer)."""
        if not series:
            return
        points = " ".join(f"{px(b):.1f},{py(f):.1f}" for b, f in series)
        dash = ' stroke-dasharray="3 3"' if hollow else ""
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" '
                   f'stroke-opacity="0.5"{dash}/>')
        marker = (f'r="3" fill="white" stroke="{color}"' if hollow
                  else f'r="2.5" fill="{color}"')
        for b, f in series:
            out.append(f'<circle cx="{px(b):.1f}" cy="{py(f):.1f}" {marker}/>')

    ratios = sorted({(r["q_heads"], r["kv_heads"]) for r in rows})
    for i, (hq, hkv) in enumerate(ratios):
        color = COLORS[i % len(COLORS)]
        draw(sorted((r["bytes"], r["fraction_of_read"]) for r in rows
                    if (r["q_heads"], r["kv_heads"]) == (hq, hkv)), color)
        out.append(f'<text x="{x0 + MARGIN + 8}" y="{MARGIN + h - 10 - 14 * i}" '
                   f'font-size="11" fill="{color}">{hq}/{hkv}</text>')
        draw(sorted((b, f) for q, k, b, f in peer if (q, k) == (hq, hkv)),
             color, hollow=True)
    if peer:
        out.append(f'<text x="{x0 + MARGIN + w - 6}" y="{MARGIN + h - 10}" '
                   'text-anchor="end" font-size="11">filled: attn, hollow: '
                   'cuDNN</text>')
    return out


def load_peer(path):
    """(q_heads, kv_heads, bytes, fraction) of cuDNN's rows in a
    `bench/sdpa.py` decode JSON."""
    with open(path) as f:
        rows = json.load(f)["rows"]
    out = []
    for row in rows:
        c, r = row["config"], row["backends"].get("CUDNN_ATTENTION", {})
        if r.get("fraction_of_read") is not None:
            out.append((c["q_heads"], c["kv_heads"], c["bytes"],
                        r["fraction_of_read"]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="attn-bench decode --json outputs ('-': stdin)")
    parser.add_argument("-o", "--output", default="decode-roof.svg")
    parser.add_argument("--peer", help="bench/sdpa.py decode JSON: cuDNN's "
                        "rows in the bf16 panel")
    args = parser.parse_args()
    peer = load_peer(args.peer) if args.peer else []
    rows = load(args.json)
    if not rows:
        sys.exit("decode_roof.py: no decode rows")
    kvs = sorted({r["kv"] for r in rows}, key=lambda k: list(TARGETS).index(k)
                 if k in TARGETS else 99)
    lo = math.floor(math.log10(min(r["bytes"] for r in rows)))
    hi = math.ceil(math.log10(max(r["bytes"] for r in rows)))
    body = []
    for i, kv in enumerate(kvs):
        body += panel([r for r in rows if r["kv"] == kv], kv, i * WIDTH, lo, hi,
                      peer if kv == "bf16" else ())
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH * len(kvs)}" '
           f'height="{HEIGHT}" font-family="sans-serif">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n'
           + "\n".join(body) + "\n</svg>\n")
    with open(args.output, "w") as f:
        f.write(svg)
    print(f"decode_roof.py: {len(rows)} rows, {len(kvs)} panels -> {args.output}")


if __name__ == "__main__":
    main()
