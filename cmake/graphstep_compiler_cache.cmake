# Compiles through ccache where it is installed (scripts/install-ccache.sh installs it), for every
# preset: a build directory, another preset's build of the same sources, and a fresh clone of the
# project on the same machine reuse what was compiled before. The cache is ccache's own directory
# (CCACHE_DIR, by default ~/.cache/ccache), outside the checkout and shared with every build.
#
# - CCACHE_BASEDIR: paths under the source tree are hashed relative to the build directory, so
#   build/ and build-sim/, or two clones at different paths, share entries.
# - CCACHE_NOHASHDIR: debug builds (-g) do not hash the working directory either; a debugger
#   then finds sources through the relative paths the object records.
# A launcher the user chose (CMAKE_<LANG>_COMPILER_LAUNCHER) is kept.
option(GRAPHSTEP_COMPILER_CACHE "Compile through ccache when it is installed" ${PROJECT_IS_TOP_LEVEL})
if(GRAPHSTEP_COMPILER_CACHE)
  find_program(GRAPHSTEP_CCACHE_PROGRAM ccache)
  if(GRAPHSTEP_CCACHE_PROGRAM)
    set(graphstep_compiler_launcher env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=true
                                    ${GRAPHSTEP_CCACHE_PROGRAM})
    foreach(lang CXX CUDA)
      if(NOT CMAKE_${lang}_COMPILER_LAUNCHER)
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${graphstep_compiler_launcher})
      endif()
    endforeach()
    message(STATUS "graphstep: compiling through ${GRAPHSTEP_CCACHE_PROGRAM}")
  else()
    message(STATUS "graphstep: ccache not found (scripts/install-ccache.sh installs it): "
                   "compiling without a compiler cache")
  endif()
endif()
