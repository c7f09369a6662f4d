#===- AttnKernelLibrary.cmake - attn-aot libraries at build time -*- cmake -*-===#
#
#   attn_add_kernel_library(NAME CONFIG <file.json|file.mlir> ARCHS <arch>...
#                           [OUTPUT_DIR <dir>])
#
# Adds target NAME (built by default) that runs attn-aot on CONFIG for ARCHS
# (sm_80, sm_89, sm_90a) into OUTPUT_DIR (default: <binary dir>/NAME), again
# whenever CONFIG or attn-aot changes; attn-aot itself recompiles only changed
# kernels. The directory is the target's ATTN_LIBRARY_DIR property; hosts
# open it with attn::runtime::AotLibrary::open or $ATTN_AOT_LIBRARY.
#
# ATTN_AOT_EXECUTABLE names the attn-aot to run: the attn build sets it to
# its own target, the installed package to the installed tool.
#
#===----------------------------------------------------------------------===#
function(attn_add_kernel_library name)
  cmake_parse_arguments(ARG "" "CONFIG;OUTPUT_DIR" "ARCHS" ${ARGN})
  if(NOT ARG_CONFIG OR NOT ARG_ARCHS)
    message(FATAL_ERROR "attn_add_kernel_library(${name}): CONFIG and ARCHS are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "attn_add_kernel_library(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ATTN_AOT_EXECUTABLE)
    message(FATAL_ERROR "attn_add_kernel_library(${name}): ATTN_AOT_EXECUTABLE is not set")
  endif()
  get_filename_component(config "${ARG_CONFIG}" ABSOLUTE)
  set(dir "${ARG_OUTPUT_DIR}")
  if(NOT dir)
    set(dir "${CMAKE_CURRENT_BINARY_DIR}/${name}")
  endif()
  list(JOIN ARG_ARCHS "," archs)
  add_custom_command(
    OUTPUT "${dir}/manifest.json"
    COMMAND "${ATTN_AOT_EXECUTABLE}" "${config}" --arch ${archs} -o "${dir}"
    DEPENDS "${config}" "${ATTN_AOT_EXECUTABLE}"
    COMMENT "attn-aot: kernel library ${name} for ${archs}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS "${dir}/manifest.json")
  set_target_properties(${name} PROPERTIES ATTN_LIBRARY_DIR "${dir}")
endfunction()
