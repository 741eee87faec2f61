# A checkpoint of another model is refused with a message naming the tensor that differs and
# both layouts, and the program fails cleanly: saved with one width, resumed with another.
#
#   cmake -DPROGRAM=<transformer_lm> -DWORK=<directory> -DARGUMENTS=<model arguments>
#         -P resume_mismatch_check.cmake   (ARGUMENTS must not set --width)
foreach(variable PROGRAM WORK ARGUMENTS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "resume_mismatch_check.cmake: -D${variable}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${PROGRAM}" --mode eager --steps 1 ${ARGUMENTS} --width 32
                        --save "${WORK}/narrow.ckpt"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "saving failed: ${output}")
endif()
execute_process(COMMAND "${PROGRAM}" --mode eager --steps 2 ${ARGUMENTS} --width 64
                        --resume "${WORK}/narrow.ckpt"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
message("${output}")
file(REMOVE_RECURSE "${WORK}")
if(result EQUAL 0)
  message(FATAL_ERROR "a checkpoint of width 32 was loaded into a model of width 64")
endif()
if(NOT output MATCHES "tensor \"model/[^\"]+\" is bfloat16 \\[[0-9]+\\] in the checkpoint, but bfloat16 \\[[0-9]+\\] is expected")
  message(FATAL_ERROR "the refusal does not name the tensor and its layout")
endif()
