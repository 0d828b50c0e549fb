# The layers of docs/ARCHITECTURE.md, checked when the project is configured: a link
# that crosses a layer the wrong way fails the configure step, naming both ends.
#
#   estimators/, placement/ (and what they use)  never link gRPC, prometheus-cpp,
#                                                 cpp-httplib or civetweb: they are the
#                                                 model, callable from tests, the replay
#                                                 and the lab without a server;
#   server/, integrations/kubernetes/            never link client/ (the CLI's and the
#                                                 scheduler client's code);
#   the product (server/, client/, what they     never links lab/ (trainers, calibration,
#   link)                                         contention fitting, datasets).

# The same layers by folder, for the include check (tests/include_layering_test.cmake,
# in ctest: the link check above cannot see a header included): each folder, then the
# project paths its sources may include (a folder, or one header). Lowest first; a
# folder includes only its own layer and those below. A source belongs to the longest
# folder listed that holds it. Folders not listed (lab/, bench/, tests/: the offline lab
# and the tests) may include any.
set(GPUEST_INCLUDE_LAYERS
  "common: common"
  "requests: common requests"
  "estimators: common requests estimators"
  # Inside estimators/: core knows no estimator, and no estimator knows another; only
  # the factory table (estimators/default_factories.*) names them all.
  "estimators/core: common requests estimators/core"
  "estimators/allocsim: common requests estimators/core estimators/allocsim"
  "estimators/gpumemnet: common requests estimators/core estimators/gpumemnet"
  "estimators/horus: common requests estimators/core estimators/horus"
  "placement: common requests estimators placement"
  "integrations/kubernetes: common requests estimators placement integrations/kubernetes"
  "server: common requests estimators placement integrations/kubernetes server"
  "client: common requests client integrations/kubernetes/pod_patch.h integrations/kubernetes/dra_claim.h")
# Each folder of C++: the namespace its code is in (gpuest:: and the folder's last
# name) and the library target it builds (gpuest_ and the same name), so that a
# header's path tells both. client/gpuest/ holds the public client API, installed as
# <gpuest/...>: namespace gpuest, built into client/'s gpuest_client; it and
# lab/gpu/ml_check (programs only) have no target of their own (-). Checked by tests/folder_layout_test.cmake (namespaces, and unit
# tests in tests/unit/<folder>/ in the folder's namespace) and, for the targets, when
# the project is configured (gpuest_check_folder_targets).
set(GPUEST_FOLDER_LAYOUT
  "common: gpuest::common gpuest_common"
  "requests: gpuest::requests gpuest_requests"
  "estimators: gpuest::estimators gpuest_estimators"
  "estimators/core: gpuest::core gpuest_core"
  "estimators/allocsim: gpuest::allocsim gpuest_allocsim"
  "estimators/gpumemnet: gpuest::gpumemnet gpuest_gpumemnet"
  "estimators/horus: gpuest::horus gpuest_horus"
  "placement: gpuest::placement gpuest_placement"
  "integrations/kubernetes: gpuest::kubernetes gpuest_kubernetes"
  "server: gpuest::server gpuest_server"
  "client: gpuest::client gpuest_client"
  "client/gpuest: gpuest -"
  "client/cli: gpuest::cli gpuest_cli"
  "lab/calibration: gpuest::calibration gpuest_calibration"
  "lab/contention: gpuest::contention gpuest_contention"
  "lab/data: gpuest::data gpuest_data"
  "lab/trainer: gpuest::trainer gpuest_trainer"
  "lab/gpu/ml_check: gpuest::ml_check -")

# The row of a "folder: rest" table (GPUEST_INCLUDE_LAYERS, GPUEST_FOLDER_LAYOUT) whose
# folder is the longest that holds path: the folder in folder_out (empty: none), the
# rest of its row in rest_out.
function(gpuest_folder_row path table folder_out rest_out)
  set(best "")
  set(best_rest "")
  foreach(row IN LISTS ${table})
    string(REGEX MATCH "^([a-z_/]+): (.*)$" _ "${row}")
    string(LENGTH "${CMAKE_MATCH_1}" length)
    string(LENGTH "${best}" best_length)
    string(FIND "${path}" "${CMAKE_MATCH_1}/" at)
    if(at EQUAL 0 AND length GREATER best_length)
      set(best "${CMAKE_MATCH_1}")
      set(best_rest "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${folder_out} "${best}" PARENT_SCOPE)
  set(${rest_out} "${best_rest}" PARENT_SCOPE)
endfunction()

# The project's own top-level folders (an include of another first folder, such as
# "absl/" or "gpuest/", is a dependency's or generated code's, and not checked).
set(GPUEST_PROJECT_FOLDERS common requests estimators placement integrations server client
  lab bench tests)

# Every target name target links, directly or through others (link-only $<LINK_ONLY:>
# and other generator expressions are read for the names inside them).
function(gpuest_link_closure target out)
  set(seen "")
  set(todo "${target}")
  while(todo)
    list(POP_FRONT todo current)
    if(current IN_LIST seen OR NOT TARGET "${current}")
      continue()
    endif()
    list(APPEND seen "${current}")
    get_target_property(aliased "${current}" ALIASED_TARGET)
    if(aliased)
      list(APPEND todo "${aliased}")
    endif()
    foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(links "${current}" ${property})
      if(NOT links)
        continue()
      endif()
      foreach(link IN LISTS links)
        string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
        if(TARGET "${link}")
          list(APPEND todo "${link}")
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

function(gpuest_forbid_links)
  cmake_parse_arguments(ARG "" "WHY" "TARGETS;FORBIDDEN" ${ARGN})
  foreach(target IN LISTS ARG_TARGETS)
    if(NOT TARGET "${target}")
      message(FATAL_ERROR "layering check: no target ${target} (renamed? update "
                          "cmake/GpuestLayering.cmake)")
    endif()
    gpuest_link_closure("${target}" closure)
    foreach(bad IN LISTS ARG_FORBIDDEN)
      if(bad IN_LIST closure)
        message(FATAL_ERROR "layering: ${target} links ${bad}; ${ARG_WHY} "
                            "(docs/ARCHITECTURE.md)")
      endif()
    endforeach()
  endforeach()
endfunction()

function(gpuest_check_layering)
  gpuest_forbid_links(
    TARGETS gpuest_core gpuest_allocsim gpuest_horus gpuest_gpumemnet gpuest_gpumemnet_torch
      gpuest_estimators gpuest_core_torch gpuest_placement gpuest_requests gpuest_common
    FORBIDDEN gRPC::grpc++ gRPC::grpc gRPC::grpc++_reflection gpuest_grpc
      prometheus-cpp::pull prometheus-cpp::core PkgConfig::HTTPLIB PkgConfig::MICROHTTPD
      civetweb::civetweb
      civetweb::civetweb-cpp
    WHY "the model layers run without a server")
  gpuest_forbid_links(
    TARGETS gpuest_kubernetes gpuest_server gpuest-server
    FORBIDDEN gpuest_client gpuest_cli gpuest
    WHY "the server never links client/")
  gpuest_forbid_links(
    TARGETS gpuest-server gpuest_server gpuest gpuest_client gpuest_cli
      gpuest_kubernetes
    FORBIDDEN gpuest_data gpuest_trainer gpuest_calibration gpuest_contention
    WHY "the product never links the lab")
endfunction()

# Each folder's library target is named after the folder (GPUEST_FOLDER_LAYOUT), and
# its sources are the folder's own: a folder's code is one room, and a second target
# of a folder says why in its name (gpuest_core_torch, gpuest_gpumemnet_torch: the
# libtorch doors). Generated sources (the build tree) are not checked.
function(gpuest_check_folder_targets)
  foreach(row IN LISTS GPUEST_FOLDER_LAYOUT)
    string(REGEX MATCH "^([a-z_/]+): ([a-z_:]+) ([a-z_-]+)$" _ "${row}")
    set(folder "${CMAKE_MATCH_1}")
    set(target "${CMAKE_MATCH_3}")
    if(target STREQUAL "-")
      continue()
    endif()
    if(NOT TARGET ${target})
      message(FATAL_ERROR "folder layout: ${folder}/ builds no target ${target} "
                          "(cmake/GpuestLayering.cmake's GPUEST_FOLDER_LAYOUT)")
    endif()
    get_target_property(source_dir ${target} SOURCE_DIR)
    get_target_property(sources ${target} SOURCES)
    foreach(source IN LISTS sources)
      if(NOT IS_ABSOLUTE "${source}")
        set(source "${source_dir}/${source}")
      endif()
      cmake_path(NORMAL_PATH source)
      if(source MATCHES "^${PROJECT_BINARY_DIR}/")
        continue()
      endif()
      file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}" "${source}")
      string(FIND "${relative}" "${folder}/" at)
      if(NOT at EQUAL 0)
        message(FATAL_ERROR "folder layout: ${target} (the target of ${folder}/) builds "
                            "${relative}, which is not in ${folder}/")
      endif()
    endforeach()
  endforeach()
endfunction()
