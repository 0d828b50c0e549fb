// File: population.h
//
// Which measured population calibrates a job's memory terms, and what each term stands
// for. The terms (memory_model.h: an intercept, a factor on the simulated reserved
// peak, a factor on the largest convolution output) cover only what the replayed step
// does not hold; the optimizer's state, cuDNN's workspaces and the growth across steps
// are in the trace and its replay. So a job gets the terms of the population it
// belongs to, recognised by what its description shows, never by a setting that
// merely correlates with a dataset (GPUMemNet's generated CNNs were all trained with
// Adam; a real CNN trained with Adam is still a real CNN):
//
//   - model_source in gpuest.synthetic (GPUMemNet's generator, rebuilt), or no
//     model_source and a name that is the generator's configuration string
//     ("input_channels:3_..._arch:pyramid_..."): synthetic;
//   - any other model_source (torchvision, timm, transformers, the user's own code):
//     real;
//   - nothing to tell by: real, assumed, and the answer says so.
#pragma once

#include <string>

#include "gpuest/v1/model.pb.h"

namespace gpuest::allocsim {

enum class Population { kReal, kSynthetic };

struct PopulationChoice {
  Population population = Population::kReal;
  bool assumed = false;  // The description does not tell: real assumed.
  std::string basis;     // Why, for the answer's basis.
};

PopulationChoice ChoosePopulation(const v1::ModelDescription& model);

// What each of a population's terms stands for (the mechanism it covers), for the
// basis. layer_built: the step was built from the layer sequence (analytic), which
// holds no workspace, so the convolution term covers them all.
struct TermMechanisms {
  std::string intercept, factor, conv_output;
};
TermMechanisms MechanismsOf(Population population, bool layer_built);

}  // namespace gpuest::allocsim
