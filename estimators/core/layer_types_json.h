// File: layer_types_json.h
//
// proto/gpuest/v1/layer_types.json, the layer-type table shared with the Python side,
// as the build embedded it (estimators/CMakeLists.txt generates the definition with
// cmake/EmbedFile.cmake): the server never reads it at run time.
#pragma once

#include <string_view>

namespace gpuest::core {

std::string_view LayerTypesJson();

}  // namespace gpuest::core
