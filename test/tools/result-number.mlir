// MLIR 19 sizes a name's table of results by N in `%name#N` before it
// checks N: 2^32-1 wrapped to a write out of bounds, 10^8 allocated 1.6 GB.
// attn-opt refuses such a number, located, before MLIR parses the text.
// RUN: not attn-opt %s 2>&1 | FileCheck %s
// CHECK: error: {{.*}}result-number.mlir:8:22: refers to result 4294967295 of an op; attn parses result numbers up to 63
func.func @f(%a: f32) -> f32 {
  %y = arith.addf %z#1, %a : f32
  %w = arith.addf %z#4294967295, %a : f32
  // The largest number accepted, and one not read as a reference.
  %v = arith.addf %z#63, %a {note = "%x#99999"} : f32
  return %y : f32
}
