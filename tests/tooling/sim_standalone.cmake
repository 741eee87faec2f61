# The simulated device is a CMake project of its own (sim/CMakeLists.txt): configured from scratch
# on its own, with its tests, it builds the simulator and the launch rewriter, and every file it
# compiles is the simulator's (none of graphstep's library).
#   cmake -DSOURCE_DIR=<checkout> -DWORK_DIR=<folder> -DGENERATOR=<generator> -P sim_standalone.cmake
foreach(variable SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT ${variable})
    message(FATAL_ERROR "sim_standalone.cmake: give -D${variable}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/sim -B ${WORK_DIR} -G ${GENERATOR}
                        -DGRAPHSTEP_WARNINGS_AS_ERRORS=ON
                RESULT_VARIABLE configured OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "configuring sim/ on its own failed (${configured}):\n${output}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}
                        --target graphstep_cuda_sim graphstep_rewrite_launches
                RESULT_VARIABLE built OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "building sim/ on its own failed (${built}):\n${output}")
endif()
# Every source the standalone tree compiles lies under sim/ (or is generated in the tree).
file(READ ${WORK_DIR}/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(outside)
foreach(index RANGE ${last})
  string(JSON file GET "${commands}" ${index} file)
  cmake_path(IS_PREFIX SOURCE_DIR "${file}" NORMALIZE in_checkout)
  cmake_path(IS_PREFIX WORK_DIR "${file}" NORMALIZE in_tree)
  cmake_path(APPEND SOURCE_DIR sim OUTPUT_VARIABLE sim_dir)
  cmake_path(IS_PREFIX sim_dir "${file}" NORMALIZE in_sim)
  if(in_checkout AND NOT in_sim AND NOT in_tree AND NOT file MATCHES "/third_party/")
    list(APPEND outside "${file}")
  endif()
endforeach()
if(outside)
  list(JOIN outside "\n  " outside)
  message(FATAL_ERROR "sim/ on its own compiles files outside sim/:\n  ${outside}")
endif()
message(STATUS "sim/ configured and built on its own: ${count} compile commands, all in sim/")
