# A build configured without a preset compiles graphstep's own targets without -Werror (a user's
# newer compiler may warn where ours does not); GRAPHSTEP_WARNINGS_AS_ERRORS=ON, which the
# presets set, adds it. The same plain configure builds the MPI bootstrap exactly when CMake
# finds MPI (GRAPHSTEP_WITH_MPI defaults to AUTO: no rebuild for mpirun where MPI is installed).
# Usage: cmake -DSOURCE_DIR=<graphstep> -DWORK_DIR=<dir> -DGENERATOR=<generator>
#              -P plain_configure.cmake
file(REMOVE_RECURSE ${WORK_DIR})

function(configure_and_count_werror result)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
                          -DGRAPHSTEP_TEST_LABELS=unit -DGRAPHSTEP_BUILD_BENCHMARKS=OFF
                          -DGRAPHSTEP_BUILD_EXAMPLES=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
                          ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring graphstep in ${WORK_DIR} failed (${rc})")
  endif()
  file(READ ${WORK_DIR}/compile_commands.json commands)
  string(REGEX MATCHALL "\"command\": \"[^\"]*\"" all "${commands}")
  string(REGEX MATCHALL "\"command\": \"[^\"]* -Werror[^\"]*\"" with "${commands}")
  list(LENGTH all total)
  list(LENGTH with werror)
  if(total EQUAL 0)
    message(FATAL_ERROR "${WORK_DIR}/compile_commands.json lists no compile command")
  endif()
  set(${result} "${werror} of ${total}" PARENT_SCOPE)
  set(configure_output "${output}" PARENT_SCOPE)
  set(commands "${commands}" PARENT_SCOPE)
endfunction()

configure_and_count_werror(by_default)
if(NOT by_default MATCHES "^0 of ")
  message(FATAL_ERROR "configured without options, ${by_default} compile commands have -Werror")
endif()
# CMakeLists.txt says "graphstep: no MPI found" when AUTO finds none; where it finds MPI, the
# core's launch environment (built in every configuration, with CUDA or without) is compiled
# knowing it, and so is the MPI bootstrap of graphstep::nccl where that is built.
string(FIND "${configure_output}" "graphstep: no MPI found" mpi_missing)
string(REGEX MATCH "\"command\": \"[^\"]*\",[ \n]*\"file\": \"[^\"]*src/nccl/launch_environment.cpp\""
       launch_environment "${commands}")
if(NOT launch_environment)
  message(FATAL_ERROR "compile_commands.json has no command for src/nccl/launch_environment.cpp")
endif()
string(FIND "${launch_environment}" "-DGRAPHSTEP_WITH_MPI" mpi_compiled)
if(mpi_missing EQUAL -1 AND mpi_compiled EQUAL -1)
  message(FATAL_ERROR "configured without options where MPI is found, graphstep is built "
                      "without MPI (no -DGRAPHSTEP_WITH_MPI in ${launch_environment})")
elseif(NOT mpi_missing EQUAL -1 AND NOT mpi_compiled EQUAL -1)
  message(FATAL_ERROR "MPI was not found, yet graphstep is built with it")
endif()
if(mpi_missing EQUAL -1)
  message(STATUS "MPI found: graphstep is built with it")
else()
  message(STATUS "no MPI found: graphstep is built without it")
endif()
# The same directory again, so that the toolchain is not detected twice.
configure_and_count_werror(turned_on -DGRAPHSTEP_WARNINGS_AS_ERRORS=ON)
if(turned_on MATCHES "^0 of ")
  message(FATAL_ERROR "GRAPHSTEP_WARNINGS_AS_ERRORS=ON added -Werror to no compile command")
endif()
message(STATUS "-Werror in ${by_default} compile commands by default, ${turned_on} when asked")
