# gpuest-ml-check builds as a project of its own (lab/gpu/ml_check), with a compiler,
# CMake and libtorch alone, as a GPU machine with only PyTorch's wheel builds it
# (lab/gpu/device_run_ml.sh): configured against this build's libtorch in a scratch
# folder, built, run on generated rows, and its direct dependencies read (readelf):
# none of gRPC, protobuf's or Abseil's libraries of the rest of the project.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DTORCH_DIR=<Torch_DIR> -P ml_check_standalone_test.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/lab/gpu/ml_check -B ${WORK_DIR} -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DTorch_DIR=${TORCH_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring lab/gpu/ml_check alone failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building lab/gpu/ml_check alone failed:\n${out}")
endif()
execute_process(COMMAND readelf -d ${WORK_DIR}/gpuest-ml-check
  RESULT_VARIABLE rc OUTPUT_VARIABLE needed ERROR_VARIABLE needed)
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed "${needed}")
message(STATUS "gpuest-ml-check needs: ${needed}")
if(NOT rc EQUAL 0 OR NOT needed MATCHES "libtorch")
  message(FATAL_ERROR "readelf -d gpuest-ml-check: no libtorch among ${needed}")
endif()
foreach(library absl grpc spdlog fmt microhttpd gnutls prometheus simdjson)
  if(needed MATCHES "lib${library}")
    message(FATAL_ERROR "gpuest-ml-check links lib${library}: ${needed}")
  endif()
endforeach()
execute_process(
  COMMAND ${WORK_DIR}/gpuest-ml-check --models ${SOURCE_DIR}/models --generate 64
    --timing-requests 1 --device cpu
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nPASSED\n")
  message(FATAL_ERROR "gpuest-ml-check (standalone) exited with ${rc}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
