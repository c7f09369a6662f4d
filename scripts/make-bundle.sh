#!/usr/bin/env bash
# Copies the self-contained binaries a GPU host needs into bundle/ (git-ignored;
# pass it to the device tool with carry). They link LLVM statically, so the
# host needs only the CUDA driver and toolkit (NVRTC, headers). The C ABI's
# libraries go to bundle/lib, where the C example finds them ($ORIGIN/../lib).
# Symbols are stripped (about 60 MB instead of 91).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
rm -rf "$root/bundle" && mkdir -p "$root/bundle/bin" "$root/bundle/lib"
for b in AttnGpuTests AttnUnitTests AttnRuntimeTests attn-bench attn-opt serve-sim attn-aot \
         attn-translate attn-example-decode attn-example-c-decode AttnCApiGpuTests \
         AttnCApiRuntimeOnlyTests; do
  [[ -x "$build/bin/$b" ]] && strip -o "$root/bundle/bin/$b" "$build/bin/$b"
done
for l in libattn_c.so libattn_runtime_c.so; do
  [[ -f "$build/lib/$l" ]] && strip -o "$root/bundle/lib/$l" "$build/lib/$l"
done
if ldd "$root"/bundle/bin/* "$root"/bundle/lib/* | grep -E 'libLLVM|libMLIR'; then
  echo "error: a bundled binary needs libLLVM/libMLIR" >&2
  exit 1
fi
du -sh "$root/bundle"
