//===- AotLibrary.cpp - ahead-of-time kernel libraries --------------------===//
#include "attn/runtime/AotLibrary.h"
#include "attn/runtime/VariantKey.h"

#include "codegen/EmitCuda.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

namespace attn::runtime {

namespace {

namespace json = llvm::json;

constexpr char kPackMagic[8] = {'A', 'T', 'T', 'N', 'L', 'I', 'B', '1'};
constexpr llvm::StringLiteral kFormat = "attn-aot-1";

llvm::Error libraryError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError("AOT library '" + path.str() +
                                 "': " + message.str());
}

json::Object specToJson(const KernelSpec &s) {
  json::Object o{{"kind", std::string(toString(s.kind))},
                 {"arch", std::string(toString(s.arch))},
                 {"q_type", std::string(toString(s.qType))},
                 {"kv_type", std::string(toString(s.kvType))},
                 {"num_q_heads", s.numQHeads},
                 {"num_kv_heads", s.numKVHeads},
                 {"head_dim", s.headDim},
                 {"page_size", s.pageSize},
                 {"layout", std::string(toString(s.layout))},
                 {"query_len", s.queryLen},
                 {"causal", s.causal},
                 {"sliding_window", s.slidingWindow},
                 {"alibi", s.alibi},
                 {"softcap", s.softcap},
                 {"per_head_kv_scale", s.perHeadKVScale},
                 {"write_lse", s.writeLse}};
  o["decode_schedule"] = json::Object{{"warps", s.schedule.warps},
                                      {"stages", s.schedule.stages},
                                      {"row_tiles", s.schedule.rowTiles},
                                      {"min_chunk_tokens", s.schedule.minChunkTokens},
                                      {"ctas_per_sm", s.schedule.ctasPerSM}};
  o["prefill_schedule"] = json::Object{{"warps", s.prefillSchedule.warps},
                                       {"block_m", s.prefillSchedule.blockM},
                                       {"block_n", s.prefillSchedule.blockN},
                                       {"stages", s.prefillSchedule.stages},
                                       {"mma", std::string(toString(s.prefillSchedule.mma))}};
  return o;
}

/// Reads fields of one JSON object, remembering the first problem.
class FieldReader {
public:
  FieldReader(const json::Object *object, std::string where)
      : object(object), where(std::move(where)) {
    if (!object)
      fail("is not an object");
  }
  void fail(const llvm::Twine &message) {
    if (problem.empty())
      problem = where + " " + message.str();
  }
  const json::Value *get(llvm::StringRef name) {
    const json::Value *value = object ? object->get(name) : nullptr;
    if (object && !value)
      fail("lacks \"" + name + "\"");
    return value;
  }
  int64_t integer(llvm::StringRef name) {
    const json::Value *v = get(name);
    std::optional<int64_t> i = v ? v->getAsInteger() : std::nullopt;
    if (v && !i)
      fail("\"" + name + "\" is not an integer");
    return i.value_or(0);
  }
  uint64_t hex(llvm::StringRef name) {
    std::string text = string(name);
    uint64_t value = 0;
    if (!text.empty() && llvm::StringRef(text).getAsInteger(16, value))
      fail("\"" + name + "\" is not a hex number");
    return value;
  }
  double number(llvm::StringRef name) {
    const json::Value *v = get(name);
    std::optional<double> d = v ? v->getAsNumber() : std::nullopt;
    if (v && !d)
      fail("\"" + name + "\" is not a number");
    return d.value_or(0);
  }
  bool boolean(llvm::StringRef name) {
    const json::Value *v = get(name);
    std::optional<bool> b = v ? v->getAsBoolean() : std::nullopt;
    if (v && !b)
      fail("\"" + name + "\" is not a boolean");
    return b.value_or(false);
  }
  std::string string(llvm::StringRef name) {
    const json::Value *v = get(name);
    std::optional<llvm::StringRef> s = v ? v->getAsString() : std::nullopt;
    if (v && !s)
      fail("\"" + name + "\" is not a string");
    return s.value_or("").str();
  }
  template <class T>
  T parsed(llvm::StringRef name, std::optional<T> (*parse)(std::string_view)) {
    std::string text = string(name);
    std::optional<T> value = parse(text);
    if (!value) {
      fail("has an unknown " + name + " \"" + text + "\"");
      return T{};
    }
    return *value;
  }
  const json::Object *object;
  std::string where;
  std::string problem;
};

void readSpec(FieldReader &r, KernelSpec &s) {
  s.kind = r.parsed<KernelKind>("kind", parseKernelKind);
  s.arch = r.parsed<Arch>("arch", parseArch);
  s.qType = r.parsed<ScalarType>("q_type", parseScalarType);
  s.kvType = r.parsed<ScalarType>("kv_type", parseScalarType);
  s.numQHeads = int(r.integer("num_q_heads"));
  s.numKVHeads = int(r.integer("num_kv_heads"));
  s.headDim = int(r.integer("head_dim"));
  s.pageSize = int(r.integer("page_size"));
  s.layout = r.parsed<KVLayout>("layout", parseKVLayout);
  s.queryLen = int(r.integer("query_len"));
  s.causal = r.boolean("causal");
  s.slidingWindow = r.boolean("sliding_window");
  s.alibi = r.boolean("alibi");
  s.softcap = r.boolean("softcap");
  s.perHeadKVScale = r.boolean("per_head_kv_scale");
  s.writeLse = r.boolean("write_lse");
  const json::Value *decode = r.get("decode_schedule");
  FieldReader d(decode ? decode->getAsObject() : nullptr, r.where + " decode_schedule");
  s.schedule.warps = int(d.integer("warps"));
  s.schedule.stages = int(d.integer("stages"));
  s.schedule.rowTiles = int(d.integer("row_tiles"));
  s.schedule.minChunkTokens = int(d.integer("min_chunk_tokens"));
  s.schedule.ctasPerSM = int(d.integer("ctas_per_sm"));
  const json::Value *prefill = r.get("prefill_schedule");
  FieldReader p(prefill ? prefill->getAsObject() : nullptr, r.where + " prefill_schedule");
  s.prefillSchedule.warps = int(p.integer("warps"));
  s.prefillSchedule.blockM = int(p.integer("block_m"));
  s.prefillSchedule.blockN = int(p.integer("block_n"));
  s.prefillSchedule.stages = int(p.integer("stages"));
  // Manifests written before the wgmma path have no "mma": mma.sync.
  if (prefill && prefill->getAsObject() && prefill->getAsObject()->get("mma"))
    s.prefillSchedule.mma = p.parsed<PrefillMma>("mma", parsePrefillMma);
  for (FieldReader *sub : {&d, &p})
    if (!sub->problem.empty())
      r.fail(sub->problem);
}

/// Parses manifest text into kernels.
llvm::Expected<std::vector<AotKernel>> parseManifest(llvm::StringRef path,
                                                     llvm::StringRef text,
                                                     bool packed) {
  llvm::Expected<json::Value> root = json::parse(text);
  if (!root)
    return libraryError(path, "manifest is not JSON: " +
                                  llvm::toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  FieldReader top(object, "manifest");
  std::string format = top.string("format");
  if (top.problem.empty() && format != kFormat)
    top.fail(llvm::formatv("has format \"{0}\"; this runtime reads \"{1}\"",
                           format, kFormat));
  const json::Value *list = top.get("kernels");
  const json::Array *array = list ? list->getAsArray() : nullptr;
  if (list && !array)
    top.fail("\"kernels\" is not an array");
  if (!top.problem.empty())
    return libraryError(path, top.problem);
  std::vector<AotKernel> kernels;
  for (size_t i = 0; i < array->size(); ++i) {
    FieldReader r((*array)[i].getAsObject(), llvm::formatv("kernels[{0}]", i));
    AotKernel k;
    k.key = r.string("key");
    k.name = r.string("name");
    if (const json::Value *keys = r.get("kernel_keys")) {
      const json::Array *list = keys->getAsArray();
      if (!list)
        r.fail("\"kernel_keys\" is not a list");
      for (size_t j = 0; list && j < list->size(); ++j) {
        std::optional<llvm::StringRef> key = (*list)[j].getAsString();
        if (!key)
          r.fail("\"kernel_keys\" holds a non-string");
        else
          k.kernelKeys.push_back(key->str());
      }
    }
    const json::Value *spec = r.get("spec");
    FieldReader s(spec ? spec->getAsObject() : nullptr, r.where + " spec");
    readSpec(s, k.spec);
    if (!s.problem.empty())
      r.fail(s.problem);
    k.size = uint64_t(r.integer("size"));
    k.checksum = r.hex("checksum");
    k.compileSeconds = r.number("compile_seconds");
    if (packed) {
      k.offset = uint64_t(r.integer("offset"));
    } else {
      k.source = r.string("source");
      k.cubin = r.string("cubin");
    }
    if (r.problem.empty() && k.name != k.spec.uri())
      r.fail("names \"" + k.name + "\", but its spec is \"" + k.spec.uri() + "\"");
    if (!r.problem.empty())
      return libraryError(path, r.problem);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return libraryError(path, "cannot read: " + buffer.getError().message());
  return std::move(*buffer);
}

constexpr size_t kPackHeaderSize = sizeof(kPackMagic) + 8;

} // namespace

uint64_t cubinChecksum(llvm::StringRef cubin) { return llvm::xxh3_64bits(cubin); }

std::string manifestJson(llvm::ArrayRef<AotKernel> kernels) {
  json::Array list;
  for (const AotKernel &k : kernels) {
    json::Object o{{"key", k.key},
                   {"name", k.name},
                   {"kernel_keys", json::Array(k.kernelKeys)},
                   {"arch", std::string(toString(k.spec.arch))},
                   {"spec", specToJson(k.spec)},
                   {"size", int64_t(k.size)},
                   {"checksum", llvm::utohexstr(k.checksum, /*LowerCase=*/true)},
                   {"compile_seconds", k.compileSeconds}};
    if (k.cubin.empty())
      o["offset"] = int64_t(k.offset);
    else {
      o["source"] = k.source;
      o["cubin"] = k.cubin;
    }
    list.push_back(std::move(o));
  }
  json::Object root{{"format", kFormat},
                    {"attn_version", ATTN_VERSION},
                    {"kernels", std::move(list)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", json::Value(std::move(root))) << "\n";
  return text;
}

/// Writes `bytes` to a temporary name next to `path` and renames it into
/// place, so readers see the old file or the whole new one.
static llvm::Error writeAtomically(llvm::StringRef path, llvm::StringRef bytes) {
  std::string temp = (path + ".tmp").str();
  {
    std::error_code error;
    llvm::raw_fd_ostream os(temp, error);
    if (error)
      return llvm::createStringError("cannot write " + temp + ": " + error.message());
    os << bytes;
    os.close();
    if (os.has_error())
      return llvm::createStringError("cannot write " + temp + ": " +
                                     os.error().message());
  }
  if (std::error_code error = llvm::sys::fs::rename(temp, path))
    return llvm::createStringError("cannot rename " + temp + " into place: " +
                                   error.message());
  return llvm::Error::success();
}

llvm::Error writeKernelFiles(llvm::StringRef dir, AotKernel &kernel,
                             llvm::StringRef source, llvm::StringRef cubin) {
  std::string arch(toString(kernel.spec.arch));
  llvm::SmallString<256> archDir(dir);
  llvm::sys::path::append(archDir, arch);
  if (std::error_code error = llvm::sys::fs::create_directories(archDir))
    return libraryError(dir, "cannot create " + archDir.str() + ": " + error.message());
  kernel.source = arch + "/" + kernel.name + ".cu";
  kernel.cubin = arch + "/" + kernel.name + "-" + kernel.key.substr(0, 16) + ".cubin";
  kernel.size = cubin.size();
  kernel.checksum = cubinChecksum(cubin);
  if (llvm::Error error = writeAtomically((dir + "/" + kernel.source).str(), source))
    return error;
  return writeAtomically((dir + "/" + kernel.cubin).str(), cubin);
}

llvm::Error writeManifest(llvm::StringRef dir, llvm::ArrayRef<AotKernel> kernels) {
  return writeAtomically((dir + "/manifest.json").str(), manifestJson(kernels));
}

llvm::Error packLibrary(llvm::StringRef dir, llvm::StringRef file) {
  auto library = AotLibrary::open(dir);
  if (!library)
    return library.takeError();
  std::vector<AotKernel> kernels((*library)->kernels().begin(),
                                 (*library)->kernels().end());
  std::string blob;
  for (AotKernel &k : kernels) {
    auto cubin = (*library)->readCubin(k);
    if (!cubin)
      return cubin.takeError();
    k.offset = blob.size();
    k.source.clear();
    k.cubin.clear();
    blob += *cubin;
  }
  std::string manifest = manifestJson(kernels);
  uint8_t size[8];
  llvm::support::endian::write64le(size, manifest.size());
  std::string bytes(kPackMagic, sizeof(kPackMagic));
  bytes.append(reinterpret_cast<const char *>(size), sizeof(size));
  bytes += manifest;
  bytes += blob;
  return writeAtomically(file, bytes);
}

llvm::Expected<std::shared_ptr<const AotLibrary>>
AotLibrary::open(llvm::StringRef path) {
  std::shared_ptr<AotLibrary> library(new AotLibrary());
  library->libraryPath = path.str();
  std::string manifest;
  if (llvm::sys::fs::is_directory(path)) {
    llvm::SmallString<256> file(path);
    llvm::sys::path::append(file, "manifest.json");
    auto buffer = readFile(file);
    if (!buffer)
      return buffer.takeError();
    manifest = (*buffer)->getBuffer().str();
  } else {
    auto buffer = readFile(path);
    if (!buffer)
      return buffer.takeError();
    llvm::StringRef bytes = (*buffer)->getBuffer();
    if (bytes.size() < kPackHeaderSize ||
        !bytes.starts_with(llvm::StringRef(kPackMagic, sizeof(kPackMagic))))
      return libraryError(path, "neither a directory with manifest.json nor a "
                                "packed .attnlib file");
    uint64_t size = llvm::support::endian::read64le(bytes.data() + sizeof(kPackMagic));
    if (size > bytes.size() - kPackHeaderSize)
      return libraryError(path, "truncated manifest");
    manifest = bytes.substr(kPackHeaderSize, size).str();
    library->packed = true;
    library->blobOffset = kPackHeaderSize + size;
  }
  auto kernels = parseManifest(path, manifest, library->packed);
  if (!kernels)
    return kernels.takeError();
  library->entries = std::move(*kernels);
  return std::shared_ptr<const AotLibrary>(std::move(library));
}

const AotKernel *AotLibrary::findByAotKey(llvm::StringRef key) const {
  for (const AotKernel &k : entries)
    if (k.key == key)
      return &k;
  return nullptr;
}

const AotKernel *AotLibrary::find(llvm::StringRef kernelKey, Arch arch) const {
  for (const AotKernel &k : entries)
    if (k.spec.arch == arch && llvm::is_contained(k.kernelKeys, kernelKey))
      return &k;
  return nullptr;
}

llvm::Expected<std::string> AotLibrary::readCubin(const AotKernel &k) const {
  std::string cubin;
  if (packed) {
    auto buffer = readFile(libraryPath);
    if (!buffer)
      return buffer.takeError();
    llvm::StringRef bytes = (*buffer)->getBuffer();
    if (blobOffset + k.offset + k.size > bytes.size())
      return libraryError(libraryPath, "the cubin of " + k.name +
                                           " lies past the end of the file");
    cubin = bytes.substr(blobOffset + k.offset, k.size).str();
  } else {
    llvm::SmallString<256> file(libraryPath);
    llvm::sys::path::append(file, k.cubin);
    auto buffer = readFile(file);
    if (!buffer)
      return buffer.takeError();
    cubin = (*buffer)->getBuffer().str();
  }
  if (cubin.size() != k.size || cubinChecksum(cubin) != k.checksum)
    return libraryError(libraryPath,
                        "the cubin of " + k.name +
                            " does not match its manifest entry (size or "
                            "checksum); rebuild the library");
  return cubin;
}

llvm::Expected<std::pair<const AotKernel *, std::shared_ptr<CudaLibrary>>>
AotLibrary::load(llvm::StringRef kernelKey, Arch arch) const {
  const AotKernel *kernel = find(kernelKey, arch);
  if (!kernel)
    return libraryError(libraryPath,
                        llvm::formatv("no kernel for \"{0}\" on {1} (the library "
                                      "holds {2} kernels)",
                                      kernelKey, toString(arch), entries.size()));
  auto cubin = readCubin(*kernel);
  if (!cubin)
    return cubin.takeError();
  auto loaded = CudaLibrary::load(*cubin);
  if (!loaded)
    return loaded.takeError();
  return std::pair{kernel, std::make_shared<CudaLibrary>(std::move(*loaded))};
}

llvm::Expected<std::shared_ptr<const DecodeKernel>>
AotLibrary::decode(const DecodeVariant &variant, Arch arch) const {
  auto found = load(kernelKey(variant), arch);
  if (!found)
    return found.takeError();
  auto kernel = DecodeKernel::create(found->first->spec, variant, found->second);
  if (!kernel)
    return kernel.takeError();
  return std::make_shared<const DecodeKernel>(std::move(*kernel));
}

llvm::Expected<std::shared_ptr<const PrefillKernel>>
AotLibrary::prefill(const PrefillVariant &variant, Arch arch) const {
  auto found = load(kernelKey(variant), arch);
  if (!found)
    return found.takeError();
  auto kernel = PrefillKernel::create(found->first->spec, variant, found->second);
  if (!kernel)
    return kernel.takeError();
  return std::make_shared<const PrefillKernel>(std::move(*kernel));
}

llvm::Expected<std::shared_ptr<const AppendKVKernel>>
AotLibrary::appendKV(const AppendKVVariant &variant, Arch arch) const {
  auto found = load(kernelKey(variant), arch);
  if (!found)
    return found.takeError();
  auto kernel = AppendKVKernel::create(found->first->spec, found->second);
  if (!kernel)
    return kernel.takeError();
  return std::make_shared<const AppendKVKernel>(std::move(*kernel));
}

} // namespace attn::runtime
