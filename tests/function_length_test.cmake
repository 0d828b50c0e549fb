# Functions read as their steps: no function of the project's C++ outside tests/ is over
# MAX_LINES lines (60), from its first line to its closing brace as Universal Ctags
# (Debian's universal-ctags) reads them. A longer one is split into named steps (helpers
# in an anonymous namespace, a struct for state the steps share). Fails naming each.
#   cmake -DCTAGS=<ctags> -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -P function_length_test.cmake
if(NOT CTAGS)
  message(FATAL_ERROR "Universal Ctags not found: deploy/install-deps.sh installs it")
endif()
set(MAX_LINES 60)

# The functions of files (paths under base_dir) over MAX_LINES, as "file:line: name is
# N lines", in out.
function(long_functions base_dir files out)
  execute_process(
    COMMAND ${CTAGS} -f - --fields=+ne --extras=-q --c++-kinds=f --language-force=C++
      ${files}
    WORKING_DIRECTORY ${base_dir}
    OUTPUT_VARIABLE tags
    RESULT_VARIABLE ctags_result)
  if(NOT ctags_result EQUAL 0)
    message(FATAL_ERROR "${CTAGS} failed (${ctags_result})")
  endif()
  string(REPLACE ";" "," tags "${tags}")
  string(REPLACE "\n" ";" tags "${tags}")
  set(found "")
  foreach(tag IN LISTS tags)
    if(tag MATCHES "^([^\t]+)\t([^\t]+)\t.*\tline:([0-9]+).*\tend:([0-9]+)")
      math(EXPR lines "${CMAKE_MATCH_4} - ${CMAKE_MATCH_3} + 1")
      if(lines GREATER MAX_LINES)
        list(APPEND found "${CMAKE_MATCH_2}:${CMAKE_MATCH_3}: ${CMAKE_MATCH_1} is ${lines} lines")
      endif()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The rule must bite: a function of MAX_LINES + 1 lines is found, one of MAX_LINES not.
file(MAKE_DIRECTORY ${WORK_DIR})
foreach(probe_lines ${MAX_LINES} 61)
  math(EXPR body "${probe_lines} - 2")
  string(REPEAT "  x += 1;\n" ${body} statements)
  file(WRITE ${WORK_DIR}/probe_${probe_lines}.cc
    "int Probe(int x) {\n${statements}}\n")
  long_functions(${WORK_DIR} probe_${probe_lines}.cc probe)
  if((probe AND probe_lines EQUAL MAX_LINES) OR (NOT probe AND probe_lines GREATER MAX_LINES))
    message(FATAL_ERROR "the length check judged a ${probe_lines}-line function wrongly "
      "(${probe}): ctags' output or the rule is broken")
  endif()
endforeach()

find_package(Git REQUIRED)
execute_process(
  COMMAND ${GIT_EXECUTABLE} ls-files -- "*.cc" "*.h"
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE files
  OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REPLACE "\n" ";" files "${files}")
list(FILTER files EXCLUDE REGEX "^tests/|\\.pb\\.(cc|h)$")
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no C++ sources found by git ls-files in ${SOURCE_DIR}")
endif()
long_functions(${SOURCE_DIR} "${files}" long)
if(long)
  string(REPLACE ";" "\n  " listed "${long}")
  message(FATAL_ERROR "functions over ${MAX_LINES} lines (split them into their steps):\n"
    "  ${listed}")
endif()
message(STATUS "function length: ${count} sources, no function over ${MAX_LINES} lines")
