//===- attn-translate.cpp - attn translation driver -----------------------===//
//
// mlir-translate for attn. `--attn-to-cuda` prints the CUDA C++ translation
// unit of every distinct kernel of lowered attn IR (attn-opt --attn-pipeline
// output), in IR order, separated by `// -----` lines so a consumer can split
// them into one NVRTC program each.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "compiler/Transforms/KernelSpecs.h"
#include "dialect/IR/AttnOps.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include <vector>

using namespace mlir;
using namespace mlir::attn;

/// The CUDA translation units of the kernel launches in `op`.
static LogicalResult translateToCuda(Operation *op, raw_ostream &os) {
  // Everything attn must be lowered: a translation of half-lowered IR would
  // silently drop the ops that are left.
  WalkResult unlowered = op->walk([](Operation *nested) {
    if (isa<AttnDialect>(nested->getDialect()) &&
        !isa<KernelLaunchOp>(nested)) {
      nested->emitError() << "'" << nested->getName()
                          << "' is not lowered to a kernel launch; run "
                             "attn-opt --attn-pipeline first";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (unlowered.wasInterrupted())
    return failure();

  // Equal specs are one kernel: print each once, in IR order.
  std::vector<::attn::KernelSpec> specs;
  bool any = false;
  WalkResult result = op->walk([&](KernelLaunchOp launch) {
    any = true;
    FailureOr<::attn::KernelSpec> spec = getKernelSpec(launch);
    if (failed(spec))
      return WalkResult::interrupt();
    if (llvm::find(specs, *spec) == specs.end())
      specs.push_back(*spec);
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  if (!any)
    return op->emitError() << "no attn.kernel_launch to translate; run "
                              "attn-opt --attn-pipeline first";

  for (size_t i = 0; i < specs.size(); ++i) {
    if (i)
      os << "// -----\n";
    os << ::attn::emitCuda(specs[i]);
  }
  return success();
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCuda(
      "attn-to-cuda", "lowered attn IR to CUDA C++ translation units",
      translateToCuda,
      [](DialectRegistry &registry) { registerAttnDialects(registry); });
  return failed(mlirTranslateMain(argc, argv, "attn translation driver\n"));
}
