# A header's path tells its namespace: every C++ file of a folder of
# cmake/GpuestLayering.cmake's GPUEST_FOLDER_LAYOUT opens that folder's namespace (or one
# inside it), and the unit tests of tests/unit/<folder>/ the namespace of <folder>.
# Another folder's namespace may be opened only to declare its classes ahead
# (`namespace gpuest::kubernetes { class KubeExtender; }`). Fails naming the file, the
# line and the namespace it should be in.
#   cmake -DSOURCE_DIR=<repo> -P folder_layout_test.cmake
cmake_minimum_required(VERSION 3.20)
include(${SOURCE_DIR}/cmake/GpuestLayering.cmake)

# The folder of GPUEST_FOLDER_LAYOUT that holds path (the longest), and its namespace.
function(namespace_of path folder_out namespace_out)
  gpuest_folder_row("${path}" GPUEST_FOLDER_LAYOUT folder rest)
  string(REGEX REPLACE " .*" "" namespace "${rest}")
  set(${folder_out} "${folder}" PARENT_SCOPE)
  set(${namespace_out} "${namespace}" PARENT_SCOPE)
endfunction()

# The violations of one file's text against namespace expected, appended to out.
# A project namespace block (`namespace gpuest...{` at the start of a line) is the
# expected one, one inside it, or another folder's holding only declarations ahead.
function(check_namespaces label text expected out)
  set(found "${${out}}")
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  set(opened_own FALSE)
  set(opened_any FALSE)  # A file that opens none (a main, macros) declares no names.
  set(foreign "")  # the foreign block being read, and the line it opened on
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(foreign)
      if(line MATCHES "^}")
        set(foreign "")
      elseif(NOT line MATCHES "^(class|struct) [A-Za-z_0-9]+,$" AND NOT line STREQUAL "")
        list(APPEND found "${label}:${foreign_line}: opens ${foreign}, not ${expected}")
        set(foreign "")
      endif()
      continue()
    endif()
    if(line MATCHES "^namespace (gpuest[a-z_:]*) {")
      set(name "${CMAKE_MATCH_1}")
      set(opened_any TRUE)
      if(name STREQUAL expected OR name MATCHES "^${expected}::")
        set(opened_own TRUE)
      else()
        set(foreign "${name}")
        set(foreign_line ${number})
      endif()
    endif()
  endforeach()
  if(NOT opened_own AND opened_any)
    list(APPEND found "${label}: opens no namespace ${expected}")
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The rule must bite: a core header in plain gpuest, a server header opening another
# folder's namespace for more than declarations ahead; and pass what is allowed. (A
# probe's text is written with "," for ";", as check_namespaces reads a file.)
foreach(probe_case
    "estimators/core/probe.h|namespace gpuest {\nint F(),\n}|bad"
    "server/probe.h|namespace gpuest::kubernetes {\nclass A,\n}\nnamespace gpuest::server {\n}|good"
    "server/probe.h|namespace gpuest::kubernetes {\nint F(),\n}\nnamespace gpuest::server {\n}|bad"
    "estimators/core/probe.h|namespace gpuest::core::manifest {\n}|good")
  string(REPLACE "|" ";" probe_case "${probe_case}")
  list(GET probe_case 0 probe_path)
  list(GET probe_case 1 probe_text)
  list(GET probe_case 2 probe_expected)
  string(REPLACE "\\n" "\n" probe_text "${probe_text}")
  namespace_of("${probe_path}" probe_folder probe_namespace)
  set(probe "")
  check_namespaces("${probe_path}" "${probe_text}" "${probe_namespace}" probe)
  if((probe AND probe_expected STREQUAL "good") OR (NOT probe AND probe_expected STREQUAL "bad"))
    message(FATAL_ERROR "the namespace check judged ${probe_path} wrongly (expected "
      "${probe_expected}: ${probe}): the table or the rule is broken")
  endif()
endforeach()

set(violations "")
set(count 0)
foreach(row IN LISTS GPUEST_FOLDER_LAYOUT)
  string(REGEX MATCH "^([a-z_/]+):" _ "${row}")
  set(folder "${CMAKE_MATCH_1}")
  # The folder's own sources, and its unit tests in tests/unit/<folder>/.
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
    ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.cc
    ${SOURCE_DIR}/tests/unit/${folder}/*.h ${SOURCE_DIR}/tests/unit/${folder}/*.cc)
  foreach(path IN LISTS sources)
    string(REGEX REPLACE "^tests/unit/" "" code_path "${path}")
    namespace_of("${code_path}" owner expected)
    if(NOT owner STREQUAL folder)
      continue()  # A deeper folder of the table holds it: checked with that row.
    endif()
    file(READ ${SOURCE_DIR}/${path} text)
    check_namespaces("${path}" "${text}" "${expected}" violations)
    math(EXPR count "${count} + 1")
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" "\n  " listed "${violations}")
  message(FATAL_ERROR "files outside their folder's namespace "
    "(cmake/GpuestLayering.cmake's GPUEST_FOLDER_LAYOUT):\n  ${listed}")
endif()
message(STATUS "folder layout: ${count} files, each in its folder's namespace")
