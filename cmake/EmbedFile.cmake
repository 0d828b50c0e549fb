# Writes OUTPUT, a C++ file defining `std::string_view NAMESPACE::FUNCTION()` that returns
# the bytes of INPUT, so that a program carries a data file instead of reading it at
# run time (an installed binary cannot miss it). HEADER declares FUNCTION.
#   cmake -DINPUT=in.json -DOUTPUT=out.cc -DHEADER=dir/x.h -DFUNCTION=Name
#     -DNAMESPACE=gpuest::dir -P EmbedFile.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Twelve bytes a line.
string(REPEAT "0x..," 12 line)
string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
file(RELATIVE_PATH source "${CMAKE_CURRENT_LIST_DIR}/.." "${INPUT}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${source} by cmake/EmbedFile.cmake: do not edit.
#include \"${HEADER}\"

namespace ${NAMESPACE} {

std::string_view ${FUNCTION}() {
  static constexpr unsigned char kBytes[] = {
    ${bytes}};
  return std::string_view(reinterpret_cast<const char*>(kBytes), sizeof(kBytes));
}

}  // namespace ${NAMESPACE}
")
# Touch the output only when it changes, so an unchanged file rebuilds nothing.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
