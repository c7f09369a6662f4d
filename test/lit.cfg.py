# -*- Python -*-
# lit configuration for attn: dialect/compiler/codegen tests are .mlir files
# checked with FileCheck. test/unit holds GoogleTest sources, run by ctest.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "attn"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attn_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in",
                   "unit", "Inputs", "install"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["attn-opt", "attn-translate", "attn-aot"],
                                  [config.attn_tools_dir])
