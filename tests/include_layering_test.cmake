# The layers at the include level: every #include "folder/..." of the project's C++
# sources held against cmake/GpuestLayering.cmake's GPUEST_INCLUDE_LAYERS, the table the
# link-time check shares (docs/ARCHITECTURE.md). Fails naming each file, line and the
# folder it may not include.
#   cmake -DSOURCE_DIR=<repo> -P include_layering_test.cmake
cmake_minimum_required(VERSION 3.20)
include(${SOURCE_DIR}/cmake/GpuestLayering.cmake)

# The folders `folder`'s sources may include, in allowed_out (unset: any).
function(allowed_folders folder allowed_out)
  unset(${allowed_out} PARENT_SCOPE)
  foreach(row IN LISTS GPUEST_INCLUDE_LAYERS)
    string(REGEX MATCH "^([a-z_]+): (.*)$" _ "${row}")
    if(CMAKE_MATCH_1 STREQUAL folder)
      string(REPLACE " " ";" allowed "${CMAKE_MATCH_2}")
      set(${allowed_out} "${allowed}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# The violations of one source's text, appended to violations_out.
function(check_source path text violations_out)
  string(REGEX MATCH "^([a-z_]+)/" _ "${path}")
  set(folder "${CMAKE_MATCH_1}")
  allowed_folders("${folder}" allowed)
  if(NOT DEFINED allowed)
    return()
  endif()
  set(found "${${violations_out}}")
  string(REPLACE "\n" ";" lines "${text}")
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]+\"([a-z_]+)/")
      set(included "${CMAKE_MATCH_1}")
      if(included IN_LIST GPUEST_PROJECT_FOLDERS AND NOT included IN_LIST allowed)
        string(REPLACE ";" " " may "${allowed}")
        list(APPEND found "${path}:${number}: ${folder}/ includes ${included}/ (may include: ${may})")
      endif()
    endif()
  endforeach()
  set(${violations_out} "${found}" PARENT_SCOPE)
endfunction()

# The rule must bite: a model-layer source including the server is a violation.
set(probe "")
check_source("estimators/probe.cc" "#include \"server/options.h\"\n" probe)
if(NOT probe)
  message(FATAL_ERROR "the include check found nothing wrong in a source that includes "
    "server/ from estimators/: the table or the rule is broken")
endif()

set(violations "")
set(count 0)
foreach(row IN LISTS GPUEST_INCLUDE_LAYERS)
  string(REGEX MATCH "^([a-z_]+):" _ "${row}")
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
    ${SOURCE_DIR}/${CMAKE_MATCH_1}/*.h ${SOURCE_DIR}/${CMAKE_MATCH_1}/*.cc)
  foreach(path IN LISTS sources)
    file(READ ${SOURCE_DIR}/${path} text)
    check_source("${path}" "${text}" violations)
    math(EXPR count "${count} + 1")
  endforeach()
endforeach()
if(violations)
  string(REPLACE ";" "\n  " listed "${violations}")
  message(FATAL_ERROR "includes that cross a layer upward (cmake/GpuestLayering.cmake):\n  ${listed}")
endif()
message(STATUS "include layering: ${count} sources, no include crosses a layer upward")
