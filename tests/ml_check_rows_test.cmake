# The rows gpuest-ml-check's CPU half reads (gpuest-ml-rows): GPUMemNet's measured CSVs
# where $GPUEST_DATA_DIR (else DEFAULT_ROOT) holds them, as tests/support/datasets.h finds
# the datasets; without them the project's fixture rows (tests/data/fixture-datasets),
# or a failure under GPUEST_REQUIRE_DATA=1, as every dataset test does.
#   cmake -DROWS_TOOL=<gpuest-ml-rows> -DSOURCE_DIR=<repo> -DDEFAULT_ROOT=<data root>
#     -DFIXTURE_ROOT=<fixtures> -DOUT=<rows file> -P ml_check_rows_test.cmake
cmake_minimum_required(VERSION 3.20)
set(root "${DEFAULT_ROOT}")
if(DEFINED ENV{GPUEST_DATA_DIR} AND NOT "$ENV{GPUEST_DATA_DIR}" STREQUAL "")
  set(root "$ENV{GPUEST_DATA_DIR}")
endif()
if(EXISTS "${root}/gpumemnet/mlp.csv" AND EXISTS "${root}/gpumemnet/cnn.csv")
  set(data "${root}/gpumemnet")
elseif("$ENV{GPUEST_REQUIRE_DATA}" STREQUAL "1")
  message(FATAL_ERROR "dataset gpumemnet/mlp.csv not found under ${root}: set GPUEST_DATA_DIR")
else()
  message(STATUS "dataset gpumemnet/ not found under ${root} (set GPUEST_DATA_DIR): "
    "the fixture rows instead")
  set(data "${FIXTURE_ROOT}/gpumemnet")
endif()
execute_process(
  COMMAND ${ROWS_TOOL} --models=${SOURCE_DIR}/models --data-dir=${data} --out=${OUT}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpuest-ml-rows exited with ${rc}")
endif()
