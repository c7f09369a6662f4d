// RUN: attn-opt %s --split-input-file --verify-diagnostics
// RUN: attn-opt %s --split-input-file --attn-pipeline --verify-diagnostics

// MLIR 19 parses an i1 array written with integers into an attribute with
// no data and crashes printing it (an upstream bug); attn-opt refuses it,
// located, before any pass runs or anything is printed.

// expected-error @+1 {{attribute 'a' is an i1 array written with integers, which MLIR 19 cannot hold (an upstream bug); write true and false}}
func.func @int_bool_array() attributes {a = array<i1: 1>} { return }

// -----

// Written with true/false, the same array is fine.
func.func @bool_array() attributes {a = array<i1: true, false>} { return }

// -----

// The parser verifies before any pass: an op the verifier rejects, holding
// such an array, is reported without printing the op (which crashed).
// expected-error @+1 {{unregistered operation 'attn.nonexistent' found in dialect ('attn') that does not allow unknown operations}}
"attn.nonexistent"() <{segments = array<i1: 1, 0>}> : () -> ()
