// File: client_policy_json.h
//
// proto/gpuest/v1/client_policy.json as the build embedded it (client/CMakeLists.txt
// generates the definition with cmake/EmbedFile.cmake): the client never reads it at
// run time.
#pragma once

#include <string_view>

namespace gpuest::client {

std::string_view ClientPolicyJson();

}  // namespace gpuest::client
