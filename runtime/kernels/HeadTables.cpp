//===- HeadTables.cpp - the aux tables of a launch against the spec -------===//
#include "attn/runtime/kernels/HeadTables.h"

#include <fmt/format.h>

#include <string_view>
#include <vector>

namespace attn::runtime {

namespace {

/// One table of KernelSpec::aux ("f32:8x32"): its static dimensions, -1
/// where the type has `?`.
struct AuxType {
  std::string_view text;
  std::vector<int64_t> dims;
};

/// The tables of `aux`, or none for text the compiler did not write.
std::optional<std::vector<AuxType>> parseAux(std::string_view aux) {
  std::vector<AuxType> types;
  while (!aux.empty()) {
    size_t end = aux.find(',');
    std::string_view one = aux.substr(0, end);
    aux = end == std::string_view::npos ? "" : aux.substr(end + 1);
    size_t colon = one.find(':');
    if (colon == std::string_view::npos)
      return std::nullopt;
    AuxType type{one, {}};
    std::string_view shape = one.substr(colon + 1);
    while (!shape.empty()) {
      size_t x = shape.find('x');
      std::string_view dim = shape.substr(0, x);
      shape = x == std::string_view::npos ? "" : shape.substr(x + 1);
      if (dim == "?") {
        type.dims.push_back(-1);
        continue;
      }
      int64_t value = 0;
      for (char c : dim) {
        if (c < '0' || c > '9' || value > (int64_t(1) << 40))
          return std::nullopt;
        value = value * 10 + (c - '0');
      }
      type.dims.push_back(value);
    }
    if (type.dims.empty() || type.dims.size() > 3)
      return std::nullopt;
    types.push_back(type);
  }
  return types;
}

} // namespace

std::optional<std::string> auxTablesProblem(const KernelSpec &spec,
                                            const AuxTable *tables) {
  std::optional<std::vector<AuxType>> types = parseAux(spec.aux);
  if (!types || types->size() > size_t(kMaxAuxTables))
    return fmt::format("the variant's aux types \"{}\" are not a list of at "
                       "most {} tables",
                       spec.aux, kMaxAuxTables);
  for (int i = 0; i < kMaxAuxTables; ++i) {
    const AuxTable &table = tables[i];
    if (size_t(i) >= types->size()) {
      if (table.data)
        return fmt::format("aux[{}] given, but the variant reads {} aux "
                           "tables",
                           i, types->size());
      continue;
    }
    const AuxType &type = (*types)[size_t(i)];
    if (!table.data)
      return fmt::format("aux[{}] ({}) must be set", i, type.text);
    for (size_t d = 0; d < 3; ++d) {
      int32_t dim = table.dims[d];
      if (d >= type.dims.size()) {
        if (dim != 1)
          return fmt::format("aux[{}] ({}) has rank {}: dims[{}] must be 1, "
                             "got {}",
                             i, type.text, type.dims.size(), d, dim);
      } else if (dim < 1 || (type.dims[d] >= 0 && dim != type.dims[d])) {
        return fmt::format("aux[{}] ({}): dims[{}] is {}; expected {}", i,
                           type.text, d, dim,
                           type.dims[d] >= 0 ? std::to_string(type.dims[d])
                                             : std::string("a positive size"));
      }
    }
  }
  return std::nullopt;
}

} // namespace attn::runtime
