// attn-aot on configs it cannot trust: a FIFO or a device is refused without
// blocking or reading it, and JSON nested past the limit or with duplicate
// keys is refused before the parser sees it; a config standing for millions
// of variants is refused before it is expanded, and out-of-range integers,
// empty lists, inapplicable fields and the old "window" key are errors. Each
// error names the file, the entry and the problem; a config that yields no
// kernel writes nothing.

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

// Under 450 bytes for 12.8 million combinations (25.6 million variants on two
// archs): expanding it ran out of memory.
// RUN: echo '{"decode": [{"num_q_heads": [1,2,3,4,5,6,7,8,9,10], "num_kv_heads": [1,2,3,4,5,6,7,8,9,10], "head_dim": [1,2,3,4,5,6,7,8,9,10], "page_size": [1,2,3,4,5,6,7,8,9,10], "query_len": [1,2,3,4,5,6,7,8,9,10], "causal": [false,true], "cross": [false,true], "alibi": [false,true], "write_lse": [false,true], "softcap": [false,true], "window_left": [false,true], "per_head_kv_scale": [false,true]}]}' > %t/huge.json
// RUN: not attn-aot %t/huge.json --arch sm_80,sm_90a -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HUGE
// HUGE: error: {{.*}}huge.json: decode[0] stands for 25600000 variants (12800000 combinations of alibi: 2, causal: 2, cross: 2, head_dim: 10, num_kv_heads: 10, num_q_heads: 10, page_size: 10, per_head_kv_scale: 2, query_len: 10, softcap: 2, window_left: 2, write_lse: 2; times 2 archs), more than the limit of 10000 variants; --max-variants N raises it

// --max-variants sets the limit.
// RUN: echo '{"append_kv": [{"head_dim": [64, 128]}]}' > %t/two.json
// RUN: not attn-aot %t/two.json --arch sm_90a --max-variants 1 -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LIMIT
// LIMIT: error: {{.*}}two.json: append_kv[0] stands for 2 variants (2 combinations of head_dim: 2; times 1 arch), more than the limit of 1 variants; --max-variants N raises it
// RUN: attn-aot %t/two.json --arch sm_90a --max-variants 2 -o %t/two | FileCheck %s --check-prefix=TWO
// TWO: attn-aot: 2 kernels in {{.*}}two (2 compiled, 0 up to date)

// 4294967328 is 32 once cut to an int.
// RUN: echo '{"decode": [{"num_q_heads": 4294967328}]}' > %t/int.json
// RUN: not attn-aot %t/int.json --arch sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=INT
// INT: error: {{.*}}int.json: decode[0] {num_q_heads=4294967328}: "num_q_heads" must be an integer from 1 to 2147483647, not 4294967328

// RUN: echo '{"decode": [{"head_dim": []}], "prefill": []}' > %t/empty.json
// RUN: not attn-aot %t/empty.json --arch sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY-DAG: error: {{.*}}empty.json: decode[0]: "head_dim" is an empty list
// EMPTY-DAG: error: {{.*}}empty.json: "prefill" is an empty list

// RUN: echo '{"prefill": [{"page_size": 16, "window": true}]}' > %t/fields.json
// RUN: not attn-aot %t/fields.json --arch sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=FIELDS
// FIELDS-DAG: error: {{.*}}fields.json: prefill[0]: unknown field "window" (renamed "window_left")
// FIELDS-DAG: error: {{.*}}fields.json: prefill[0]: "page_size" applies to paged prefill only, and this entry is not paged

// RUN: echo '{"cache_ops": false}' > %t/none.json
// RUN: not attn-aot %t/none.json --arch sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: {{.*}}none.json: the config yields no kernel

// None of the refused configs wrote anything.
// RUN: not ls %t/out
