# Data parallel: rank 0 alone writes the checkpoint, and every rank of a new job loads it and
# trains on from the step it was saved at, the ranks' weights staying identical.
#
#   cmake -DLAUNCH=<launch_local.sh> -DPROGRAM=<transformer_lm> -DWORK=<directory>
#         -DARGUMENTS=<model arguments, ;-separated> -P resume_data_parallel_check.cmake
foreach(variable LAUNCH PROGRAM WORK ARGUMENTS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "resume_data_parallel_check.cmake: -D${variable}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(train_ranks steps)
  execute_process(COMMAND bash "${LAUNCH}" 2 "${PROGRAM}" --mode graphed --steps ${steps}
                          ${ARGUMENTS} ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message("${output}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "2 ranks of transformer_lm --steps ${steps} ${ARGN} failed: ${result}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

train_ranks(2 --save "${WORK}/job.ckpt")
string(REGEX MATCHALL "saved the state after step 2" saves "${output}")
list(LENGTH saves written)
if(NOT written EQUAL 1)
  message(FATAL_ERROR "${written} ranks wrote the checkpoint; rank 0 alone should")
endif()
train_ranks(4 --resume "${WORK}/job.ckpt")
string(REGEX MATCHALL "resumed from [^\n]* after step 2" loads "${output}")
list(LENGTH loads loaded)
if(NOT loaded EQUAL 2 OR NOT output MATCHES "the weights of every rank are rank 0's")
  message(FATAL_ERROR "${loaded} of 2 ranks resumed from the checkpoint, or their weights differ")
endif()
message("rank 0 wrote one checkpoint; both ranks of a new job resumed from it at step 2")
file(REMOVE_RECURSE "${WORK}")
