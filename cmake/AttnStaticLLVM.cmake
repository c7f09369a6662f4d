#===- AttnStaticLLVM.cmake - link LLVM statically ---------------*- cmake -*-===#
#
# Debian's static MLIR libraries name the imported target `LLVM` (libLLVM.so)
# as their LLVM dependency. Repointing that target at the static Support and
# Demangle archives gives binaries that need only libc/libstdc++ (plus the CUDA
# driver and NVRTC), so tools and tests can be carried to a GPU host that has no
# LLVM installed. MLIR's IR/parser/pass libraries use nothing from LLVM beyond
# Support and Demangle.
#
#===----------------------------------------------------------------------===#
if(NOT TARGET LLVM)
  message(FATAL_ERROR "ATTN_STATIC_LLVM: imported target LLVM not found")
endif()

set(_attn_llvm_libdir "${LLVM_LIBRARY_DIR}")
foreach(_lib Support Demangle)
  if(NOT EXISTS "${_attn_llvm_libdir}/libLLVM${_lib}.a")
    message(FATAL_ERROR "ATTN_STATIC_LLVM: ${_attn_llvm_libdir}/libLLVM${_lib}.a "
      "is missing; install llvm-19-dev or configure with -DATTN_STATIC_LLVM=OFF")
  endif()
endforeach()

# zlib is linked statically too when its archive exists (zlib1g-dev), so the
# binaries do not depend on the host's libz either.
find_library(ATTN_ZLIB_STATIC NAMES libz.a)
set(_attn_zlib "${ATTN_ZLIB_STATIC}")
if(NOT _attn_zlib)
  set(_attn_zlib z)
endif()

get_target_property(_attn_llvm_configs LLVM IMPORTED_CONFIGURATIONS)
set_property(TARGET LLVM PROPERTY IMPORTED_LOCATION
  "${_attn_llvm_libdir}/libLLVMSupport.a")
foreach(_cfg ${_attn_llvm_configs})
  set_property(TARGET LLVM PROPERTY IMPORTED_LOCATION_${_cfg}
    "${_attn_llvm_libdir}/libLLVMSupport.a")
  set_property(TARGET LLVM PROPERTY IMPORTED_SONAME_${_cfg} "")
endforeach()
set_property(TARGET LLVM PROPERTY IMPORTED_NO_SONAME TRUE)
set_property(TARGET LLVM PROPERTY INTERFACE_LINK_LIBRARIES
  "${_attn_llvm_libdir}/libLLVMDemangle.a;${_attn_zlib};pthread;rt;dl;m")
message(STATUS "attn: LLVM linked statically (libLLVMSupport.a, libLLVMDemangle.a)")
