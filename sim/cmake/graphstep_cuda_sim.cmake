# graphstep_cuda_sim_sources(<target>...)
#
# Builds a target's CUDA sources (*.cu) for the simulated CUDA device: each is rewritten by
# graphstep::rewrite_launches (every `kernel<<<grid, block, shared, stream>>>(args)` becomes a
# call into the simulator, and graphstep/sim/device.hpp is included first) and compiled as C++.
# Link the target to graphstep::cuda_sim instead of CUDA::cudart.
#
# Headers (.cuh, .h, .hpp, .hh, .inl) under the folders of the target's .cu files, subfolders
# included, when those folders are the project's own (PROJECT_SOURCE_DIR, outside the build
# tree), are mirrored into the build tree (graphstep_cuda_sim/<target>/include/...): a header
# holding kernels, launches or extern __shared__ arrays as its rewritten copy (with #line, so
# that messages name the original), any other as a one-line #include of the original. The
# mirror of a .cu file's folder comes first on its include path, then the folder itself, so a
# quoted #include finds the rewritten header, and its own quoted #includes find their
# neighbours. Headers elsewhere (the CUDA toolkit, the system, other folders) are used as they
# are. A header added after CMake ran is mirrored at the next configure (the glob is
# CONFIGURE_DEPENDS).

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
        -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -Wno-tsan)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(_graphstep_cuda_sim_watch_flags
        -fsanitize=thread -mllvm -tsan-instrument-func-entry-exit=0)
  else()
    message(STATUS "graphstep: simulated kernels' accesses are not instrumented with "
                   "${CMAKE_CXX_COMPILER_ID}; the race checker sees their pointer arguments")
  endif()
endif()

# The mirror of `dir`, a folder of the project, for `target`.
function(_graphstep_cuda_sim_mirror target dir out)
  file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${dir})
  set(${out} ${CMAKE_CURRENT_BINARY_DIR}/graphstep_cuda_sim/${target}/include/${relative}
      PARENT_SCOPE)
endfunction()

function(graphstep_cuda_sim_sources)
  foreach(target IN LISTS ARGN)
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(rewritten)
    set(header_roots)
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "\\.cu$")
        list(APPEND rewritten ${source})
        continue()
      endif()
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir} NORMALIZE
                 OUTPUT_VARIABLE input)
      file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${input})
      string(MAKE_C_IDENTIFIER "${relative}" id)
      set(output ${CMAKE_CURRENT_BINARY_DIR}/graphstep_cuda_sim/${target}/${id}.cpp)
      add_custom_command(
        OUTPUT ${output}
        COMMAND graphstep::rewrite_launches ${input} ${output}
        DEPENDS ${input} graphstep::rewrite_launches
        COMMENT "Rewriting ${relative} for the simulated CUDA device"
        VERBATIM)
      cmake_path(GET input PARENT_PATH input_dir)
      # Only the project's own folders are mirrored (never a build tree's, nor one outside).
      cmake_path(IS_PREFIX PROJECT_SOURCE_DIR ${input_dir} NORMALIZE in_project)
      cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${input_dir} NORMALIZE in_build)
      set(include_dirs ${input_dir})
      if(in_project AND NOT in_build)
        list(APPEND header_roots ${input_dir})
        _graphstep_cuda_sim_mirror(${target} ${input_dir} input_mirror)
        set(include_dirs ${input_mirror} ${input_dir})
      endif()
      # nvcc's `#pragma unroll` means nothing to the host compiler; and the #line that points
      # messages at the .cu file makes g++ see the source as a header (unused internal kernels,
      # fixtures in anonymous namespaces), which nvcc's host pass does not warn about.
      set(options -Wno-unknown-pragmas -Wno-subobject-linkage -Wno-unused-function
                  ${_graphstep_cuda_sim_watch_flags})
      set_source_files_properties(${output} PROPERTIES
        INCLUDE_DIRECTORIES "${include_dirs}"
        COMPILE_OPTIONS "${options}")
      list(APPEND rewritten ${output})
    endforeach()

    # The headers under those folders, each once (a folder inside another is globbed with it).
    list(REMOVE_DUPLICATES header_roots)
    set(roots)
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
        list(APPEND roots ${root})
      endif()
    endforeach()
    foreach(root IN LISTS roots)
      set(patterns)
      foreach(extension IN ITEMS cuh h hpp hh inl)
        list(APPEND patterns ${root}/*.${extension})
      endforeach()
      file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${patterns})
      _graphstep_cuda_sim_mirror(${target} ${root} root_mirror)
      foreach(header IN LISTS headers)
        # Never a build tree's files (a build folder inside the source tree).
        cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${header} NORMALIZE in_build)
        if(in_build OR header MATCHES "/CMakeFiles/|/_deps/")
          continue()
        endif()
        file(RELATIVE_PATH relative ${root} ${header})
        set(output ${root_mirror}/${relative})
        add_custom_command(
          OUTPUT ${output}
          COMMAND graphstep::rewrite_launches --header ${header} ${output}
          DEPENDS ${header} graphstep::rewrite_launches
          VERBATIM)
        set_source_files_properties(${output} PROPERTIES HEADER_FILE_ONLY ON)
        list(APPEND rewritten ${output})
      endforeach()
    endforeach()
    set_property(TARGET ${target} PROPERTY SOURCES ${rewritten})
  endforeach()
endfunction()
