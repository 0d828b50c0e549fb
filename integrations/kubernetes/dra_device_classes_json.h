// File: dra_device_classes_json.h
//
// integrations/kubernetes/dra_device_classes.json as the build embedded it
// (integrations/kubernetes/CMakeLists.txt, cmake/EmbedFile.cmake): the built-in table
// of the DRA device classes gpuest sizes (dra_claim.h).
#pragma once

#include <string_view>

namespace gpuest::kubernetes {

std::string_view DraDeviceClassesJson();

}  // namespace gpuest::kubernetes
