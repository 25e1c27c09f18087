# The emulated GPU (-DCUDAGRAD_GPU_EMULATION=ON, its own build folder): the kernels/cuda sources
# compiled by the C++ compiler and run on the CPU by emulator/ (see its files), so the CUDA half
# of cudagrad is tested where no GPU is. No nvcc: each .cu/.cuh is copied into the build folder
# with its <<<...>>> launches rewritten (emulator/translate_launches.py) and compiled with
# emulator/include/cuda_emulation.h in front. The toolkit's headers give the types (the runtime
# API, __half); cuDNN, cuBLAS and NCCL are not emulated and not linked: their sources are left out,
# and the code that calls them does so only where kernels::kCudaLibraries (kernels/backend.h) is true.
option(CUDAGRAD_GPU_EMULATION "Run the CUDA kernels on the CPU through an emulated device (no GPU, no nvcc needed)" OFF)

if(CUDAGRAD_GPU_EMULATION)
  set(CUDAGRAD_CUDA OFF CACHE BOOL "Build the CUDA backend" FORCE)  # the emulation replaces nvcc's build
  find_package(CUDAToolkit REQUIRED)  # its headers only
  find_package(Boost REQUIRED COMPONENTS context)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  file(GLOB _emu_src CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/emulator/*.cpp)
  add_library(cudagrad_emulator STATIC ${_emu_src})
  target_include_directories(cudagrad_emulator PUBLIC ${PROJECT_SOURCE_DIR}/emulator/include ${CUDAToolkit_INCLUDE_DIRS}
                             PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(cudagrad_emulator PUBLIC Boost::context fmt::fmt Threads::Threads)
  message(STATUS "cudagrad: emulated GPU (CUDA ${CUDAToolkit_VERSION} headers, kernels run on the CPU)")
endif()

# The one .cu that needs a vendor library (cuBLAS), left out of the emulated build; the cuDNN
# sources are .cpp files, which the emulated build does not take from kernels/cuda at all.
set(CUDAGRAD_VENDOR_SOURCES_REGEX "/kernels/cuda/linear_cublas\\.cu$")

function(cudagrad_add_emulated_sources target)
  if(NOT CUDAGRAD_GPU_EMULATION)
    return()
  endif()
  file(GLOB _sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cuh)
  set(_out_dir ${PROJECT_BINARY_DIR}/emulated)
  set(_translate ${PROJECT_SOURCE_DIR}/emulator/translate_launches.py)
  foreach(_src ${_sources})
    if(_src MATCHES "${CUDAGRAD_VENDOR_SOURCES_REGEX}")
      continue()
    endif()
    file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_src})
    if(_src MATCHES "\\.cu$")
      set(_out ${_out_dir}/${_rel}.cpp)
    else()
      set(_out ${_out_dir}/${_rel})  # a header: found under the same name ahead of the original
    endif()
    add_custom_command(OUTPUT ${_out} COMMAND Python3::Interpreter ${_translate} ${_src} ${_out}
                       DEPENDS ${_src} ${_translate} COMMENT "Translating ${_rel} for the emulated GPU" VERBATIM)
    target_sources(${target} PRIVATE ${_out})
    if(_src MATCHES "\\.cu$")
      # nvcc's idioms that g++ warns about: #pragma unroll, blockDim.x (unsigned) against int
      # counters, memcpy into __half.
      set_source_files_properties(${_out} PROPERTIES COMPILE_OPTIONS
                                  "-include;${PROJECT_SOURCE_DIR}/emulator/include/cuda_emulation.h;-Wno-unknown-pragmas;-Wno-sign-compare;-Wno-class-memaccess")
    endif()
  endforeach()
  target_include_directories(${target} BEFORE PRIVATE ${_out_dir})
  target_compile_definitions(${target} PUBLIC CUDAGRAD_WITH_CUDA=1 CUDAGRAD_GPU_EMULATION=1)
  target_link_libraries(${target} PUBLIC cudagrad_emulator)
endfunction()
