#include "estimators/allocsim/population.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuest::allocsim {
namespace {

// The libraries whose named models gpuest.describe is pointed at most: said by name.
struct Library {
  const char* prefix;
  const char* name;
};
constexpr Library kLibraries[] = {{"torchvision.", "torchvision"},
                                  {"timm.", "timm"},
                                  {"transformers.", "transformers"},
                                  {"torch.nn.", "torch.nn"}};

// GPUMemNet's generator names each run by its configuration (its CSVs' Filename):
// "input_channels:3_num_classes:453_depth:22_arch:uniform_..." (CNN),
// "input_size:..._arch:..." (MLP), "..._arch:..." with the sequence's fields.
bool IsGeneratorConfigName(const std::string& name) {
  return absl::StartsWith(name, "input_") && absl::StrContains(name, "_arch:");
}

}  // namespace

PopulationChoice ChoosePopulation(const v1::ModelDescription& model) {
  PopulationChoice c;
  const std::string& source = model.model_source();
  if (absl::StartsWith(source, "gpuest.synthetic.")) {
    c.population = Population::kSynthetic;
    c.basis = absl::StrCat("synthetic: GPUMemNet's generator (", source, ")");
    return c;
  }
  if (!source.empty()) {
    for (const Library& library : kLibraries) {
      if (absl::StartsWith(source, library.prefix)) {
        c.basis = absl::StrCat("real: a named ", library.name, " model (", source, ")");
        return c;
      }
    }
    c.basis = absl::StrCat("real: the job's own code (", source,
                           "), not GPUMemNet's generator");
    return c;
  }
  if (IsGeneratorConfigName(model.name())) {
    c.population = Population::kSynthetic;
    c.basis =
        "synthetic: named by GPUMemNet's generator's configuration (the description "
        "does not record model_source)";
    return c;
  }
  c.assumed = true;
  c.basis =
      "real, assumed: the description does not record where the model came from "
      "(model_source; gpuest.describe records it)";
  return c;
}

TermMechanisms MechanismsOf(Population population, bool layer_built) {
  TermMechanisms m;
  m.intercept =
      "what the process holds beyond the context and the simulated step: the CUDA "
      "libraries' own buffers, the allocator's first segments";
  if (population == Population::kSynthetic) {
    m.factor =
        "what GPUMemNet's generated networks reserve beyond their simulated step, "
        "their large convolutions at large resolutions: on an H100 the first steps of "
        "such runs reserved gigabytes more than the simulated step; fitted on them, "
        "given to them only";
    m.conv_output =
        "the generated networks' cuDNN workspaces and search at large resolutions";
    return m;
  }
  m.factor =
      "the allocator's reserve beyond the simulated one: fragmentation and block reuse "
      "the replay does not reproduce";
  m.conv_output = layer_built
                      ? "cuDNN's convolution workspaces, which a step built from the "
                        "layers does not hold"
                      : "cuDNN engines' workspaces larger than the traced heuristic "
                        "ones, as for a depthwise filter's gradient";
  return m;
}

}  // namespace gpuest::allocsim
