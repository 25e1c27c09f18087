# What `--version` prints: the project version, the git commit and the CUDA, cuDNN and NCCL
# versions compiled in. The library versions are fixed when CMake configures (read from the
# headers found by cmake/Cuda.cmake); the commit is read again at every build by
# cmake/GitCommit.cmake, so a new commit needs no re-configure. Writes, under the build folder,
# generated/cudagrad/build_info.h and generated/cudagrad/git_commit.h.
set(CUDAGRAD_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)

# The value of `#define NAME <number>` in a header, or "?" when it is not there.
function(cudagrad_header_number header name out)
  set(_value "?")
  if(EXISTS ${header})
    file(STRINGS ${header} _line REGEX "^#define[ \t]+${name}[ \t]+[0-9]+")
    if(_line)
      string(REGEX REPLACE "^#define[ \t]+${name}[ \t]+([0-9]+).*" "\\1" _value "${_line}")
    endif()
  endif()
  set(${out} ${_value} PARENT_SCOPE)
endfunction()

if(CUDAGRAD_CUDA)
  set(_h ${CUDNN_INCLUDE_DIR}/cudnn_version.h)
  if(NOT EXISTS ${_h})
    set(_h ${CUDNN_INCLUDE_DIR}/cudnn.h)  # cuDNN 7 kept the numbers in cudnn.h
  endif()
  cudagrad_header_number(${_h} CUDNN_MAJOR _cudnn_major)
  cudagrad_header_number(${_h} CUDNN_MINOR _cudnn_minor)
  cudagrad_header_number(${_h} CUDNN_PATCHLEVEL _cudnn_patch)
  cudagrad_header_number(${NCCL_INCLUDE_DIR}/nccl.h NCCL_MAJOR _nccl_major)
  cudagrad_header_number(${NCCL_INCLUDE_DIR}/nccl.h NCCL_MINOR _nccl_minor)
  cudagrad_header_number(${NCCL_INCLUDE_DIR}/nccl.h NCCL_PATCH _nccl_patch)
  set(CUDAGRAD_LIBRARIES_TEXT
      "CUDA ${CUDAToolkit_VERSION}, cuDNN ${_cudnn_major}.${_cudnn_minor}.${_cudnn_patch}, NCCL ${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
else()
  set(CUDAGRAD_LIBRARIES_TEXT "CPU only (built without CUDA)")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in ${CUDAGRAD_GENERATED_DIR}/cudagrad/build_info.h @ONLY)

# Runs at every build; rewrites git_commit.h only when the commit changed, so nothing recompiles
# otherwise.
add_custom_target(cudagrad_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUTPUT=${CUDAGRAD_GENERATED_DIR}/cudagrad/git_commit.h -P ${PROJECT_SOURCE_DIR}/cmake/GitCommit.cmake
  BYPRODUCTS ${CUDAGRAD_GENERATED_DIR}/cudagrad/git_commit.h
  COMMENT "" VERBATIM)
