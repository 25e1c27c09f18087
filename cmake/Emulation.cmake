# The emulated GPU (-DCUDAGRAD_GPU_EMULATION=ON, its own build folder): the kernels/cuda sources
# compiled by the C++ compiler and run on the CPU by emulator/ (see its files), so the CUDA half
# of cudagrad is tested where no GPU is. No nvcc, and no source rewritten: each .cu is compiled as
# it is, as C++, with emulator/include/cuda_emulation.h in front (what only a device has: thread
# coordinates, barriers, shuffles, atomics) and CUDAGRAD_GPU_EMULATION defined, under which
# kernels/cuda/launch.h takes its launch and shared arrays from emulator/include/cg_emu/kernel_start.h.
# The toolkit's headers give the types (the runtime API, __half); cuDNN, cuBLAS and NCCL are not
# emulated and not linked: their sources are left out, and the code that calls them does so only
# where kernels::kCudaLibraries (kernels/backend.h) is true.
option(CUDAGRAD_GPU_EMULATION "Run the CUDA kernels on the CPU through an emulated device (no GPU, no nvcc needed)" OFF)
# The kernels' shared-memory accesses checked (emulator/shared_checker.h: bounds, and races between
# barriers): g++'s thread-sanitizer instrumentation without its runtime puts a call before every
# load and store, which emulator/access_hooks.cpp answers. It makes the kernels about 3x slower, so
# the checked copy of the kernel sources is a library of its own, <target>_checked, that only the
# kernel tests and the emulator's tests link (tests/CMakeLists.txt); the engine, the trainer and
# their tests run the plain one. Off under AddressSanitizer (scripts/sanitize.sh emu), which g++
# will not combine with it.
option(CUDAGRAD_EMU_ACCESS_CHECKS "Emulated GPU: the kernel tests check every shared-memory access" ON)
set(CUDAGRAD_EMU_ACCESS_FLAGS "")
if(CUDAGRAD_GPU_EMULATION AND CUDAGRAD_EMU_ACCESS_CHECKS)
  set(CUDAGRAD_EMU_ACCESS_FLAGS
      "-fsanitize=thread;--param=tsan-instrument-func-entry-exit=0;--param=tsan-distinguish-volatile=0;-Wno-tsan")
endif()

if(CUDAGRAD_GPU_EMULATION)
  set(CUDAGRAD_CUDA OFF CACHE BOOL "Build the CUDA backend" FORCE)  # the emulation replaces nvcc's build
  find_package(CUDAToolkit REQUIRED)  # its headers only
  find_package(Boost REQUIRED COMPONENTS context)
  file(GLOB _emu_src CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/emulator/*.cpp)
  # The instrumentation's entry points only where the checks are on: under a sanitizer g++ declares
  # them itself (with other parameter types), and there nothing calls them.
  if(NOT CUDAGRAD_EMU_ACCESS_CHECKS)
    list(FILTER _emu_src EXCLUDE REGEX "/emulator/access_hooks\\.cpp$")
  endif()
  add_library(cudagrad_emulator STATIC ${_emu_src})
  target_include_directories(cudagrad_emulator PUBLIC ${PROJECT_SOURCE_DIR}/emulator/include ${CUDAToolkit_INCLUDE_DIRS}
                             PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(cudagrad_emulator PUBLIC Boost::context fmt::fmt Threads::Threads)
  # cg_emu/traffic.h counts what the instrumented kernels access: only where the hooks are built.
  if(CUDAGRAD_EMU_ACCESS_CHECKS)
    target_compile_definitions(cudagrad_emulator PRIVATE CG_EMU_TRAFFIC_HOOKS=1)
  else()
    target_compile_definitions(cudagrad_emulator PRIVATE CG_EMU_TRAFFIC_HOOKS=0)
  endif()
  message(STATUS "cudagrad: emulated GPU (CUDA ${CUDAToolkit_VERSION} headers, kernels run on the CPU)")
endif()

# The one .cu that needs a vendor library (cuBLAS), left out of the emulated build; the cuDNN
# sources are .cpp files, which the emulated build does not take from kernels/cuda at all.
set(CUDAGRAD_VENDOR_SOURCES_REGEX "/kernels/cuda/linear_cublas\\.cu$")

function(cudagrad_add_emulated_sources target)
  if(NOT CUDAGRAD_GPU_EMULATION)
    return()
  endif()
  file(GLOB _sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu)
  list(FILTER _sources EXCLUDE REGEX "${CUDAGRAD_VENDOR_SOURCES_REGEX}")
  target_sources(${target} PRIVATE ${_sources})
  # LANGUAGE CXX: g++ takes a .cu for a linker input unless told (CMake then passes -x c++).
  # nvcc's idioms that g++ warns about: #pragma unroll, blockDim.x (unsigned) against int
  # counters, memcpy into __half.
  set_source_files_properties(${_sources} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS
                              "-include;${PROJECT_SOURCE_DIR}/emulator/include/cuda_emulation.h;-Wno-unknown-pragmas;-Wno-sign-compare;-Wno-class-memaccess")
  target_compile_definitions(${target} PUBLIC CUDAGRAD_WITH_CUDA=1 CUDAGRAD_GPU_EMULATION=1)
  target_link_libraries(${target} PUBLIC cudagrad_emulator)
  if(NOT CUDAGRAD_EMU_ACCESS_CHECKS)
    return()
  endif()
  # The checked copy: the same sources, flags and includes, instrumented. It links the plain
  # library after itself, so a test that links it takes every kernel from the checked objects
  # (the linker pulls an archive's object only for a symbol still undefined) and the CPU code
  # from the plain library.
  add_library(${target}_checked STATIC ${_sources})
  target_include_directories(${target}_checked PRIVATE $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${target}_checked PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
  target_compile_options(${target}_checked PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>
                         ${CUDAGRAD_EMU_ACCESS_FLAGS})
  target_link_libraries(${target}_checked PUBLIC ${target})
endfunction()
