# cmake -DCOMPILER=... -DINCLUDE_DIR=... -DHEADER=... -DEXPECT=ok|fail -DSOURCE_DIR=... -DWORK_DIR=...
#       [-DTHIRD_PARTY=dir|dir...] -P CheckInclude.cmake
# Compiles a file that only includes HEADER, with INCLUDE_DIR as the only project include path
# (THIRD_PARTY: the folders of libraries' headers, such as fmt's, where the compiler lacks them).
# EXPECT=fail passes only when the compiler says the header was not found (any other error is a
# broken check, not proof of layering).
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/probe.cpp "#include \"${HEADER}\"\nint main() { return 0; }\n")
string(REPLACE "|" ";" _third_party "${THIRD_PARTY}")
list(TRANSFORM _third_party PREPEND "-isystem")
execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${_third_party} ${WORK_DIR}/probe.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${HEADER} should compile with ${INCLUDE_DIR}:\n${err}")
  endif()
elseif(EXPECT STREQUAL "fail")
  if(NOT EXISTS ${SOURCE_DIR}/${HEADER})
    message(FATAL_ERROR "${HEADER} is not in the source tree: the check would prove nothing")
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${HEADER} was found through ${INCLUDE_DIR}: an upward include compiles")
  endif()
  if(NOT err MATCHES "No such file or directory")
    message(FATAL_ERROR "${HEADER} failed to compile, but not because it is out of reach:\n${err}")
  endif()
else()
  message(FATAL_ERROR "EXPECT must be ok or fail, not '${EXPECT}'")
endif()
message(STATUS "${HEADER} through ${INCLUDE_DIR}: ${EXPECT} as expected")
