# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P git_commit_test.cmake: cmake/GitCommit.cmake writes the
# checkout's commit, with "+dirty" when a tracked file was changed, and "unknown" (without
# failing) for a tree that is no git checkout, e.g. an unpacked source tarball; WORK_DIR (under
# the build folder) may itself lie inside a checkout.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/not_a_checkout)
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${WORK_DIR}/not_a_checkout -DOUTPUT=${WORK_DIR}/none.h
                        -P ${SOURCE_DIR}/cmake/GitCommit.cmake RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/none.h none)
if(NOT rc EQUAL 0 OR NOT none MATCHES "CUDAGRAD_GIT_COMMIT \"unknown\"")
  message(FATAL_ERROR "outside a checkout: exit ${rc}, wrote:\n${none}")
endif()
find_package(Git QUIET)
if(GIT_FOUND)
  # A checkout of its own: its commit, then "+dirty" once a tracked file is changed.
  set(repo ${WORK_DIR}/repo)
  file(MAKE_DIRECTORY ${repo})
  file(WRITE ${repo}/a.txt "one\n")
  foreach(step "init -q" "add a.txt" "-c user.name=t -c user.email=t@t commit -q -m one")
    separate_arguments(args UNIX_COMMAND "${step}")
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${repo} ${args} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "git ${step} failed in ${repo}")
    endif()
  endforeach()
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${repo} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE)
  # expect_header(WHAT PATTERN): the header GitCommit.cmake writes for ${repo} matches PATTERN.
  function(expect_header what pattern)
    execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${repo} -DOUTPUT=${WORK_DIR}/header.h
                            -P ${SOURCE_DIR}/cmake/GitCommit.cmake)
    file(READ ${WORK_DIR}/header.h header)
    if(NOT header MATCHES "${pattern}")
      message(FATAL_ERROR "${what} (HEAD ${head}) it wrote:\n${header}")
    endif()
  endfunction()
  expect_header("in a clean checkout" "CUDAGRAD_GIT_COMMIT \"${head}\"")
  file(APPEND ${repo}/a.txt "two\n")
  expect_header("with a changed file" "CUDAGRAD_GIT_COMMIT \"${head}\\+dirty\"")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "git commit header: ok")
