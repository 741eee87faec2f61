# graphstep_cuda_sim_sources(<target>...)
#
# Builds a target's CUDA sources (*.cu) for the simulated CUDA device: each is rewritten by
# graphstep::rewrite_launches (every `kernel<<<grid, block, shared, stream>>>(args)` becomes a
# call into the simulator, and graphstep/sim/device.hpp is included first) and compiled as C++.
# Link the target to graphstep::cuda_sim instead of CUDA::cudart. A quoted #include still finds
# files beside the original source.
function(graphstep_cuda_sim_sources)
  foreach(target IN LISTS ARGN)
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(rewritten)
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
      # nvcc's `#pragma unroll` means nothing to the host compiler; and the #line that points
      # messages at the .cu file makes g++ see the source as a header (unused internal kernels,
      # fixtures in anonymous namespaces), which nvcc's host pass does not warn about.
      set_source_files_properties(${output} PROPERTIES
        INCLUDE_DIRECTORIES ${input_dir}
        COMPILE_OPTIONS "-Wno-unknown-pragmas;-Wno-subobject-linkage;-Wno-unused-function")
      list(APPEND rewritten ${output})
    endforeach()
    set_property(TARGET ${target} PROPERTY SOURCES ${rewritten})
  endforeach()
endfunction()
