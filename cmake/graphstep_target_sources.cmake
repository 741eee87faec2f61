# Writes every target this project builds and each source of the tree it compiles, one
# "target<TAB>folder of the CMakeLists.txt that defines it<TAB>source" a line (paths relative to
# the source tree; generated sources left out), to graphstep_target_sources.txt in the build
# tree, once every folder is configured. tests/tooling/layering.py reads it: a target compiles
# only the files of its folder's component and of the components that one uses
# (docs/components.json).

function(graphstep_targets_of directory out)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    graphstep_targets_of(${subdirectory} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(graphstep_write_target_sources)
  graphstep_targets_of(${PROJECT_SOURCE_DIR} targets)
  set(lines "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(folder ${target} SOURCE_DIR)
    if(NOT sources)
      continue()
    endif()
    file(RELATIVE_PATH folder_in_tree ${PROJECT_SOURCE_DIR} ${folder})
    foreach(source IN LISTS sources)
      if(source MATCHES "^\\$<")  # a generator expression: known only at build time
        continue()
      endif()
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${folder} NORMALIZE OUTPUT_VARIABLE path)
      cmake_path(IS_PREFIX PROJECT_SOURCE_DIR ${path} NORMALIZE in_tree)
      cmake_path(IS_PREFIX PROJECT_BINARY_DIR ${path} NORMALIZE in_build_tree)
      if(NOT in_tree OR in_build_tree)
        continue()
      endif()
      file(RELATIVE_PATH source_in_tree ${PROJECT_SOURCE_DIR} ${path})
      string(APPEND lines "${target}\t${folder_in_tree}\t${source_in_tree}\n")
    endforeach()
  endforeach()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/graphstep_target_sources.txt CONTENT "${lines}")
endfunction()

cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL graphstep_write_target_sources)
