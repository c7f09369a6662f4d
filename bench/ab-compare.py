#!/usr/bin/env python3
"""Compares the A and B runs scripts/ab-bench.sh wrote to a folder: per row
of attn-bench decode (GB/s) and prefill (TFLOP/s ragged, paged, paged e4m3),
the mean of B over the mean of A, and the min, max and geometric mean.

    bench/ab-compare.py OUT_DIR
"""
import re,statistics,sys
def rows(f, key_cols):
    out={}
    for l in open(f):
        p=l.split()
        if len(p) < key_cols+2: continue
        if not (p[0] in ('bf16','e4m3','e5m2') or p[0].isdigit()): continue
        try: out[tuple(p[:key_cols])]=[float(x.rstrip('%')) for x in p[key_cols:]]
        except ValueError: pass
    return out
def comp(kind, key_cols, idx, label, files_a, files_b):
    A=[rows(f,key_cols) for f in files_a]; B=[rows(f,key_cols) for f in files_b]
    ratios=[]
    print(f"## {kind}: {label} (B/A)")
    for k in A[0]:
        a=statistics.mean(r[k][idx] for r in A); b=statistics.mean(r[k][idx] for r in B)
        ratios.append(b/a)
        print(' '.join(k), f"A={a:.1f} B={b:.1f} B/A={b/a:.3f}")
    print(f"min {min(ratios):.3f} max {max(ratios):.3f} geomean {statistics.geometric_mean(ratios):.4f}")
d=sys.argv[1]
import glob,os
da=sorted(glob.glob(d+'/ab-decode-a*.txt')); db=sorted(glob.glob(d+'/ab-decode-b*.txt'))
pa=sorted(glob.glob(d+'/ab-prefill-a*.txt')); pb=sorted(glob.glob(d+'/ab-prefill-b*.txt'))
if da and db:
    comp('decode',4,1,'GB/s',da,db)
if pa and pb:
    for col,name in [(1,'TFLOP/s ragged'),(2,'paged bf16'),(3,'paged e4m3')]:
        comp('prefill',5,col,name,pa,pb)
