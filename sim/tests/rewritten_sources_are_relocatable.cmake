# Every file graphstep_cuda_sim_sources wrote in the build tree (the rewritten .cu files and the
# mirrored headers, under */graphstep_cuda_sim/ outside CMakeFiles/) is free of SOURCE_DIR, the
# checkout's absolute path. Usage: cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<checkout> -P <this file>
file(GLOB_RECURSE written LIST_DIRECTORIES false ${BUILD_DIR}/*)
list(FILTER written INCLUDE REGEX "/graphstep_cuda_sim/")
# Not the compiler's objects (under CMakeFiles/: a debug build records its folder in them) nor the
# depfiles (read by the build tool): only what the rewriter wrote for the compiler to read.
list(FILTER written EXCLUDE REGEX "/CMakeFiles/|\\.d$")
# The path as a regular expression: any character of it taken literally.
string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" source_pattern "${SOURCE_DIR}/")
list(LENGTH written count)
if(count EQUAL 0)
  message(FATAL_ERROR "no rewritten file under ${BUILD_DIR}/*/graphstep_cuda_sim/")
endif()
set(naming)
foreach(file IN LISTS written)
  file(STRINGS ${file} lines REGEX "${source_pattern}" LIMIT_COUNT 1)
  if(lines)
    list(APPEND naming "${file}: ${lines}")
  endif()
endforeach()
if(naming)
  list(LENGTH naming bad)
  list(GET naming 0 first)
  message(FATAL_ERROR "${bad} of ${count} rewritten files name ${SOURCE_DIR}, e.g. ${first}")
endif()
message(STATUS "${count} rewritten files name no path of the checkout")
