//===- decode-host.cpp - a C++ host using attn's JIT ----------------------===//
//
//   attn-example-decode SPEC.mlir
//
// What an inference engine does with attn, end to end:
//  1. reads an attn spec (examples/decode.mlir), lowers it with attn-pipeline
//     and JIT-compiles every kernel in it to a cubin with NVRTC (no GPU
//     needed; cubins land in the kernel cache);
//  2. where a GPU exists, describes the spec's decode as an
//  attn::DecodeVariant,
//     gets the loaded kernel from attn::Jit, plans and runs a batch on random
//     data, and compares the result with the fp64 reference.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"
#include "compiler/Jit/Jit.h"
#include "dialect/IR/AttnOps.h"
#include "test/reference/DecodeCheck.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace attn;

namespace {

int fail(llvm::Error err) {
  llvm::errs() << "attn-example-decode: " << llvm::toString(std::move(err))
               << "\n";
  return 1;
}

/// The host-side description of a spec's attn.decode op.
DecodeVariant variantOf(mlir::attn::DecodeOp op) {
  auto q = mlir::cast<mlir::RankedTensorType>(op.getQ().getType());
  mlir::attn::PagedKVType cache = op.getCache().getType();
  DecodeVariant v;
  v.qType = *mlir::attn::toScalarType(q.getElementType());
  v.kvType = *mlir::attn::toScalarType(cache.getElementType());
  v.numQHeads = int(q.getDimSize(1));
  v.numKVHeads = int(cache.getNumKvHeads());
  v.headDim = int(cache.getHeadDim());
  v.pageSize = int(cache.getPageSize());
  v.layout = cache.getLayout();
  v.queryLen = int(op.getQueryLen());
  mlir::attn::MaskAttr mask = op.getMaskAttr();
  v.causal = mask && mask.isCausal();
  if (mask && mask.getWindowLeft())
    v.windowLeft = int(*mask.getWindowLeft());
  if (auto softcap = op.getSoftcapAttr())
    v.softcap = float(softcap.getValueAsDouble());
  if (auto scale = op.getScaleAttr())
    v.scale = float(scale.getValueAsDouble());
  v.kind = op.getKind();
  v.alibi = bool(op.getAlibiSlopes());
  v.writeLse = bool(op.getLse());
  if (op.getKScale())
    v.perHeadKVScale =
        mlir::cast<mlir::RankedTensorType>(op.getKScale().getType())
            .getDimSize(0) > 1;
  return v;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: attn-example-decode SPEC.mlir\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1; // the parser printed a located diagnostic
  mlir::attn::DecodeOp decode;
  module->walk([&](mlir::attn::DecodeOp op) {
    if (!decode)
      decode = op;
  });
  if (!decode) {
    llvm::errs() << "attn-example-decode: " << argv[1]
                 << " has no attn.decode\n";
    return 1;
  }
  DecodeVariant variant = variantOf(decode);

  // Target: the GPU's arch when there is one; NVRTC needs no GPU.
  Arch arch = Arch::SM90a;
  bool gpu = true;
  if (llvm::Error err = runtime::initCuda()) {
    llvm::outs() << "no GPU (" << llvm::toString(std::move(err))
                 << "): compiling for sm_90a only\n";
    gpu = false;
  } else if (auto deviceArch = runtime::currentDeviceArch()) {
    arch = *deviceArch;
  } else {
    return fail(deviceArch.takeError());
  }

  // 1. Every kernel of the spec, lowered and compiled.
  auto specs = mlir::attn::lowerToKernelSpecs(*module, arch);
  if (!specs)
    return fail(specs.takeError());
  runtime::KernelCache &cache = runtime::KernelCache::global();
  for (const KernelSpec &spec : *specs) {
    runtime::CompileRequest request{spec.uri(), emitCuda(spec), arch};
    auto cubin = cache.getCubin(request);
    if (!cubin)
      return fail(cubin.takeError());
    std::optional<std::string> path = cache.diskPath(request);
    llvm::outs() << llvm::formatv("{0}: {1} bytes of cubin for {2}{3}\n",
                                  kernelSymbol(spec), (*cubin)->size(),
                                  toString(arch),
                                  path ? " at " + *path : std::string());
  }
  if (!gpu)
    return 0;

  // 2. The decode through the JIT API, checked against the reference.
  auto kernel = Jit::global().decode(variant);
  if (!kernel)
    return fail(kernel.takeError());
  check::DecodeCheckOptions options;
  options.seqLens = {1, 100, 1000, 4000, 17};
  auto result = check::checkDecode(**kernel, variant, options);
  if (!result)
    return fail(result.takeError());
  double tolerance = variant.qType == ScalarType::BF16 ? 1e-2 : 4e-3;
  bool ok = result->outError < tolerance;
  llvm::outs() << llvm::formatv(
      "ran {0} on {1} requests: relative L2 error vs fp64 reference {2:e} "
      "(tolerance {3:e}): {4}\n",
      kernelSymbol((*kernel)->spec()), options.seqLens.size(), result->outError,
      tolerance, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
