# Checks that the Go client's sources are as gofmt prints them:
#   cmake -DGOFMT=<gofmt> -DSOURCE_DIR=<client/go> -P gofmt_check.cmake
# Fails, with the diff, when gofmt would change one. Generated code lives in the
# build directory, not here.
if(NOT GOFMT)
  message(FATAL_ERROR "gofmt not found: deploy/install-deps.sh installs golang-go")
endif()
file(GLOB_RECURSE sources ${SOURCE_DIR}/*.go)
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no Go sources under ${SOURCE_DIR}")
endif()
execute_process(
  COMMAND ${GOFMT} -l ${sources}
  OUTPUT_VARIABLE unformatted
  ERROR_VARIABLE errors
  RESULT_VARIABLE result
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "gofmt failed: ${errors}")
endif()
if(unformatted)
  string(REPLACE "\n" ";" files "${unformatted}")
  execute_process(COMMAND ${GOFMT} -d ${files} OUTPUT_VARIABLE diff)
  message(FATAL_ERROR "gofmt would change these sources (run gofmt -w):\n${diff}")
endif()
message(STATUS "${count} Go sources are gofmt-clean")
