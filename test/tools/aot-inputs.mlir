// attn-aot on configs it cannot trust: a FIFO or a device is refused without
// blocking or reading it, and JSON nested past the limit or with duplicate
// keys is refused before the parser sees it; each error names the file and
// the problem.

// RUN: rm -rf %t && mkdir -p %t

// RUN: mkfifo %t/fifo.json
// RUN: not timeout 60 attn-aot %t/fifo.json --arch sm_90a -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FIFO
// FIFO: attn-aot: cannot read the config: '{{.*}}fifo.json' is not a regular file (it is a FIFO)

// RUN: not timeout 60 attn-aot /dev/zero --arch sm_90a -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO
// ZERO: attn-aot: cannot read the config: '/dev/zero' is not a regular file (it is a device)

// RUN: %python -c "print('{\"decode\": ' + '[' * 100000 + ']' * 100000 + '}')" > %t/deep.json
// RUN: not attn-aot %t/deep.json --arch sm_90a -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DEEP
// DEEP: error: {{.*}}deep.json: JSON nests deeper than the limit of 64 levels at line 1, column 75

// RUN: echo '{"decode": [{"head_dim": 64, "head_dim": 128}]}' > %t/dup.json
// RUN: not attn-aot %t/dup.json --arch sm_90a -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DUP
// DUP: error: {{.*}}dup.json: duplicate key "head_dim" at line 1, column 30
