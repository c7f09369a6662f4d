//===- HeadTables.h - per-query-head tables of a launch ---------*- C++ -*-===//
//
// The device pointers of the per-query-head f32 tables a variant reads
// (ALiBi slopes, and every ATTN_HEAD_TABLE of templates/attn/variant_knobs.h):
// every call's arguments derive from HeadTables, and the checks and the
// copy into the kernels' parameters walk the table, so a new table needs no
// edit here.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_HEADTABLES_H
#define ATTN_RUNTIME_HEADTABLES_H

#include "spec/KernelSpec.h"
#include "templates/attn/params.h"

#include <optional>
#include <string>

namespace attn::runtime {

/// [numQHeads] f32 device arrays, each set exactly when the variant has
/// its table.
struct HeadTables {
#define ATTN_HEAD_TABLE(flag, pointer, ...) const float *pointer = nullptr;
#include "templates/attn/variant_knobs.h"
  /// The aux tables a score_mod / mask_mod reads, in the order of the
  /// regions' aux arguments: row-major data on the device and its
  /// dimensions, 1 past the table's rank. Unused entries stay null.
  AuxTable aux[kMaxAuxTables] = {};
};

/// What is wrong with `tables` for `spec.aux` (e.g. "f32:8x32,i32:?"): a
/// missing or extra table, a dimension that is not the type's static one
/// or not positive, a rank the type does not have; none when they fit.
std::optional<std::string> auxTablesProblem(const KernelSpec &spec,
                                            const AuxTable *tables);

/// The first table given without its knob, or missing with it, as a
/// message; nothing when `tables` fits `spec`.
inline std::optional<std::string> headTablesProblem(const KernelSpec &spec,
                                                    const HeadTables &tables) {
#define ATTN_HEAD_TABLE(flag, pointer, ...)                                    \
  if (spec.flag && !tables.pointer)                                            \
    return std::string("the variant has " #flag ": " #pointer " must be set"); \
  if (!spec.flag && tables.pointer)                                            \
    return std::string(#pointer " given, but the variant has no " #flag);
#include "templates/attn/variant_knobs.h"
  return auxTablesProblem(spec, tables.aux);
}

/// Copies the tables into a kernel's parameter struct (DecodeParams,
/// PrefillParams), whose members have the same names.
template <class Params>
void setHeadTables(Params &params, const HeadTables &tables) {
#define ATTN_HEAD_TABLE(flag, pointer, ...) params.pointer = tables.pointer;
#include "templates/attn/variant_knobs.h"
  for (int i = 0; i < kMaxAuxTables; ++i)
    params.aux[i] = tables.aux[i];
}

} // namespace attn::runtime

#endif // ATTN_RUNTIME_HEADTABLES_H
