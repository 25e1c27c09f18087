# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P git_commit_test.cmake: cmake/GitCommit.cmake writes the
# checkout's commit, and "unknown" (without failing) for a tree that is no git checkout, e.g. an
# unpacked source tarball; WORK_DIR (under the build folder) may itself lie inside a checkout.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/not_a_checkout)
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${WORK_DIR}/not_a_checkout -DOUTPUT=${WORK_DIR}/none.h
                        -P ${SOURCE_DIR}/cmake/GitCommit.cmake RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/none.h none)
if(NOT rc EQUAL 0 OR NOT none MATCHES "CUDAGRAD_GIT_COMMIT \"unknown\"")
  message(FATAL_ERROR "outside a checkout: exit ${rc}, wrote:\n${none}")
endif()
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${SOURCE_DIR}/.git)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR} -DOUTPUT=${WORK_DIR}/here.h
                          -P ${SOURCE_DIR}/cmake/GitCommit.cmake)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE)
  file(READ ${WORK_DIR}/here.h here)
  if(NOT here MATCHES "CUDAGRAD_GIT_COMMIT \"${head}\"")
    message(FATAL_ERROR "in the checkout (HEAD ${head}) it wrote:\n${here}")
  endif()
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "git commit header: ok")
