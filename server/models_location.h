// File: models_location.h
//
// Where gpuest-server finds its model repository when --models is not given: the
// repository installed beside the binary (<prefix>/bin/../share/gpuest/models, as
// `cmake --install` lays it out), else ./models (a source checkout).
#pragma once

#include <string>

namespace gpuest::server {

std::string DefaultModelsDirectory();

}  // namespace gpuest::server
