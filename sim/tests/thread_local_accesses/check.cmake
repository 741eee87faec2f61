# Compiles probe.cpp as the simulated device compiles kernels (-fsanitize=thread without the
# runtime's function entry and exit), without and with the plugin, and counts the calls of the
# race checker's 4-byte entry points in each object: the plugin removes the thread-local array's
# two and keeps device memory's two.
# cmake -DCOMPILER=<g++> -DPLUGIN=<plugin .so> -DOUTPUT_DIR=<dir> -P check.cmake
foreach(variable COMPILER PLUGIN OUTPUT_DIR)
  if(NOT ${variable})
    message(FATAL_ERROR "check.cmake: give -D${variable}=")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUTPUT_DIR})
set(flags -O2 -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -Wno-tsan -c
    ${CMAKE_CURRENT_LIST_DIR}/probe.cpp)

function(entry_calls object out)
  execute_process(COMMAND objdump -dr ${object} OUTPUT_VARIABLE listing RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "objdump -dr ${object} failed")
  endif()
  string(REGEX MATCHALL "__tsan_(read|write)4" calls "${listing}")
  list(LENGTH calls count)
  set(${out} ${count} PARENT_SCOPE)
endfunction()

foreach(build without with)
  set(extra)
  if(build STREQUAL "with")
    set(extra -fplugin=${PLUGIN})
  endif()
  execute_process(COMMAND ${COMPILER} ${flags} ${extra} -o ${OUTPUT_DIR}/probe_${build}.o
                  RESULT_VARIABLE failed ERROR_VARIABLE errors)
  if(failed)
    message(FATAL_ERROR "compiling probe.cpp ${build} the plugin failed:\n${errors}")
  endif()
  entry_calls(${OUTPUT_DIR}/probe_${build}.o calls_${build})
endforeach()
if(NOT calls_without EQUAL 4 OR NOT calls_with EQUAL 2)
  message(FATAL_ERROR "entry-point calls: ${calls_without} without the plugin (expected 4: two "
                      "accesses of device memory, two of the thread-local array), "
                      "${calls_with} with it (expected 2: device memory's only)")
endif()
message(STATUS "the plugin removed the thread-local array's entry-point calls and kept device "
               "memory's (${calls_without} -> ${calls_with})")
