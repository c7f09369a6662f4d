//===- attn-opt.cpp - attn optimizer driver -------------------------------===//
//
// mlir-opt for attn: parses attn IR, verifies it, runs attn passes and
// pipelines, and prints the result.
//
//===----------------------------------------------------------------------===//
#include "tools/RegisterAttn.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::attn::registerAttnPassesAndPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "attn optimizer driver\n", registry));
}
