# gpuest_embed_file(<out-var> <input> <header> <function>): a C++ source that returns
# the input file's text from <function>() (declared in <header>, relative to the build
# tree), regenerated when the file changes; <out-var> names the source, to add to a
# target. For files a program must carry (layer_types.json, client_policy.json). The
# function is in the header's folder's namespace (gpuest::<the folder's last name>).
function(gpuest_embed_file out_var input header function)
  get_filename_component(name ${input} NAME_WE)
  get_filename_component(header_dir ${header} DIRECTORY)
  get_filename_component(folder ${header_dir} NAME)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${name}_json.cc)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DHEADER=${header}
      -DFUNCTION=${function} -DNAMESPACE=gpuest::${folder} -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
    COMMENT "embed ${name}.json")
  set(${out_var} ${output} PARENT_SCOPE)
endfunction()
