# The emulated GPU's own tests (emulated build only): CUDA programs under tests/emulator/*_test.cu,
# compiled as C++ like the kernels (cmake/Emulation.cmake) and run with the label "emulated".
file(GLOB _emulator_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_test.cu)
foreach(_src ${_emulator_tests})
  get_filename_component(_name ${_src} NAME_WE)
  set_source_files_properties(${_src} PROPERTIES LANGUAGE CXX)
  add_executable(emulator_${_name} ${_src})
  target_compile_options(emulator_${_name} PRIVATE -include ${PROJECT_SOURCE_DIR}/emulator/include/cuda_emulation.h
                         -Wno-unknown-pragmas -Wno-sign-compare ${CUDAGRAD_EMU_ACCESS_FLAGS})
  target_link_libraries(emulator_${_name} PRIVATE cudagrad_emulator GTest::gtest GTest::gtest_main)
  if(CUDAGRAD_EMU_ACCESS_CHECKS)
    target_compile_definitions(emulator_${_name} PRIVATE CG_EMU_ACCESS_CHECKS=1)
  endif()
  gtest_discover_tests(emulator_${_name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "emulator;emulated")
endforeach()
