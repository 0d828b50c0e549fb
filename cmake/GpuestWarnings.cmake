# Warnings as errors on the project's own code; generated code is exempt.
function(gpuest_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror
    -Wno-unused-parameter)
endfunction()
