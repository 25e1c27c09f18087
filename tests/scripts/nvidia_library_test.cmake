# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P nvidia_library_test.cmake
# Lays out a fake library as an nvidia-* wheel does (include/fake.h, lib/libfake.so.9 and no
# libfake.so) and configures tests/scripts/nvidia_library, which must find both under the hint.
file(REMOVE_RECURSE ${WORK_DIR})
file(WRITE ${WORK_DIR}/wheel/include/fake.h "")
file(WRITE ${WORK_DIR}/wheel/lib/libfake.so.9 "")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/scripts/nvidia_library -B ${WORK_DIR}/build
          -DSOURCE_DIR=${SOURCE_DIR} -DFAKE_ROOT=${WORK_DIR}/wheel
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configure failed:\n${out}\n${err}")
endif()
message(STATUS "${out}")
