# Layering at compile time. Each layer library is compiled with one include directory,
# <build>/layer_include/<target>/, holding a symbolic link for each layer folder it may see and
# nothing else: `#include "apps/..."` from nn/, or `#include "engine/..."` from kernels/, finds
# no file and fails to compile. The layers are listed in the root CMakeLists.txt (SEES);
# cudagrad_layering_tests() adds CTest checks that upward includes really fail.

# Gives `target` (and only it: nothing propagates to what links it) an include directory with
# the folders in SEES. Any library can opt in with one line, e.g. a train/ layer:
#   cudagrad_restrict_includes(cudagrad_train SEES util data engine nn dist train)
# HIDES names subfolders of a seen folder that stay out of sight (kernels/cpu_conv from the kernels
# it is checked against): that folder is then a real directory linking each of its entries but those.
function(cudagrad_restrict_includes target)
  cmake_parse_arguments(R "" "" "SEES;HIDES" ${ARGN})
  set(_dir ${PROJECT_BINARY_DIR}/layer_include/${target})
  file(REMOVE_RECURSE ${_dir})
  file(MAKE_DIRECTORY ${_dir})
  foreach(_layer ${R_SEES})
    set(_hidden ${R_HIDES})
    list(FILTER _hidden INCLUDE REGEX "^${_layer}/")
    if(NOT _hidden)
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${_layer} ${_dir}/${_layer} SYMBOLIC)
      continue()
    endif()
    # Listed when CMake configures: a new entry of the folder (not of its subfolders) needs a rerun.
    file(GLOB _entries RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${_layer}/*)
    file(MAKE_DIRECTORY ${_dir}/${_layer})
    foreach(_entry ${_entries})
      if(NOT _entry IN_LIST _hidden)
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${_entry} ${_dir}/${_entry} SYMBOLIC)
      endif()
    endforeach()
  endforeach()
  target_include_directories(${target} PRIVATE ${_dir})
  set_property(GLOBAL APPEND PROPERTY CUDAGRAD_LAYERED_TARGETS ${target})
endfunction()

# The folders of the third-party headers the probes reach (fmt, ...), joined by "|", in
# CUDAGRAD_PROBE_THIRD_PARTY: they may sit outside the compiler's own paths, as on the GPU
# machine, where they are unpacked under .deps/root.
function(cudagrad_probe_third_party)
  set(_third_party "")
  foreach(_dep fmt::fmt yaml-cpp Eigen3::Eigen nlohmann_json::nlohmann_json CLI11::CLI11)
    if(TARGET ${_dep})
      get_target_property(_dirs ${_dep} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(_dir ${_dirs})
        if(_dir AND NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
          list(APPEND _third_party ${_dir})
        endif()
      endforeach()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _third_party)
  list(JOIN _third_party "|" _third_party)
  set(CUDAGRAD_PROBE_THIRD_PARTY "${_third_party}" PARENT_SCOPE)
endfunction()

# A CTest test compiling `#include "<header>"` with `target`'s layer include directory only (and
# CUDAGRAD_PROBE_THIRD_PARTY): EXPECT ok (the control: the folder works) or fail (the header must
# not be found).
function(cudagrad_expect_include target header expect)
  string(MAKE_C_IDENTIFIER "${target}_${header}" _id)
  if(target MATCHES "-")  # a program (cudagrad-train), not the layer of the same name (cudagrad_train)
    set(_id "program_${_id}")
  endif()
  add_test(NAME layering.${_id}_${expect}
           COMMAND ${CMAKE_COMMAND} -DCOMPILER=${CMAKE_CXX_COMPILER}
                   -DINCLUDE_DIR=${PROJECT_BINARY_DIR}/layer_include/${target} -DHEADER=${header}
                   "-DTHIRD_PARTY=${CUDAGRAD_PROBE_THIRD_PARTY}"
                   -DEXPECT=${expect} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${PROJECT_BINARY_DIR}/layering_checks/${_id}
                   -P ${PROJECT_SOURCE_DIR}/cmake/CheckInclude.cmake)
  set_tests_properties(layering.${_id}_${expect} PROPERTIES LABELS layering)
endfunction()

# The checks: each layer reaches down, never up; kernels/ is hidden from everything above the
# engine, the programs included. The headers picked need nothing outside their own layer chain, so a failure can only
# mean "not found" (CheckInclude.cmake insists on that).
function(cudagrad_layering_tests)
  cudagrad_probe_third_party()
  cudagrad_expect_include(cudagrad_nn "util/layout.h" ok)
  cudagrad_expect_include(cudagrad_nn "kernels/types.h" fail)
  cudagrad_expect_include(cudagrad_nn "apps/launch/main.cpp" fail)
  cudagrad_expect_include(cudagrad_nn "dist/nccl_api.h" fail)
  cudagrad_expect_include(cudagrad_dist "dist/nccl_api.h" ok)
  cudagrad_expect_include(cudagrad_dist "kernels/types.h" fail)
  cudagrad_expect_include(cudagrad_data "engine/device.h" ok)
  cudagrad_expect_include(cudagrad_data "nn/module.h" fail)
  cudagrad_expect_include(cudagrad_data "kernels/types.h" fail)
  cudagrad_expect_include(cudagrad_train "dist/ddp.h" ok)
  cudagrad_expect_include(cudagrad_train "kernels/types.h" fail)
  cudagrad_expect_include(cudagrad_dist "train/trainer.h" fail)
  cudagrad_expect_include(cudagrad_engine "kernels/types.h" ok)
  cudagrad_expect_include(cudagrad_engine "nn/module.h" fail)
  cudagrad_expect_include(cudagrad_kernels "kernels/types.h" ok)
  cudagrad_expect_include(cudagrad_kernels "engine/device.h" fail)
  # The references never see the fast CPU convolutions they check; those see the references.
  cudagrad_expect_include(cudagrad_kernels "kernels/cpu/conv2d.h" ok)
  cudagrad_expect_include(cudagrad_kernels "kernels/cpu_conv/im2col.h" fail)
  cudagrad_expect_include(cudagrad_kernels_cpu_conv "kernels/cpu/conv2d.h" ok)
  cudagrad_expect_include(cudagrad_kernels_cpu_conv "engine/device.h" fail)
  cudagrad_expect_include(cudagrad_util "kernels/types.h" fail)
  # The programs (apps/): train and below, never kernels/.
  cudagrad_expect_include(cudagrad-train "train/trainer.h" ok)
  cudagrad_expect_include(cudagrad-train "kernels/cpu/optim.h" fail)
  cudagrad_expect_include(cudagrad-bench "kernels/cuda/check.h" fail)
  cudagrad_expect_include(cudagrad-bench-cpu "kernels/cpu_conv/gemm.h" fail)
  cudagrad_expect_include(cudagrad-launch "apps/cli/cli.h" ok)
  cudagrad_expect_include(cudagrad-launch "train/trainer.h" fail)
endfunction()
