# The Python package as a user installs it: a wheel built from a copy of python/ and
# proto/ (so the checkout stays clean), a fresh virtual environment that sees Debian's
# torch, grpcio and protobuf (--system-site-packages), and an offline install into it
# with Debian's pip and setuptools (no index, no build isolation).
#   cmake -DPYTHON=... -DSOURCE_DIR=... -DWORK_DIR=... -P python_package_test.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/src)
file(COPY ${SOURCE_DIR}/proto ${SOURCE_DIR}/python DESTINATION ${WORK_DIR}/src
  PATTERN __pycache__ EXCLUDE PATTERN build EXCLUDE PATTERN "*.egg-info" EXCLUDE)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

set(ENV{PIP_NO_INPUT} 1)
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
set(venv ${WORK_DIR}/venv)
run("python3 -m venv --system-site-packages" ${PYTHON} -m venv --system-site-packages ${venv})
run("pip wheel ./python" ${venv}/bin/pip wheel --no-index --no-build-isolation --no-deps
  -w ${WORK_DIR}/dist ${WORK_DIR}/src/python)
file(GLOB wheel ${WORK_DIR}/dist/gpuest-*.whl)
list(LENGTH wheel n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one wheel in ${WORK_DIR}/dist, found: ${wheel}")
endif()
# Dependencies (grpcio, protobuf) are checked, and found in Debian's site-packages.
run("pip install the wheel, offline" ${venv}/bin/pip install --no-index --no-build-isolation
  ${wheel})
