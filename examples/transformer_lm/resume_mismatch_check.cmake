# A checkpoint is refused, and the program fails cleanly, when the run that resumes from it is
# not the run that saved it (another model, configuration or number of ranks): the refusal must
# match EXPECT, which names what differs.
#
#   cmake -DPROGRAM=<transformer_lm> -DWORK=<directory> -DARGUMENTS=<model arguments>
#         -DSAVE=<arguments of the saving run> -DRESUME=<arguments of the resuming run>
#         -DEXPECT=<regular expression> [-DLAUNCH=<launch_local.sh> -DRANKS=<n>]
#         -P resume_mismatch_check.cmake
# (;-separated lists; SAVE and RESUME come after ARGUMENTS, so they override it.) With LAUNCH,
# the resuming run is RANKS ranks; the saving run is always one process.
foreach(variable PROGRAM WORK ARGUMENTS EXPECT)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "resume_mismatch_check.cmake: -D${variable}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${PROGRAM}" --mode eager --steps 1 ${ARGUMENTS} ${SAVE}
                        --save "${WORK}/saved.ckpt"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "saving failed: ${output}")
endif()
set(launcher)
if(DEFINED LAUNCH)
  set(launcher bash "${LAUNCH}" ${RANKS})
endif()
execute_process(COMMAND ${launcher} "${PROGRAM}" --mode eager --steps 2 ${ARGUMENTS} ${RESUME}
                        --resume "${WORK}/saved.ckpt"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
message("${output}")
file(REMOVE_RECURSE "${WORK}")
if(result EQUAL 0)
  message(FATAL_ERROR "a checkpoint saved with [${SAVE}] was resumed with [${RESUME}]")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the refusal does not say what differs (expected to match: ${EXPECT})")
endif()
