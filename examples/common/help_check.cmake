# An example's --help: exits 0 without touching a device, prints "usage: <name>" first, and
# describes every flag of its usage line on a line of its own ("  --flag ..."); an example whose
# usage line has no flag says it takes no arguments.
# Usage: cmake -DPROGRAM=<executable> -DNAME=<name> -P help_check.cmake
execute_process(COMMAND ${PROGRAM} --help RESULT_VARIABLE rc OUTPUT_VARIABLE text
                ERROR_VARIABLE errors)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NAME} --help exited with ${rc}: ${errors}")
endif()
string(FIND "${text}" "usage: ${NAME}" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "${NAME} --help does not begin with \"usage: ${NAME}\":\n${text}")
endif()
string(REGEX MATCH "^[^\n]*" usage "${text}")
string(REGEX MATCHALL "--[a-z-]+" flags "${usage}")
if(NOT flags)
  string(FIND "${text}" "Takes no arguments" none)
  if(none EQUAL -1)
    message(FATAL_ERROR "${NAME} --help shows no flag and does not say it takes none:\n${text}")
  endif()
endif()
foreach(flag IN LISTS flags)
  if(NOT text MATCHES "\n  ${flag} ")
    message(FATAL_ERROR "${NAME} --help does not describe ${flag} on a line of its own:\n${text}")
  endif()
endforeach()
list(LENGTH flags count)
message(STATUS "${NAME} --help describes its ${count} flag(s)")
