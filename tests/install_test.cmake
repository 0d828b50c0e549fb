# Installs the build into a scratch prefix and starts the INSTALLED gpuest-server the
# way a user would: no --models flag, from a directory with no models/ in it. It must
# start (its RUNPATH finds prometheus-cpp), load the installed models, and answer
# health and an Estimate through the installed CLI.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/cwd)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed")
endif()
set(bin ${WORK_DIR}/prefix/bin)
foreach(f share/gpuest/models/gpu_profiles.json share/gpuest/models/allocsim/manifest.json)
  if(NOT EXISTS ${WORK_DIR}/prefix/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

execute_process(COMMAND sh -c
  "${bin}/gpuest-server --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 --ready-file=${WORK_DIR}/ready.json --log-level=info >${WORK_DIR}/server.log 2>&1 & echo $! > ${WORK_DIR}/pid; for i in $(seq 1200); do [ -f ${WORK_DIR}/ready.json ] && exit 0; kill -0 $! 2>/dev/null || exit 1; sleep 0.05; done; exit 1"
  WORKING_DIRECTORY ${WORK_DIR}/cwd RESULT_VARIABLE rc)
file(READ ${WORK_DIR}/server.log log)
if(NOT rc EQUAL 0)
  if(EXISTS ${WORK_DIR}/pid)
    file(READ ${WORK_DIR}/pid pid)
    string(STRIP "${pid}" pid)
    execute_process(COMMAND kill -KILL ${pid} ERROR_QUIET)
  endif()
  message(FATAL_ERROR "the installed server did not start:\n${log}")
endif()
file(READ ${WORK_DIR}/pid pid)
string(STRIP "${pid}" pid)
file(READ ${WORK_DIR}/ready.json ready)
string(JSON port GET "${ready}" grpc_port)
set(target --target=127.0.0.1:${port} --timeout=30s)
execute_process(COMMAND ${bin}/gpuest ${target} health
  RESULT_VARIABLE health_rc OUTPUT_VARIABLE health_out ERROR_VARIABLE health_err)
execute_process(COMMAND ${bin}/gpuest ${target} --json --gpu=a100-40gb estimate
    ${SOURCE_DIR}/examples/cnn.json
  RESULT_VARIABLE estimate_rc OUTPUT_VARIABLE estimate_out ERROR_VARIABLE estimate_err)
execute_process(COMMAND kill -TERM ${pid})
if(NOT health_rc EQUAL 0 OR NOT health_out MATCHES "SERVING")
  message(FATAL_ERROR "health: rc=${health_rc} ${health_out}${health_err}")
endif()
if(NOT estimate_rc EQUAL 0)
  message(FATAL_ERROR "estimate: rc=${estimate_rc} ${estimate_err}")
endif()
# The installed models answered: the ML ensembles and the simulator, and a recommended
# figure that fits the card.
string(JSON recommended GET "${estimate_out}" recommendation memoryBytes)
string(JSON fits GET "${estimate_out}" recommendation fit fits)
string(JSON results LENGTH "${estimate_out}" results)
if(NOT recommended GREATER 0 OR NOT fits STREQUAL "ON" OR results LESS 3)
  message(FATAL_ERROR "estimate looks wrong: ${estimate_out}")
endif()
if(NOT log MATCHES "share/gpuest/models")
  message(FATAL_ERROR "the server did not load the installed models:\n${log}")
endif()
message(STATUS "installed server answered: ${results} results, recommended ${recommended} bytes")
