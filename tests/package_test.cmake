# Installs the build into a scratch prefix, builds examples/cpp-client against it with
# find_package(gpuest), and runs it against a real server.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/cpp-client
  -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring a consumer with find_package(gpuest) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building against gpuest::client failed")
endif()

# A real server on a free port, in the background, then the consumer asks it.
execute_process(COMMAND sh -c
  "${SERVER} --listen=127.0.0.1:0 --metrics-listen= --models=${SOURCE_DIR}/models --ready-file=${WORK_DIR}/ready.json --log-level=warn >${WORK_DIR}/server.log 2>&1 & echo $! > ${WORK_DIR}/pid; for i in $(seq 200); do [ -f ${WORK_DIR}/ready.json ] && exit 0; sleep 0.05; done; exit 1"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "server did not start")
endif()
file(READ ${WORK_DIR}/ready.json ready)
string(JSON port GET "${ready}" grpc_port)
execute_process(COMMAND ${WORK_DIR}/consumer/fits 127.0.0.1:${port} a100-40gb 64
  RESULT_VARIABLE fits OUTPUT_VARIABLE out)
execute_process(COMMAND ${WORK_DIR}/consumer/fits 127.0.0.1:${port} t4 2000000
  RESULT_VARIABLE too_big OUTPUT_VARIABLE out2)
file(READ ${WORK_DIR}/pid pid)
string(STRIP "${pid}" pid)
execute_process(COMMAND kill -TERM ${pid})
message(STATUS "${out}${out2}")
if(NOT fits EQUAL 0 OR NOT too_big EQUAL 1)
  message(FATAL_ERROR "consumer answers wrong: fits=${fits} too_big=${too_big}")
endif()
