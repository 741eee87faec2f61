# cmake -DREWRITER=... -DCOMPILER=... -DINCLUDES=a|b -DSOURCE=x.cu -DOUTPUT_DIR=... -DEXPECTED=regex
#   -P expect_compile_error.cmake
# Rewrites SOURCE for the simulated device and compiles it; passes when the compiler refuses it
# with a message matching EXPECTED.
get_filename_component(name ${SOURCE} NAME_WE)
set(rewritten ${OUTPUT_DIR}/${name}.cpp)
file(MAKE_DIRECTORY ${OUTPUT_DIR})
execute_process(COMMAND ${REWRITER} ${SOURCE} ${rewritten} RESULT_VARIABLE rewrite_result)
if(NOT rewrite_result EQUAL 0)
  message(FATAL_ERROR "the rewriter failed on ${SOURCE}")
endif()
string(REPLACE "|" ";" include_list "${INCLUDES}")
set(include_flags)
foreach(dir IN LISTS include_list)
  list(APPEND include_flags -I${dir})
endforeach()
execute_process(
  COMMAND ${COMPILER} -std=c++17 -DGRAPHSTEP_CUDA_SIM=1 ${include_flags} -fsyntax-only
          ${rewritten}
  RESULT_VARIABLE compile_result ERROR_VARIABLE messages OUTPUT_VARIABLE messages_out)
if(compile_result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it should not have")
endif()
if(NOT "${messages}${messages_out}" MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${SOURCE} failed without the expected message (${EXPECTED}):\n${messages}")
endif()
message(STATUS "refused as expected: ${EXPECTED}")
