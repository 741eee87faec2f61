# Configures SOURCE_DIR against the build tree BUILD_DIR (with OPTIONS, "|" for ";") in WORK_DIR
# and builds it: passes when the build fails with output matching EXPECTED (a regular expression).
string(REPLACE "|" ";" OPTIONS "${OPTIONS}")
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
                        -Dgraphstep_DIR=${BUILD_DIR} ${OPTIONS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} failed (${rc}): ${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE_DIR} built, but its build should have failed with: ${EXPECTED}")
endif()
if(NOT out MATCHES "${EXPECTED}")
  message(FATAL_ERROR "the build failed without the expected message (${EXPECTED}):\n${out}")
endif()
message(STATUS "the build failed as expected:\n${CMAKE_MATCH_0}")
