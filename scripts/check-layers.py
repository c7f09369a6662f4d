#!/usr/bin/env python3
"""Fails if a file includes a header of a layer above its own
(docs/architecture.md draws them): spec/ and templates/ are the leaves;
codegen/ uses spec/; dialect/ uses spec/; runtime/ uses spec/, codegen/ and
its own folders bottom up (support -> kernels -> cache -> serving); the
compiler may use all of those but the runtime (the JIT in compiler/Jit may);
capi/ (the C ABI) sits on top and may use everything."""
import os, re, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runtime_layers = ["support", "kernels", "cache", "serving"]
# What each top-level part may include (besides itself and templates/).
allowed = {
    "spec": {"spec"},
    "templates": set(),
    "codegen": {"spec", "codegen"},
    "dialect": {"spec", "dialect"},
    "runtime": {"spec", "codegen", "runtime"},
    "compiler": {"spec", "codegen", "dialect", "compiler"},
    "capi": {"spec", "codegen", "dialect", "compiler", "runtime", "capi"},
}
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def part_of(header):
    if header.startswith("attn/runtime/"):
        return "runtime", header.split("/")[2]
    top = header.split("/")[0]
    if top == "runtime":
        return "runtime", header.split("/")[1]
    return top, None


problems = []
for part in allowed:
    for dirpath, _, files in os.walk(os.path.join(root, part)):
        for name in files:
            if not name.endswith((".h", ".cpp", ".cuh", ".td")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            own_layer = next((l for l in runtime_layers if f"/{l}/" in rel), None)
            jit = rel.startswith("compiler/Jit/")
            for header in include.findall(open(path, encoding="utf-8").read()):
                target, layer = part_of(header)
                if target not in allowed and target != "runtime":
                    continue  # a system or third-party header
                ok = target in allowed[part] or target == "templates" or (
                    jit and target == "runtime")
                if ok and part == "runtime" and target == "runtime" and layer in runtime_layers and own_layer:
                    ok = runtime_layers.index(layer) <= runtime_layers.index(own_layer)
                if not ok:
                    problems.append(f"{rel}: includes {header}, a layer above it")
for p in problems:
    print(p)
print(f"{len(problems)} upward includes")
sys.exit(1 if problems else 0)
