// An SSA name used before it is defined in a region nested inside the op
// that uses it: invalid (a region's values are not visible outside it), and
// MLIR 19's parser then keeps an operand pointing at a deleted placeholder
// and writes through it. attn-opt refuses it, located, before MLIR parses.
// RUN: not attn-opt %s 2>&1 | FileCheck %s
// CHECK: error: {{.*}}forward-reference.mlir:9:15: uses %c before it is defined in a region nested inside (10:5); a value defined in a region is not visible outside it
// CHECK-NOT: error
func.func @f(%a: f32) -> f32 {
  %r = scf.if %c -> (f32) {
    %c = arith.constant true
    scf.yield %a : f32
  } else {
    scf.yield %a : f32
  }
  return %r : f32
}
// The same names in sibling regions and in another function are fine.
func.func @g(%a: f32, %c: i1) -> f32 {
  %r = scf.if %c -> (f32) {
    %x = arith.addf %a, %a : f32
    scf.yield %x : f32
  } else {
    %x = arith.mulf %a, %a : f32
    scf.yield %x : f32
  }
  return %r : f32
}
