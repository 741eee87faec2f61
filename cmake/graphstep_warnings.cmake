# Warnings for graphstep's own targets; errors when graphstep is the top-level project.
function(graphstep_set_warnings target)
  set(cxx_warnings -Wall -Wextra -Wpedantic -Wnon-virtual-dtor)
  if(GRAPHSTEP_WARNINGS_AS_ERRORS)
    list(APPEND cxx_warnings -Werror)
    set(cuda_werror -Werror=all-warnings)
  endif()
  string(REPLACE ";" "," host_warnings "-Wall,-Wextra")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${cxx_warnings}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${host_warnings} ${cuda_werror}>)
endfunction()
