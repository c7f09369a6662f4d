// attn-aot never overwrites or deletes files it did not write: an empty -o,
// an -o that is a file, a non-empty directory without an attn-aot manifest
// and one with an invalid manifest are refused and left as they were; a
// rebuild removes only the files its previous manifest listed and the new
// one does not; --pack refuses a path inside the library and an existing
// file that is not a packed library.

// RUN: rm -rf %t && mkdir -p %t/cwd
// RUN: echo '{"append_kv": [{"head_dim": [64, 128]}]}' > %t/two.json
// RUN: echo '{"append_kv": [{"head_dim": 64}]}' > %t/one.json

// An empty -o wrote the library into the filesystem root.
// RUN: cd %t/cwd && not attn-aot %t/two.json --arch sm_90a -o "" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=EMPTY-O
// EMPTY-O: attn-aot: -o is empty: name the library directory to build
// RUN: ls %t/cwd | count 0

// RUN: echo precious > %t/file
// RUN: not attn-aot %t/two.json --arch sm_90a -o %t/file 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FILE
// FILE: attn-aot: -o '{{.*}}file' exists and is not a directory
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/file
// PRECIOUS: precious

// A stranger's directory, even one shaped like a library, is not touched.
// RUN: mkdir -p %t/stranger/sm_80 %t/stranger/sm_90a
// RUN: echo precious > %t/stranger/sm_80/mine.cubin
// RUN: echo precious > %t/stranger/sm_90a/mine.cu
// RUN: not attn-aot %t/two.json --arch sm_90a -o %t/stranger 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STRANGER
// STRANGER: attn-aot: -o '{{.*}}stranger' is not empty and holds no attn-aot manifest; attn-aot builds only into a new or empty directory or a library it wrote: remove it or pick another -o
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/stranger/sm_80/mine.cubin
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/stranger/sm_90a/mine.cu
// RUN: not ls %t/stranger/manifest.json

// RUN: mkdir -p %t/badlib && echo '{"format": "something else"}' > %t/badlib/manifest.json
// RUN: not attn-aot %t/two.json --arch sm_90a -o %t/badlib 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BADLIB
// BADLIB: attn-aot: '{{.*}}badlib/manifest.json' is not a valid attn-aot library manifest ({{.*}}has format "something else"; this runtime reads "attn-aot-4"); attn-aot builds only into a new or empty directory or a library it wrote: remove it or pick another -o
// RUN: FileCheck %s --check-prefix=BADLIB-KEPT < %t/badlib/manifest.json
// BADLIB-KEPT: something else

// An empty directory is fine.
// RUN: mkdir -p %t/lib
// RUN: attn-aot %t/two.json --arch sm_90a -o %t/lib | FileCheck %s --check-prefix=TWO
// TWO: attn-aot: 2 kernels in {{.*}}lib (2 compiled, 0 up to date)
// RUN: ls %t/lib/sm_90a/*.cubin | count 2

// Files added to a library are not the library's to delete; the dropped
// kernel's files are.
// RUN: echo precious > %t/lib/sm_90a/notes.cu
// RUN: mkdir -p %t/lib/sm_80 && echo precious > %t/lib/sm_80/other.cubin
// RUN: attn-aot %t/one.json --arch sm_90a -o %t/lib | FileCheck %s --check-prefix=ONE
// ONE: attn-aot: 1 kernels in {{.*}}lib (0 compiled, 1 up to date)
// RUN: ls %t/lib/sm_90a/*.cubin | count 1
// RUN: ls %t/lib/sm_90a/*d64*.cu | count 1
// RUN: not ls %t/lib/sm_90a/*d128*
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/lib/sm_90a/notes.cu
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/lib/sm_80/other.cubin

// --pack OUT/manifest.json replaced the library's manifest with the pack.
// RUN: not attn-aot %t/one.json --arch sm_90a -o %t/lib --pack %t/lib/manifest.json 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PACK-IN
// PACK-IN: attn-aot: will not pack into '{{.*}}lib/manifest.json': it lies inside the library directory '{{.*}}lib'; pack to a path outside it
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/lib/manifest.json
// MANIFEST: "format": "attn-aot-4"

// RUN: not attn-aot %t/one.json --arch sm_90a -o %t/lib --pack %t/file 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PACK-FILE
// PACK-FILE: attn-aot: will not pack into '{{.*}}file': the existing file is not a packed attn library; remove it or pick another path
// RUN: FileCheck %s --check-prefix=PRECIOUS < %t/file

// A packed library is replaced.
// RUN: attn-aot %t/one.json --arch sm_90a -o %t/lib --pack %t/lib.attnlib | FileCheck %s --check-prefix=PACKED
// RUN: attn-aot %t/one.json --arch sm_90a -o %t/lib --pack %t/lib.attnlib | FileCheck %s --check-prefix=PACKED
// PACKED: packed into {{.*}}lib.attnlib
