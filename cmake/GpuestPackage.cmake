# Installs the client library as a CMake package: find_package(gpuest) gives
# gpuest::client (with the generated messages and stubs it needs, and gpuest_common's
# bounded file reader and JSON guard, which it reads its TLS files and policy with).
include(CMakePackageConfigHelpers)

set_target_properties(gpuest_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(gpuest_grpc PROPERTIES EXPORT_NAME grpc)
set_target_properties(gpuest_common PROPERTIES EXPORT_NAME common)
install(TARGETS gpuest_client gpuest_grpc gpuest_proto gpuest_common EXPORT gpuestTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT gpuestTargets NAMESPACE gpuest::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpuest)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gpuestConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/gpuestConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpuest)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/gpuestConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gpuestConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/gpuestConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpuest)
