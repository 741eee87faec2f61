# pkg-config files for builds outside CMake (a Makefile; docs/install.md): one per part of the
# package, installed to <libdir>/pkgconfig.
#   graphstep-core      graphstep::core, plain C++
#   graphstep           graphstep::graphstep, the CUDA library (builds with CUDA)
#   graphstep-nccl      graphstep::nccl (builds with NCCL)
#   graphstep-cuda-sim  graphstep::cuda_sim and the launch rewriter (GRAPHSTEP_CUDA_SIM=ON)
# Like the CMake package they name no path of this machine: the prefix is found from the file's
# own folder (${pcfiledir}, which pkg-config and pkgconf both define), so that an installation
# can be moved; the CUDA toolkit's, NCCL's and MPI's folders are the consumer's
# (tests/consumer/run_consumer.cmake checks both).

# The prefix as seen from <libdir>/pkgconfig; absolute folders are kept as they are (such an
# installation cannot be moved).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(graphstep_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  set(graphstep_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH graphstep_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" graphstep_pc_up "${graphstep_pc_up}")
  set(graphstep_pc_prefix "\${pcfiledir}/${graphstep_pc_up}")
  set(graphstep_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
foreach(dir INCLUDEDIR BINDIR)
  string(TOLOWER ${dir} name)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(graphstep_pc_${name} "${CMAKE_INSTALL_${dir}}")
  else()
    set(graphstep_pc_${name} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()

# graphstep_pkg_config(<name> DESCRIPTION <text> [TARGET <target>] [LIBS <-l...>]
#                      [CFLAGS <flags>] [REQUIRES <modules>] [VARIABLES <name=value>...])
# Writes <name>.pc (cmake/graphstep.pc.in) and installs it. The target's own -l and LIBS go to Libs
# where the target is a static library (its users link them), to Libs.private where it is shared
# (it carries them itself).
function(graphstep_pkg_config name)
  cmake_parse_arguments(arg "" "TARGET;DESCRIPTION" "LIBS;CFLAGS;REQUIRES;VARIABLES" ${ARGN})
  set(pc_libs "")
  set(pc_libs_private "")
  if(arg_TARGET)
    get_target_property(type ${arg_TARGET} TYPE)
    get_target_property(output ${arg_TARGET} OUTPUT_NAME)
    if(NOT output)
      set(output ${arg_TARGET})
    endif()
    set(pc_libs "-L\${libdir} -l${output}")
    if(type STREQUAL "SHARED_LIBRARY")
      list(JOIN arg_LIBS " " pc_libs_private)
    else()
      list(JOIN arg_LIBS " " libs)
      string(STRIP "${pc_libs} ${libs}" pc_libs)
    endif()
  endif()
  list(JOIN arg_CFLAGS " " pc_cflags)
  string(STRIP "-I\${includedir} ${pc_cflags}" pc_cflags)
  # The parts of one installation go together: each requires the others at its own version.
  list(TRANSFORM arg_REQUIRES APPEND " = ${PROJECT_VERSION}")
  list(JOIN arg_REQUIRES ", " pc_requires)
  set(pc_variables "")
  foreach(variable IN LISTS arg_VARIABLES)
    string(APPEND pc_variables "${variable}\n")
  endforeach()
  set(pc_name ${name})
  set(pc_description "${arg_DESCRIPTION}")
  # Not in a folder a user would take for a usable one: ${pcfiledir} means the installation's.
  set(file ${PROJECT_BINARY_DIR}/CMakeFiles/graphstep_pkg_config/${name}.pc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/graphstep.pc.in ${file} @ONLY)
  install(FILES ${file}
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
