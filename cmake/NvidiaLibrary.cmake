# cudagrad_find_nvidia_library(PREFIX HEADER NAME SONAME ROOT): finds an NVIDIA library (cuDNN,
# NCCL) and its header, preferring ROOT (a hint such as CUDNN_ROOT) over the toolkit's folders.
# Sets PREFIX_INCLUDE_DIR and PREFIX_LIBRARY in the cache.
#
# The nvidia-* Python wheels (where the GPU machine's PyTorch gets cuDNN and NCCL) hold only the
# versioned file, libcudnn.so.9 or libnccl.so.2: a wheel cannot carry the unversioned symlink that
# find_library looks for by default, so SONAME is searched for too. NAMES_PER_DIR makes a folder
# earlier in the hints win over a later one whatever the file's name.
function(cudagrad_find_nvidia_library prefix header name soname root)
  find_path(${prefix}_INCLUDE_DIR ${header} HINTS ${root} ${root}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(${prefix}_LIBRARY NAMES ${name} ${soname} NAMES_PER_DIR
               HINTS ${root} ${root}/lib ${root}/lib64 ${CUDAToolkit_LIBRARY_DIR})
endfunction()
