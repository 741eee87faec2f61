# graphstep_cuda_sim_sources(<target>... [HEADER_ROOTS <folder>...])
#
# Builds a target's CUDA sources (*.cu) for the simulated CUDA device: each is rewritten by
# graphstep::rewrite_launches (every `kernel<<<grid, block, shared, stream>>>(args)` becomes a
# call into the simulator, and graphstep/sim/device.hpp is included first) and compiled as C++.
# Link the target to graphstep::cuda_sim instead of CUDA::cudart. The rewriting is set up at the
# end of the CMakeLists.txt that calls this (cmake_language(DEFER)), when the target's include
# directories and links are known: call it before or after target_include_directories().
#
# The headers of the project (PROJECT_SOURCE_DIR, outside the build tree and _deps) that the
# .cu files can include are mirrored into the build tree (graphstep_cuda_sim/<target>/include/
# ...): those (.cuh, .h, .hpp, .hh, .inl) under the folders of the target's .cu files, under
# the target's include directories and those of its .cu files, and under the include
# directories its linked targets of the project give it (not IMPORTED, not SYSTEM, not the
# simulator's own). So are those under the folders named with HEADER_ROOTS (relative to the
# calling CMakeLists.txt), under the folder of a .cu file outside the project that no such
# folder holds (a trainer in a sibling checkout), and under the include directories inside
# either (graphstep_cuda_sim/<target>/outside/<folder>/...). A .cu file that includes a header
# with kernels or launches outside all of these is refused at its rewriting, which names the
# header and says to add its folder with HEADER_ROOTS. A header holding kernels, launches or extern __shared__ arrays becomes its
# rewritten copy (with #line, so that messages name the original), any other a one-line
# #include of the original. The mirrors come first on the include path of the rewritten .cu
# files, so that a quoted or angled #include finds the rewritten header, and its own quoted
# #includes find their neighbours. Headers elsewhere (the CUDA toolkit, the system, other
# projects) are used as they are. A header added after CMake ran is mirrored at the next
# configure (the glob is CONFIGURE_DEPENDS).

# Kernels' memory accesses are seen byte by byte by the simulator's stream-race checker: the
# rewritten sources are compiled with the compiler's ThreadSanitizer instrumentation, whose entry
# points the simulator defines (sim/src/detail/kernel_accesses.hpp); ThreadSanitizer's runtime is
# never linked. Off where another sanitizer instruments the build (AddressSanitizer and
# ThreadSanitizer cannot share a source): the checker then sees each kernel's pointer arguments.
option(GRAPHSTEP_SIM_WATCH_ACCESSES
       "The simulator's race checker sees every byte simulated kernels read and write" ON)
set(_graphstep_cuda_sim_watch_flags)
if(GRAPHSTEP_SIM_WATCH_ACCESSES)
  if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*(address|thread|memory)")
    message(STATUS "graphstep: simulated kernels' accesses are not instrumented under "
                   "${CMAKE_CXX_FLAGS}; the race checker sees their pointer arguments")
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(_graphstep_cuda_sim_watch_flags
        -fsanitize=thread --param=tsan-instrument-func-entry-exit=0
        --param=tsan-distinguish-volatile=1 -Wno-tsan)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(_graphstep_cuda_sim_watch_flags
        -fsanitize=thread -mllvm -tsan-instrument-func-entry-exit=0
        -mllvm -tsan-distinguish-volatile=1)
  else()
    message(STATUS "graphstep: simulated kernels' accesses are not instrumented with "
                   "${CMAKE_CXX_COMPILER_ID}; the race checker sees their pointer arguments")
  endif()
endif()

# The mirror of `dir`, a folder inside one of `top_roots` (the caller's list of the folders whose
# headers are mirrored, none inside another, and `top_mirrors`, their mirrors): the same folder
# of its root's mirror, so that the quoted #includes between mirrored headers still resolve.
function(_graphstep_cuda_sim_mirror dir out)
  set(mirror)
  foreach(root mirror_of_root IN ZIP_LISTS top_roots top_mirrors)
    cmake_path(IS_PREFIX root ${dir} NORMALIZE inside)
    if(inside)
      file(RELATIVE_PATH relative ${root} ${dir})
      cmake_path(APPEND mirror_of_root ${relative} OUTPUT_VARIABLE mirror)
      break()
    endif()
  endforeach()
  set(${out} ${mirror} PARENT_SCOPE)
endfunction()

# Whether `dir` lies in the build tree or a fetched dependency, whose headers are never mirrored.
function(_graphstep_cuda_sim_built_dir dir out)
  cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${dir} NORMALIZE in_build)
  cmake_path(IS_PREFIX PROJECT_BINARY_DIR ${dir} NORMALIZE in_project_build)
  if(in_build OR in_project_build OR dir MATCHES "/_deps/|/CMakeFiles/")
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# Whether `dir` holds headers of the project to mirror: inside PROJECT_SOURCE_DIR, outside the
# build tree and fetched dependencies.
function(_graphstep_cuda_sim_own_dir dir out)
  set(own OFF)
  if(IS_ABSOLUTE "${dir}" AND NOT dir MATCHES "/_deps/|/CMakeFiles/")
    cmake_path(IS_PREFIX PROJECT_SOURCE_DIR ${dir} NORMALIZE in_project)
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${dir} NORMALIZE in_build)
    cmake_path(IS_PREFIX PROJECT_BINARY_DIR ${dir} NORMALIZE in_project_build)
    if(in_project AND NOT in_build AND NOT in_project_build)
      set(own ON)
    endif()
  endif()
  set(${out} ${own} PARENT_SCOPE)
endfunction()

# The folders of an include-directory list as the build tree sees them: $<BUILD_INTERFACE:...>
# unwrapped, $<INSTALL_INTERFACE:...> and other generator expressions left out.
function(_graphstep_cuda_sim_plain_dirs entries out)
  set(dirs)
  foreach(entry IN LISTS entries)
    if(entry MATCHES "^\\$<BUILD_INTERFACE:(.*)>$")
      set(entry "${CMAKE_MATCH_1}")
    endif()
    if(NOT entry MATCHES "\\$<" AND IS_ABSOLUTE "${entry}")
      cmake_path(SET entry NORMALIZE "${entry}")
      string(REGEX REPLACE "(.)/$" "\\1" entry "${entry}")
      list(APPEND dirs "${entry}")
    endif()
  endforeach()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

# The include directories `target` gets from the targets it links, transitively: those of the
# project's own targets (the toolkit's, the system's, IMPORTED and SYSTEM targets' are used as
# they are; the simulator's headers define __global__ itself).
function(_graphstep_cuda_sim_linked_dirs target out)
  set(dirs)
  set(seen)
  get_target_property(pending ${target} LINK_LIBRARIES)
  if(NOT pending)
    set(pending)
  endif()
  while(pending)
    list(POP_FRONT pending item)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(NOT TARGET "${item}")
      continue()
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    if(item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${item})
    get_target_property(imported ${item} IMPORTED)
    get_target_property(system ${item} SYSTEM)
    if(imported OR system OR item STREQUAL "graphstep_cuda_sim")
      continue()
    endif()
    get_target_property(entries ${item} INTERFACE_INCLUDE_DIRECTORIES)
    get_target_property(system_entries ${item} INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    if(entries)
      if(system_entries)
        list(REMOVE_ITEM entries ${system_entries})
      endif()
      _graphstep_cuda_sim_plain_dirs("${entries}" item_dirs)
      list(APPEND dirs ${item_dirs})
    endif()
    get_target_property(links ${item} INTERFACE_LINK_LIBRARIES)
    if(links)
      list(APPEND pending ${links})
    endif()
  endwhile()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

# `depfile_option` and `depfile` for the rewriting of `output`, empty where depfiles are not read.
macro(_graphstep_cuda_sim_depfile output supported)
  set(depfile_option)
  set(depfile)
  if(${supported})
    set(depfile_option --depfile ${output}.d)
    set(depfile DEPFILE ${output}.d)
  endif()
endmacro()

function(graphstep_cuda_sim_sources)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "HEADER_ROOTS")
  if(NOT arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "graphstep_cuda_sim_sources: name the targets whose .cu files run on the "
                        "simulated device: graphstep_cuda_sim_sources(<target>... "
                        "[HEADER_ROOTS <folder>...])")
  endif()
  set(header_roots)
  foreach(root IN LISTS arg_HEADER_ROOTS)
    cmake_path(ABSOLUTE_PATH root BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    string(REGEX REPLACE "(.)/$" "\\1" root "${root}")
    if(NOT IS_DIRECTORY "${root}")
      message(FATAL_ERROR "graphstep_cuda_sim_sources: HEADER_ROOTS names ${root}, which is not a "
                          "folder: name the folders that hold the headers of the .cu files")
    endif()
    list(APPEND header_roots ${root})
  endforeach()
  foreach(target IN LISTS arg_UNPARSED_ARGUMENTS)
    if(NOT TARGET ${target})
      message(FATAL_ERROR "graphstep_cuda_sim_sources: there is no target ${target}")
    endif()
    set_property(TARGET ${target} APPEND PROPERTY _graphstep_cuda_sim_header_roots
                                                  ${header_roots})
    get_target_property(deferred ${target} _graphstep_cuda_sim_deferred)
    if(deferred)
      continue()
    endif()
    set_property(TARGET ${target} PROPERTY _graphstep_cuda_sim_deferred ON)
    # The flags as the caller's scope has them (the deferred call may run where it does not).
    set_property(TARGET ${target} PROPERTY _graphstep_cuda_sim_watch_flags
                                           ${_graphstep_cuda_sim_watch_flags})
    # Deferred arguments are expanded when the call runs: EVAL expands the name now.
    cmake_language(EVAL CODE
                   "cmake_language(DEFER CALL _graphstep_cuda_sim_rewrite [[${target}]])")
  endforeach()
endfunction()

# Rewrites the .cu files `target` has now (the end of the directory that called
# graphstep_cuda_sim_sources), and mirrors the headers they can include.
function(_graphstep_cuda_sim_rewrite target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(watch_flags ${target} _graphstep_cuda_sim_watch_flags)
  if(NOT watch_flags)
    set(watch_flags)
  endif()
  set(kept)
  set(inputs)
  foreach(source IN LISTS sources)
    if(source MATCHES "\\.cu$")
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir} NORMALIZE
                 OUTPUT_VARIABLE input)
      list(APPEND inputs ${input})
    else()
      list(APPEND kept ${source})
    endif()
  endforeach()
  if(NOT inputs)
    return()
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept})
  if(watch_flags AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's instrumentation leaves memcpy, memmove and memset to the C library: the simulator's
    # wrappers see them (kernel_accesses.cpp), in every link the target's objects go into.
    target_link_options(${target} PUBLIC
                        "LINKER:--wrap=memcpy,--wrap=memmove,--wrap=memset")
  endif()

  # The include directories of the target, of its .cu files and from its links, in the order
  # the compiler searches them; the project's own are mirrored.
  get_target_property(entries ${target} INCLUDE_DIRECTORIES)
  if(NOT entries)
    set(entries)
  endif()
  foreach(input IN LISTS inputs)
    get_source_file_property(input_entries ${input} INCLUDE_DIRECTORIES)
    if(input_entries)
      list(PREPEND entries ${input_entries})
    endif()
  endforeach()
  _graphstep_cuda_sim_plain_dirs("${entries}" include_dirs)
  _graphstep_cuda_sim_linked_dirs(${target} linked_dirs)
  list(APPEND include_dirs ${linked_dirs})
  list(REMOVE_DUPLICATES include_dirs)

  # The folders whose headers are mirrored: the project's include directories and folders of .cu
  # files (inside PROJECT_SOURCE_DIR); the folders the caller named (HEADER_ROOTS); and the
  # folder of each .cu file outside the project (a sibling checkout's) that no named folder
  # holds, with all below it. An include directory inside one of those is mirrored too.
  get_target_property(named_roots ${target} _graphstep_cuda_sim_header_roots)
  if(NOT named_roots)
    set(named_roots)
  endif()
  set(outside_roots)
  foreach(root IN LISTS named_roots)
    _graphstep_cuda_sim_own_dir(${root} own)
    if(NOT own)
      list(APPEND outside_roots ${root})
    endif()
  endforeach()
  set(header_roots ${named_roots})
  foreach(input IN LISTS inputs)
    cmake_path(GET input PARENT_PATH input_dir)
    _graphstep_cuda_sim_own_dir(${input_dir} own)
    _graphstep_cuda_sim_built_dir(${input_dir} built)
    if(own)
      list(APPEND header_roots ${input_dir})
    elseif(NOT built)
      set(named OFF)
      foreach(root IN LISTS named_roots)
        cmake_path(IS_PREFIX root ${input_dir} NORMALIZE inside)
        if(inside)
          set(named ON)
        endif()
      endforeach()
      if(NOT named)
        list(APPEND header_roots ${input_dir})
        list(APPEND outside_roots ${input_dir})
      endif()
    endif()
  endforeach()
  set(mirrored_include_dirs)
  foreach(dir IN LISTS include_dirs)
    _graphstep_cuda_sim_own_dir(${dir} own)
    _graphstep_cuda_sim_built_dir(${dir} built)
    set(mirrored ${own})
    foreach(root IN LISTS outside_roots)
      cmake_path(IS_PREFIX root ${dir} NORMALIZE inside)
      if(inside AND NOT built)
        set(mirrored ON)
      endif()
    endforeach()
    if(mirrored)
      list(APPEND mirrored_include_dirs ${dir})
      list(APPEND header_roots ${dir})
    endif()
  endforeach()

  # Those folders, each once (a folder inside another is globbed with it, and its mirror is the
  # same folder of the other's mirror). The project's mirror is one tree, named from
  # PROJECT_SOURCE_DIR; a folder outside it gets its own, named after it.
  list(REMOVE_DUPLICATES header_roots)
  set(top_roots)
  foreach(root IN LISTS header_roots)
    set(inside_another OFF)
    foreach(other IN LISTS header_roots)
      if(NOT other STREQUAL root)
        cmake_path(IS_PREFIX other ${root} NORMALIZE inside)
        if(inside)
          set(inside_another ON)
        endif()
      endif()
    endforeach()
    if(NOT inside_another)
      list(APPEND top_roots ${root})
    endif()
  endforeach()
  set(mirror_base ${CMAKE_CURRENT_BINARY_DIR}/graphstep_cuda_sim/${target})
  set(top_mirrors)
  set(outside_names)
  foreach(root IN LISTS top_roots)
    _graphstep_cuda_sim_own_dir(${root} own)
    if(own)
      file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${root})
      cmake_path(APPEND mirror_base include ${relative} OUTPUT_VARIABLE root_mirror)
    else()
      cmake_path(GET root FILENAME name)
      set(unique ${name})
      set(count 1)
      while(unique IN_LIST outside_names)
        math(EXPR count "${count} + 1")
        set(unique ${name}_${count})
      endwhile()
      list(APPEND outside_names ${unique})
      set(root_mirror ${mirror_base}/outside/${unique})
    endif()
    string(REGEX REPLACE "(.)/$" "\\1" root_mirror "${root_mirror}")
    list(APPEND top_mirrors ${root_mirror})
  endforeach()

  # The rewriter searches every include directory, for the macros that declare kernels and to
  # refuse a header with kernels outside the mirrored folders (which the compiler would see
  # unrewritten) by name.
  set(include_mirrors)
  foreach(dir IN LISTS mirrored_include_dirs)
    _graphstep_cuda_sim_mirror(${dir} dir_mirror)
    list(APPEND include_mirrors ${dir_mirror})
  endforeach()
  # A .cu file's rewriting reads all the headers it includes, transitively: it alone checks them
  # (a mirrored header the target never includes is not).
  set(search)
  foreach(dir IN LISTS include_dirs)
    list(APPEND search -I ${dir})
  endforeach()
  set(roots)
  foreach(root IN LISTS top_roots)
    list(APPEND roots --root ${root})
  endforeach()

  # The headers each rewriting read, for it to run again when one changes (the macros that
  # declare kernels); generators that read no depfiles run it when its own input changes.
  set(depfile_supported OFF)
  if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    set(depfile_supported ON)
  endif()

  # The folder the compiler runs in, which #line names the sources from (so that the rewritten
  # text holds no absolute path and a compiler cache serves another checkout): Ninja compiles
  # from the top of the build tree, other generators from the target's folder.
  if(CMAKE_GENERATOR MATCHES "Ninja")
    set(line_base --line-base ${CMAKE_BINARY_DIR})
  else()
    set(line_base --line-base ${CMAKE_CURRENT_BINARY_DIR})
  endif()

  set(rewritten)
  foreach(input IN LISTS inputs)
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${input})
    string(MAKE_C_IDENTIFIER "${relative}" id)
    set(output ${CMAKE_CURRENT_BINARY_DIR}/graphstep_cuda_sim/${target}/${id}.cpp)
    _graphstep_cuda_sim_depfile(${output} ${depfile_supported})
    add_custom_command(
      OUTPUT ${output}
      COMMAND graphstep::rewrite_launches ${search} ${roots} ${depfile_option} ${line_base}
              ${input}
              ${output}
      DEPENDS ${input} graphstep::rewrite_launches
      ${depfile}
      COMMENT "Rewriting ${relative} for the simulated CUDA device"
      VERBATIM)
    cmake_path(GET input PARENT_PATH input_dir)
    set(source_include_dirs ${include_mirrors} ${input_dir})
    _graphstep_cuda_sim_mirror(${input_dir} input_mirror)
    if(input_mirror)
      list(PREPEND source_include_dirs ${input_mirror})
    endif()
    # nvcc's `#pragma unroll` means nothing to the host compiler; and the #line that points
    # messages at the .cu file makes g++ see the source as a header (unused internal kernels,
    # fixtures in anonymous namespaces), which nvcc's host pass does not warn about.
    set(options -Wno-unknown-pragmas -Wno-subobject-linkage -Wno-unused-function ${watch_flags})
    set(plugin_depends)
    if(watch_flags AND TARGET graphstep_sim_thread_local_accesses)
      # Accesses to __shared__ storage (thread-local, never device memory) call no entry point
      # (sim/tools/thread_local_accesses_plugin.cpp); a rebuilt plugin recompiles the kernels.
      get_target_property(plugin_depends graphstep_sim_thread_local_accesses
                          _graphstep_plugin_file)
      get_target_property(plugin_options graphstep_sim_thread_local_accesses
                          _graphstep_plugin_options)
      list(APPEND options ${plugin_options})
      add_dependencies(${target} graphstep_sim_thread_local_accesses)
    endif()
    # A source's own include directories come before the target's on the command line.
    set_source_files_properties(${output} PROPERTIES
      INCLUDE_DIRECTORIES "${source_include_dirs}"
      COMPILE_OPTIONS "${options}"
      OBJECT_DEPENDS "${plugin_depends}")
    list(APPEND rewritten ${output})
  endforeach()

  # The headers under the mirrored folders.
  foreach(root root_mirror IN ZIP_LISTS top_roots top_mirrors)
    set(patterns)
    foreach(extension IN ITEMS cuh h hpp hh inl)
      list(APPEND patterns ${root}/*.${extension})
    endforeach()
    file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${patterns})
    foreach(header IN LISTS headers)
      # Never a build tree's files (a build folder inside the source tree).
      cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${header} NORMALIZE in_build)
      if(in_build OR header MATCHES "/CMakeFiles/|/_deps/")
        continue()
      endif()
      file(RELATIVE_PATH relative ${root} ${header})
      set(output ${root_mirror}/${relative})
      _graphstep_cuda_sim_depfile(${output} ${depfile_supported})
      add_custom_command(
        OUTPUT ${output}
        COMMAND graphstep::rewrite_launches --header ${search} ${depfile_option} ${line_base}
                ${header} ${output}
        DEPENDS ${header} graphstep::rewrite_launches
        ${depfile}
        VERBATIM)
      set_source_files_properties(${output} PROPERTIES HEADER_FILE_ONLY ON)
      list(APPEND rewritten ${output})
    endforeach()
  endforeach()
  target_sources(${target} PRIVATE ${rewritten})
endfunction()
