//===- AotLibrary.cpp - ahead-of-time kernel libraries --------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/support/InputFiles.h"

#include "codegen/EmitCuda.h"
#include "spec/KernelLimits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <climits>

namespace attn::runtime {

namespace {

namespace json = llvm::json;

constexpr char kPackMagic[8] = {'A', 'T', 'T', 'N', 'L', 'I', 'B', '1'};
/// The manifest format. 2: spec fields named as attn::forEachSpecField
/// names them ("schedule", not "decode_schedule"); kernel names changed.
/// 3: one name per knob in kernel names and keys ("write_lse", not "lse";
/// "per_head_kv_scale", not "headscale"). 4: rope_dim (MLA decode).
constexpr llvm::StringLiteral kFormat = "attn-aot-4";

llvm::Error libraryError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError("AOT library '" + path.str() +
                                 "': " + message.str());
}

/// A spec field as JSON: names for enums, numbers, booleans, objects for
/// schedules; keyed by the names attn::forEach*Field gives.
json::Value fieldToJson(int value) { return value; }
json::Value fieldToJson(bool value) { return value; }
json::Value fieldToJson(const std::string &value) { return value; }
template <class Enum> json::Value fieldToJson(Enum value) {
  return std::string(toString(value));
}
json::Value fieldToJson(const DecodeSchedule &schedule) {
  json::Object o;
  forEachDecodeScheduleField(
      [&](const char *name, const auto &f) { o[name] = fieldToJson(f); },
      schedule);
  return o;
}
json::Value fieldToJson(const PrefillSchedule &schedule) {
  json::Object o;
  forEachPrefillScheduleField(
      [&](const char *name, const auto &f) { o[name] = fieldToJson(f); },
      schedule);
  return o;
}

json::Object specToJson(const KernelSpec &s) {
  json::Object o;
  forEachSpecField(
      [&](const char *name, const auto &f) { o[name] = fieldToJson(f); }, s);
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
  /// An integer in [min, max]; anything else is a problem naming the value.
  int64_t integer(llvm::StringRef name, int64_t min, int64_t max) {
    const json::Value *v = get(name);
    if (!v)
      return 0;
    std::optional<int64_t> i = getJsonInteger(*v);
    if (i && *i >= min && *i <= max)
      return *i;
    std::string text;
    llvm::raw_string_ostream(text) << *v;
    fail(llvm::formatv("\"{0}\" is {1}; expected an integer from {2} to {3}",
                       name, text, min, max));
    return 0;
  }
  /// Counts and sizes of the kernel spec: a non-negative int.
  int count(llvm::StringRef name) { return int(integer(name, 0, INT_MAX)); }
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

void readField(FieldReader &r, const char *name, KernelKind &v) {
  v = r.parsed<KernelKind>(name, parseKernelKind);
}
void readField(FieldReader &r, const char *name, Arch &v) {
  v = r.parsed<Arch>(name, parseArch);
}
void readField(FieldReader &r, const char *name, ScalarType &v) {
  v = r.parsed<ScalarType>(name, parseScalarType);
}
void readField(FieldReader &r, const char *name, KVLayout &v) {
  v = r.parsed<KVLayout>(name, parseKVLayout);
}
void readField(FieldReader &r, const char *name, PrefillMma &v) {
  v = r.parsed<PrefillMma>(name, parsePrefillMma);
}
void readField(FieldReader &r, const char *name, int &v) { v = r.count(name); }
void readField(FieldReader &r, const char *name, bool &v) {
  v = r.boolean(name);
}
void readField(FieldReader &r, const char *name, std::string &v) {
  v = r.string(name);
}
/// A schedule: a nested object whose problems become the spec's.
template <class Schedule, class ForEach>
void readSchedule(FieldReader &r, const char *name, Schedule &s,
                  ForEach forEach) {
  const json::Value *value = r.get(name);
  FieldReader sub(value ? value->getAsObject() : nullptr, r.where + " " + name);
  forEach([&](const char *field, auto &f) { readField(sub, field, f); }, s);
  if (!sub.problem.empty())
    r.fail(sub.problem);
}
void readField(FieldReader &r, const char *name, DecodeSchedule &s) {
  readSchedule(r, name, s, [](auto &&f, DecodeSchedule &d) {
    forEachDecodeScheduleField(f, d);
  });
}
void readField(FieldReader &r, const char *name, PrefillSchedule &s) {
  readSchedule(r, name, s, [](auto &&f, PrefillSchedule &p) {
    forEachPrefillScheduleField(f, p);
  });
}

void readSpec(FieldReader &r, KernelSpec &s) {
  forEachSpecField([&](const char *name, auto &f) { readField(r, name, f); },
                   s);
}

constexpr size_t kPackHeaderSize = sizeof(kPackMagic) + 8;

/// Where a directory library keeps a kernel's files. A manifest must name
/// exactly these, so a damaged or hostile one cannot point a reader, or
/// attn-aot's removal of dropped kernels, outside the library.
std::string sourcePath(const AotKernel &k) {
  return std::string(toString(k.spec.arch)) + "/" + k.name + ".cu";
}
std::string cubinPath(const AotKernel &k) {
  return std::string(toString(k.spec.arch)) + "/" + k.name + "-" +
         k.key.substr(0, 16) + ".cubin";
}

bool isKeyHash(llvm::StringRef key) {
  return key.size() == 64 && llvm::all_of(key, [](char c) {
           return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
         });
}

} // namespace

llvm::Expected<std::vector<AotKernel>>
parseAotManifest(llvm::StringRef text, llvm::StringRef path, bool packed) {
  llvm::Expected<json::Value> root =
      parseJson(text, "AOT library '" + path.str() + "': manifest");
  if (!root)
    return root.takeError();
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
    if (r.problem.empty() && !isKeyHash(k.key))
      r.fail("has key \"" + k.key + "\"; expected 64 lowercase hex digits");
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
    // A spec no template runs (a schedule past its bounds, zero heads, ...)
    // would reach the planner's arithmetic and the launch: refused here, by
    // the rules the compiler applies.
    if (std::string problem = checkKernelSpec(k.spec);
        r.problem.empty() && !problem.empty())
      r.fail("spec " + problem);
    k.size = uint64_t(r.integer("size", 0, int64_t(kMaxCubinBytes)));
    k.checksum = r.hex("checksum");
    k.compileSeconds = r.number("compile_seconds");
    if (packed) {
      k.offset = uint64_t(r.integer("offset", 0, INT64_MAX));
    } else {
      k.source = r.string("source");
      k.cubin = r.string("cubin");
    }
    if (r.problem.empty() && k.name != k.spec.uri())
      r.fail("names \"" + k.name + "\", but its spec is \"" + k.spec.uri() +
             "\"");
    if (r.problem.empty() && !packed && k.source != sourcePath(k))
      r.fail("has source \"" + k.source + "\"; expected \"" + sourcePath(k) +
             "\"");
    if (r.problem.empty() && !packed && k.cubin != cubinPath(k))
      r.fail("has cubin \"" + k.cubin + "\"; expected \"" + cubinPath(k) +
             "\"");
    if (!r.problem.empty())
      return libraryError(path, r.problem);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

uint64_t cubinChecksum(llvm::StringRef cubin) {
  return llvm::xxh3_64bits(cubin);
}

std::string manifestJson(llvm::ArrayRef<AotKernel> kernels) {
  json::Array list;
  for (const AotKernel &k : kernels) {
    json::Object o{
        {"key", k.key},
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

/// Writes `bytes` to a new, unique temporary file next to `path` (created
/// exclusively, so never through a link someone planted) and renames it into
/// place, so readers see the old file or the whole new one.
static llvm::Error writeAtomically(llvm::StringRef path,
                                   llvm::StringRef bytes) {
  int fd = -1;
  llvm::SmallString<256> temp;
  if (std::error_code error =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, temp))
    return llvm::createStringError("cannot create a file next to " +
                                   path.str() + ": " + error.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << bytes;
    os.close();
    if (std::error_code error = os.error()) {
      os.clear_error(); // or the stream's destructor aborts the process
      llvm::sys::fs::remove(temp);
      return llvm::createStringError("cannot write " + temp.str().str() + ": " +
                                     error.message());
    }
  }
  if (std::error_code error = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return llvm::createStringError("cannot rename " + temp.str().str() +
                                   " to " + path.str() + ": " +
                                   error.message());
  }
  return llvm::Error::success();
}

llvm::Error writeKernelFiles(llvm::StringRef dir, AotKernel &kernel,
                             llvm::StringRef source, llvm::StringRef cubin) {
  std::string arch(toString(kernel.spec.arch));
  llvm::SmallString<256> archDir(dir);
  llvm::sys::path::append(archDir, arch);
  if (std::error_code error = llvm::sys::fs::create_directories(archDir))
    return libraryError(dir, "cannot create " + archDir.str() + ": " +
                                 error.message());
  kernel.source = sourcePath(kernel);
  kernel.cubin = cubinPath(kernel);
  kernel.size = cubin.size();
  kernel.checksum = cubinChecksum(cubin);
  if (llvm::Error error =
          writeAtomically((dir + "/" + kernel.source).str(), source))
    return error;
  return writeAtomically((dir + "/" + kernel.cubin).str(), cubin);
}

llvm::Error writeManifest(llvm::StringRef dir,
                          llvm::ArrayRef<AotKernel> kernels) {
  return writeAtomically((dir + "/manifest.json").str(), manifestJson(kernels));
}

llvm::Error checkPackTarget(llvm::StringRef dir, llvm::StringRef file) {
  auto refuse = [&](const llvm::Twine &why) {
    return llvm::createStringError("will not pack into '" + file.str() +
                                   "': " + why.str());
  };
  // Inside the directory library it would overwrite or mix with the
  // library's own files (--pack OUT/manifest.json replaced the manifest).
  llvm::SmallString<256> realDir, realParent;
  if (std::error_code error = llvm::sys::fs::real_path(dir, realDir))
    return refuse("cannot resolve '" + dir + "': " + error.message());
  llvm::StringRef parent = llvm::sys::path::parent_path(file);
  if (std::error_code error =
          llvm::sys::fs::real_path(parent.empty() ? "." : parent, realParent))
    return refuse("cannot resolve its directory: " + error.message());
  if (realParent == realDir ||
      realParent.str().starts_with((realDir + "/").str()))
    return refuse("it lies inside the library directory '" + dir +
                  "'; pack to a path outside it");
  // Only a packed library is replaced; anything else there is not ours.
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(file, status, /*follow=*/false))
    return llvm::Error::success(); // nothing there
  auto existing = RegularFile::open(file);
  if (!existing)
    return refuse("something other than a packed attn library is there (" +
                  llvm::toString(existing.takeError()) + ")");
  auto magic = existing->read(
      0, std::min<uint64_t>(existing->size(), sizeof(kPackMagic)));
  if (!magic)
    return refuse(llvm::toString(magic.takeError()));
  if (*magic != llvm::StringRef(kPackMagic, sizeof(kPackMagic)))
    return refuse("the existing file is not a packed attn library; remove it "
                  "or pick another path");
  return llvm::Error::success();
}

llvm::Error packLibrary(llvm::StringRef dir, llvm::StringRef file) {
  if (llvm::Error error = checkPackTarget(dir, file))
    return error;
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
    auto text = readRegularFile(file, kMaxManifestBytes);
    if (!text)
      return libraryError(path, llvm::toString(text.takeError()));
    manifest = std::move(*text);
  } else {
    // Packed: only the header and the manifest are read now; each cubin is
    // read from this descriptor when used.
    auto file = RegularFile::open(path);
    if (!file)
      return libraryError(path, llvm::toString(file.takeError()));
    auto header =
        file->read(0, std::min<uint64_t>(file->size(), kPackHeaderSize));
    if (!header)
      return libraryError(path, llvm::toString(header.takeError()));
    if (header->size() < kPackHeaderSize ||
        !llvm::StringRef(*header).starts_with(
            llvm::StringRef(kPackMagic, sizeof(kPackMagic))))
      return libraryError(path, "neither a directory with manifest.json nor a "
                                "packed .attnlib file");
    uint64_t size =
        llvm::support::endian::read64le(header->data() + sizeof(kPackMagic));
    if (size > kMaxManifestBytes)
      return libraryError(path, llvm::formatv("its header gives a manifest of "
                                              "{0} bytes, larger than the "
                                              "limit of {1} bytes",
                                              size, kMaxManifestBytes));
    if (size > file->size() - kPackHeaderSize)
      return libraryError(path, "truncated manifest");
    auto text = file->read(kPackHeaderSize, size);
    if (!text)
      return libraryError(path, llvm::toString(text.takeError()));
    manifest = std::move(*text);
    library->packed = true;
    library->blobOffset = kPackHeaderSize + size;
    library->packedFile = std::move(*file);
  }
  auto kernels = parseAotManifest(manifest, path, library->packed);
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
    // Only this kernel's bytes; the blob follows the manifest.
    uint64_t blobSize = packedFile->size() - blobOffset;
    if (k.offset > blobSize || k.size > blobSize - k.offset)
      return libraryError(libraryPath, "the cubin of " + k.name +
                                           " lies past the end of the file");
    auto bytes = packedFile->read(blobOffset + k.offset, k.size);
    if (!bytes)
      return libraryError(libraryPath, llvm::toString(bytes.takeError()));
    cubin = std::move(*bytes);
  } else {
    llvm::SmallString<256> file(libraryPath);
    llvm::sys::path::append(file, k.cubin);
    auto bytes = readRegularFile(file, kMaxCubinBytes);
    if (!bytes)
      return libraryError(libraryPath, llvm::toString(bytes.takeError()));
    cubin = std::move(*bytes);
  }
  if (cubin.size() != k.size || cubinChecksum(cubin) != k.checksum)
    return libraryError(libraryPath,
                        "the cubin of " + k.name +
                            " does not match its manifest entry (size or "
                            "checksum); rebuild the library");
  // A size and checksum fixed up to match, or a library built wrong: the
  // driver never sees an image that is not a cubin of the kernel's arch.
  if (llvm::Error error =
          checkCubinArch(cubin, k.spec.arch, "the cubin of " + k.name))
    return libraryError(libraryPath, llvm::toString(std::move(error)));
  return cubin;
}

llvm::Expected<std::pair<const AotKernel *, std::shared_ptr<CudaLibrary>>>
AotLibrary::loadKey(llvm::StringRef kernelKey, Arch arch) const {
  const AotKernel *kernel = find(kernelKey, arch);
  if (!kernel)
    return libraryError(
        libraryPath, llvm::formatv("no kernel for \"{0}\" on {1} (the library "
                                   "holds {2} kernels)",
                                   kernelKey, toString(arch), entries.size()));
  auto cubin = readCubin(*kernel);
  if (!cubin)
    return cubin.takeError();
  // `arch` is the host's word; the GPU must run the cubin.
  auto device = currentDeviceArch();
  if (!device)
    return device.takeError();
  if (llvm::Error error =
          checkCubinRunsOn(*cubin, *device, "the cubin of " + kernel->name))
    return libraryError(libraryPath, llvm::toString(std::move(error)));
  auto loaded = CudaLibrary::load(*cubin);
  if (!loaded)
    return loaded.takeError();
  return std::pair{kernel, std::make_shared<CudaLibrary>(std::move(*loaded))};
}

} // namespace attn::runtime
