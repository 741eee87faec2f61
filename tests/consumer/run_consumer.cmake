# Runs one consumer check; MODE is "install" or "build".
#
# install: graphstep is installed into a staging prefix; no package file (lib/cmake/graphstep/*,
# and the pkg-config files PC_FILES, which must all be there) may name the build or source
# directory, the staging prefix, or any of FORBIDDEN_PATHS (the CUDA toolkit's and NCCL's
# directories on this machine), nor hand its users -Werror; the prefix is then moved elsewhere
# and the consumer is built and run against the moved copy alone.
# MAKE_PROGRAM (install mode only): the consumer is a plain Makefile project, built with that
# make through PKG_CONFIG (pkg-config) from the moved copy's .pc files alone, with CXX and the
# CUDA toolkit's include folders CUDA_INCLUDE_DIRS; before that, pkg-config must refuse a module
# that is not installed (a misspelt one, and graphstep-nccl unless WITH_NCCL), and the Makefile
# must stop with its own message where pkg-config finds no graphstep.
# CUDA_RUNTIME (Static or Shared, for a CUDA-language consumer): the consumer is configured with
# that runtime (Static as CMake's default, without setting CMAKE_CUDA_RUNTIME_LIBRARY) and must
# link exactly that one.
# Lists arrive with "|" for ";" (add_test would split them into arguments).
string(REPLACE "|" ";" FORBIDDEN_PATHS "${FORBIDDEN_PATHS}")
string(REPLACE "|" ";" CUDA_ARCHITECTURES "${CUDA_ARCHITECTURES}")
string(REPLACE "|" ";" PC_FILES "${PC_FILES}")
string(REPLACE "|" ";" CUDA_INCLUDE_DIRS "${CUDA_INCLUDE_DIRS}")
file(REMOVE_RECURSE ${WORK_DIR})

if(MODE STREQUAL "install")
  set(staging ${WORK_DIR}/staging)
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${staging}
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installing graphstep failed (${rc})")
  endif()

  set(forbidden ${BUILD_DIR} ${GRAPHSTEP_SOURCE_DIR} ${staging})
  foreach(path IN LISTS FORBIDDEN_PATHS)
    # A toolkit in /usr would make every system path suspect; those are not checked.
    if(path MATCHES "^/(usr(/local)?/?)?$" OR path STREQUAL "")
      continue()
    endif()
    file(REAL_PATH ${path} real)
    list(APPEND forbidden ${path} ${real})
  endforeach()
  list(REMOVE_DUPLICATES forbidden)
  file(GLOB_RECURSE installed LIST_DIRECTORIES false ${staging}/*)
  list(FILTER installed INCLUDE REGEX "/cmake/graphstep/[^/]+$|/pkgconfig/graphstep[^/]*\\.pc$")
  if(NOT installed MATCHES "/graphstepConfig\\.cmake(;|$)")
    message(FATAL_ERROR "no graphstepConfig.cmake under ${staging}: ${installed}")
  endif()
  set(pc_installed ${installed})
  list(FILTER pc_installed INCLUDE REGEX "\\.pc$")
  list(TRANSFORM pc_installed REPLACE ".*/" "")
  list(SORT pc_installed)
  list(SORT PC_FILES)
  if(NOT pc_installed STREQUAL PC_FILES)
    message(FATAL_ERROR "the installed pkg-config files are \"${pc_installed}\", this build "
                        "should install \"${PC_FILES}\"")
  endif()
  foreach(file IN LISTS installed)
    file(READ ${file} content)
    foreach(path IN LISTS forbidden)
      string(FIND "${content}" "${path}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "${file} names ${path}, a path of the machine graphstep was built "
                            "on: the installed package would not be relocatable")
      endif()
    endforeach()
    # Warnings are errors in graphstep's own builds only: a user's compiler may warn where ours
    # does not.
    if(content MATCHES "-Werror")
      message(FATAL_ERROR "${file} hands its users -Werror")
    endif()
  endforeach()
  list(LENGTH installed count)
  list(JOIN PC_FILES ", " pc_list)
  message(STATUS "${count} installed package files (${pc_list} among them) name no path of this "
                 "machine")

  # Move the installation; the consumer sees only the moved copy.
  set(prefix ${WORK_DIR}/moved/elsewhere)
  file(MAKE_DIRECTORY ${WORK_DIR}/moved)
  file(RENAME ${staging} ${prefix})
  if(EXISTS ${staging})
    message(FATAL_ERROR "${staging} still exists after the move")
  endif()
  set(locate -DCMAKE_PREFIX_PATH=${prefix})
else()
  set(locate -Dgraphstep_DIR=${BUILD_DIR})
endif()

if(MAKE_PROGRAM)
  if(NOT MODE STREQUAL "install")
    message(FATAL_ERROR "a Makefile consumer builds from the install tree only")
  endif()
  # pkg-config sees the moved copy's files alone, whatever the machine has.
  set(pkg_config ${CMAKE_COMMAND} -E env --unset=PKG_CONFIG_PATH
                  PKG_CONFIG_LIBDIR=${prefix}/${LIBDIR}/pkgconfig ${PKG_CONFIG})
  set(absent graphstep-ncl)
  if(NOT WITH_NCCL)
    list(APPEND absent graphstep-nccl)
  endif()
  foreach(module IN LISTS absent)
    execute_process(COMMAND ${pkg_config} --cflags --libs ${module}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(rc EQUAL 0 OR NOT out MATCHES "Package '?${module}'? was not found")
      message(FATAL_ERROR "pkg-config --cflags --libs ${module}, which is not installed, exited "
                          "with ${rc} and said: ${out}")
    endif()
    message(STATUS "pkg-config refuses ${module}, which is not installed")
  endforeach()

  file(COPY ${SOURCE_DIR}/ DESTINATION ${WORK_DIR}/project)
  set(cuda_cppflags)
  foreach(dir IN LISTS CUDA_INCLUDE_DIRS)
    string(APPEND cuda_cppflags " -isystem ${dir}")
  endforeach()
  set(make ${MAKE_PROGRAM} -C ${WORK_DIR}/project PKG_CONFIG=${PKG_CONFIG} CXX=${CXX}
           "CUDA_CPPFLAGS=${cuda_cppflags}")
  # Without the .pc files on its path the Makefile stops, and says what to do.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PKG_CONFIG_PATH
                          PKG_CONFIG_LIBDIR=${WORK_DIR}/project ${make}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "finds no graphstep 0\\.1 built for the simulated device")
    message(FATAL_ERROR "make without graphstep on pkg-config's path exited with ${rc}: ${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PKG_CONFIG_PATH
                          PKG_CONFIG_LIBDIR=${prefix}/${LIBDIR}/pkgconfig ${make} -j 2
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the Makefile consumer against the install tree failed (${rc})")
  endif()
  execute_process(COMMAND ${WORK_DIR}/project/row_sums RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  message(STATUS "consumer printed: ${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the Makefile consumer failed to run (${rc}): ${out}")
  endif()
  return()
endif()

set(options)
if(CUDA_RUNTIME)
  list(GET CUDA_ARCHITECTURES 0 architecture)
  list(APPEND options -DCMAKE_CUDA_ARCHITECTURES=${architecture})
  if(NOT CUDA_RUNTIME STREQUAL "Static")
    list(APPEND options -DCMAKE_CUDA_RUNTIME_LIBRARY=${CUDA_RUNTIME})
  endif()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
                        ${locate} ${options} -DWANTED_VERSION=${WANTED_VERSION} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer against the ${MODE} tree failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer against the ${MODE} tree failed (${rc})")
endif()

# Exactly one CUDA runtime: statically linked, the executable defines the runtime's entry points
# and loads no libcudart.so; dynamically linked, it defines none and loads libcudart.so.
if(CUDA_RUNTIME)
  set(executable ${WORK_DIR}/build/consumer)
  execute_process(COMMAND ldd ${executable} OUTPUT_VARIABLE loaded RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ldd ${executable} failed (${rc})")
  endif()
  execute_process(COMMAND nm ${executable} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm ${executable} failed (${rc})")
  endif()
  string(REGEX MATCH "[\n ][Tt] cudaGetDeviceCount\n" defines_runtime "${symbols}")
  string(REGEX MATCH "libcudart\\.so" loads_runtime "${loaded}")
  if(GENERATOR STREQUAL "Ninja")
    # The link line itself: a runtime named twice would show here even if one went unused.
    load_cache(${WORK_DIR}/build READ_WITH_PREFIX consumer_ CMAKE_MAKE_PROGRAM)
    execute_process(COMMAND ${consumer_CMAKE_MAKE_PROGRAM} -C ${WORK_DIR}/build -t commands consumer
                    OUTPUT_VARIABLE commands RESULT_VARIABLE rc)
    string(REGEX MATCH "[^\n]* -o consumer [^\n]*" link_line "${commands}")
    if(NOT rc EQUAL 0 OR NOT link_line)
      message(FATAL_ERROR "no link line for the consumer in: ${commands}")
    endif()
    string(REGEX MATCH "cudart_static" links_static "${link_line}")
    string(REGEX MATCH "libcudart\\.so|-lcudart( |$)" links_shared "${link_line}")
    message(STATUS "consumer link line: ${link_line}")
  else()
    set(links_static ${defines_runtime})
    set(links_shared ${loads_runtime})
  endif()
  if(CUDA_RUNTIME STREQUAL "Static")
    if(NOT defines_runtime OR loads_runtime OR links_shared OR NOT links_static)
      message(FATAL_ERROR "the consumer chose the static CUDA runtime, but it defines "
        "cudaGetDeviceCount: '${defines_runtime}', loads libcudart.so: '${loads_runtime}', "
        "links cudart_static: '${links_static}', links libcudart.so: '${links_shared}'")
    endif()
  else()
    if(defines_runtime OR NOT loads_runtime OR links_static OR NOT links_shared)
      message(FATAL_ERROR "the consumer chose the shared CUDA runtime, but it defines "
        "cudaGetDeviceCount: '${defines_runtime}', loads libcudart.so: '${loads_runtime}', "
        "links cudart_static: '${links_static}', links libcudart.so: '${links_shared}'")
    endif()
  endif()
  message(STATUS "the consumer links one CUDA runtime, the ${CUDA_RUNTIME} one")
endif()

execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed to run (${rc}): ${out}")
endif()
