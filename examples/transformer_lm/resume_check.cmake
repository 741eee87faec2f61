# Resume is exact: N steps straight end in the same state as k steps, a checkpoint, a new
# process that loads it and the N - k steps after, bit for bit: the two final checkpoints (the
# weights, the optimizer's master weights, moments and step count) are the same file.
#
#   cmake -DPROGRAM=<transformer_lm> -DMODE=eager|graphed -DWORK=<directory>
#         -DARGUMENTS=<model arguments, ;-separated> [-DFORMAT=ckpt|safetensors]
#         -P resume_check.cmake
foreach(variable PROGRAM MODE WORK ARGUMENTS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "resume_check.cmake: -D${variable}=... is missing")
  endif()
endforeach()
if(NOT DEFINED FORMAT)
  set(FORMAT ckpt)  # graphstep's own; safetensors: the file's extension chooses it
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(train steps)
  execute_process(COMMAND "${PROGRAM}" --mode ${MODE} --steps ${steps} ${ARGUMENTS} ${ARGN}
                  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message("${output}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "transformer_lm --steps ${steps} ${ARGN} failed: ${result}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

train(4 --save "${WORK}/straight.${FORMAT}")
train(2 --save "${WORK}/half.${FORMAT}")
train(4 --resume "${WORK}/half.${FORMAT}" --save "${WORK}/resumed.${FORMAT}")
# The resumed run took steps 3 and 4 alone: a restore that lost the step count would train 4
# steps from the initial weights and end where the straight run does.
if(NOT output MATCHES "resumed from [^\n]* after step 2\n" OR output MATCHES "step +[12]/4")
  message(FATAL_ERROR "the resumed run did not go on from step 2 alone")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/straight.${FORMAT}"
                        "${WORK}/resumed.${FORMAT}" RESULT_VARIABLE different)
if(different)
  message(FATAL_ERROR "the resumed run ended in another state than the straight one")
endif()
message("resumed at step 2 of 4 (.${FORMAT}): the same state as the straight run, bit for bit")
file(REMOVE_RECURSE "${WORK}")
