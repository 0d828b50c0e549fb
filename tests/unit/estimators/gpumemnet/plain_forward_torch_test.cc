// The plain forward (plain_forward.h), in every kernel build this CPU can run, against
// libtorch's forward of the same shipped member files, on real rows of the measured
// datasets and the examples: the same probabilities to float rounding and the same
// class for every head.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "estimators/core/features.h"
#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/networks.h"
#include "estimators/gpumemnet/plain_export.h"
#include "estimators/gpumemnet/plain_forward.h"
#include "gtest/gtest.h"
#include "lab/data/measured_rows.h"
#include "tests/support/datasets.h"
#include "tests/support/examples.h"

namespace gpuest::gpumemnet {
namespace {

// Softmax per head, in double.
std::vector<double> Probabilities(const std::vector<float>& logits,
                                  const std::vector<int>& head_classes) {
  std::vector<double> p(logits.size());
  size_t begin = 0;
  for (int classes : head_classes) {
    const size_t end = begin + classes;
    const float top = *std::max_element(logits.begin() + begin, logits.begin() + end);
    double sum = 0;
    for (size_t k = begin; k < end; ++k) sum += p[k] = std::exp(double{logits[k]} - top);
    for (size_t k = begin; k < end; ++k) p[k] /= sum;
    begin = end;
  }
  return p;
}

std::vector<float> TorchLogits(GpuMemNet& net, std::vector<float> global,
                               EncodedSequence seq) {
  torch::InferenceMode inference;
  const int64_t g = static_cast<int64_t>(global.size());
  const torch::Tensor global_t = torch::from_blob(global.data(), {1, g}, torch::kFloat32);
  torch::Tensor logits;
  if (net->config().sequence()) {
    const int64_t n = static_cast<int64_t>(seq.types.size());
    logits =
        net->forward(global_t, torch::from_blob(seq.types.data(), {1, n}, torch::kInt64),
                     torch::from_blob(seq.numbers.data(), {1, n, 2}, torch::kFloat32),
                     torch::zeros({1, n}, torch::kBool));
  } else {
    logits = net->forward(global_t);
  }
  logits = logits.contiguous();
  return std::vector<float>(logits.data_ptr<float>(),
                            logits.data_ptr<float>() + logits.numel());
}

// The requests of a family: every few rows of a dataset in GPUMemNet's format under
// gpumemnet_dir (where the family has layer lists) and its example.
std::vector<v1::ModelDescription> RowModels(const std::string& gpumemnet_dir,
                                            const std::string& family) {
  std::vector<v1::ModelDescription> models;
  models.push_back(testing::ExampleRequest(family + ".json").model());
  if (family == "transformer") return models;  // Its sample has no layer lists.
  auto read = data::ReadGpuMemNetCsv(
      gpumemnet_dir + "/" + family + ".csv",
      family == "cnn" ? v1::MODEL_FAMILY_CNN : v1::MODEL_FAMILY_MLP);
  EXPECT_TRUE(read.ok()) << read.status();
  if (!read.ok()) return models;
  for (size_t i = 0; i < read->rows.size(); i += 13) {
    if (read->rows[i].model.layers_size() > 0) models.push_back(read->rows[i].model);
  }
  return models;
}

// Every shipped member's plain forward against libtorch on the rows of gpumemnet_dir.
void CheckShippedMembersOn(const std::string& gpumemnet_dir, size_t min_rows) {
  torch::set_num_threads(1);
  for (const std::string family : {"mlp", "cnn", "transformer"}) {
    const std::vector<v1::ModelDescription> models = RowModels(gpumemnet_dir, family);
    ASSERT_GT(models.size(), family == "transformer" ? 0u : min_rows) << family;
    for (const std::string kind : {"mlp", "transformer"}) {
      const std::string dir =
          std::string(GPUEST_MODELS_DIR) + "/gpumemnet-" + family + "-" + kind;
      auto manifest = GpuMemNetManifest::Load(dir + "/manifest.json");
      ASSERT_TRUE(manifest.ok()) << manifest.status();
      for (const MemberRecord& member : manifest->members) {
        const std::string where = dir + "/" + member.file;
        GpuMemNet net(member.network);
        torch::load(net, where);
        net->eval();
        auto plain = ExportPlainNet(net);
        ASSERT_TRUE(plain.ok()) << where << ": " << plain.status();
        double worst = 0;
        for (const v1::ModelDescription& model : models) {
          const std::vector<float> global =
              EncodeGlobal(manifest->encoding, core::ExtractFeatures(model));
          const EncodedSequence seq = EncodeSequence(manifest->encoding, model);
          const std::vector<double> want =
              Probabilities(TorchLogits(net, global, seq), member.network.head_classes);
          for (ForwardKernels kernels : SupportedForwardKernels()) {
            const std::vector<double> got = Probabilities(
                PlainForward(*plain, global, seq, kernels), member.network.head_classes);
            ASSERT_EQ(got.size(), want.size());
            size_t begin = 0;
            for (int classes : member.network.head_classes) {
              const auto w = want.begin() + begin, g = got.begin() + begin;
              EXPECT_EQ(std::max_element(g, g + classes) - g,
                        std::max_element(w, w + classes) - w)
                  << where << " on " << model.name() << ": another class";
              begin += classes;
            }
            for (size_t k = 0; k < want.size(); ++k) {
              const double error = std::abs(got[k] - want[k]);
              worst = std::max(worst, error / std::max(want[k], 1e-30));
              // float32 logits of magnitude ~20 summed in another order differ by
              // ~1e-6, which moves a probability by ~1e-5 relative (the MLP-based
              // members, one Dense kernel, do so too).
              EXPECT_LE(error, 5e-5 * want[k] + 1e-12)
                  << where << " on " << model.name() << ": probability " << k << " is "
                  << got[k] << ", libtorch says " << want[k];
            }
          }
        }
        std::printf("%s: worst relative error %.3g over %zu inputs\n", where.c_str(),
                    worst, models.size());
      }
    }
  }
}

TEST(PlainForwardAgainstLibtorch, ShippedMembersOnRealRows) {
  GPUEST_DATASET_OR_SKIP(gpumemnet_dir, "gpumemnet");
  CheckShippedMembersOn(gpumemnet_dir, 100);
}

// The project's own generated rows (tests/data/fixture-datasets): a clone without the
// measured data still compares every member on real layer lists, not only examples.
TEST(PlainForwardAgainstLibtorch, ShippedMembersOnFixtureRows) {
  CheckShippedMembersOn(testing::FixtureRoot() + "/gpumemnet", 20);
}

// A randomly initialised Transformer-based member of the given shape.
GpuMemNet RandomTransformerMember(int d_model, int heads) {
  NetworkConfig config;
  config.kind = NetworkKind::kTransformer;
  config.global_features = 5;
  config.head_classes = {7, 3};
  config.hidden = {40};
  config.vocabulary = 9;
  config.d_model = d_model;
  config.attention_heads = heads;
  config.encoder_layers = 2;
  config.feedforward = 24;
  GpuMemNet net(config);
  net->eval();
  return net;
}

// The plain forward in every kernel this CPU runs gives libtorch's probabilities.
void ExpectAgreesWithLibtorch(GpuMemNet& net, const PlainNet& plain,
                              const std::vector<float>& global,
                              const EncodedSequence& seq, const std::string& what) {
  const std::vector<int>& head_classes = net->config().head_classes;
  const std::vector<double> want =
      Probabilities(TorchLogits(net, global, seq), head_classes);
  for (ForwardKernels kernels : SupportedForwardKernels()) {
    const std::vector<double> got =
        Probabilities(PlainForward(plain, global, seq, kernels), head_classes);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_LE(std::abs(got[k] - want[k]), 5e-5 * want[k] + 1e-12)
          << what << ": probability " << k << " is " << got[k] << ", libtorch says "
          << want[k];
    }
  }
}

// The shipped members have head sizes 4, 6 and 8, which have kernels of their own;
// any other head size (under or over eight channels, or not a multiple of eight) is
// read at run time. Randomly initialised members of such shapes, on random tokens of
// lengths around whole vectors, against libtorch.
TEST(PlainForwardAgainstLibtorch, HeadSizesWithoutTheirOwnKernel) {
  torch::set_num_threads(1);
  torch::manual_seed(20261123);
  std::mt19937 random(20261123);
  std::uniform_real_distribution<float> number(-2.0f, 2.0f);
  struct Shape {
    int d_model, heads;
  };
  for (const Shape shape : {Shape{12, 4}, Shape{24, 2}, Shape{32, 2}, Shape{20, 1}}) {
    GpuMemNet net = RandomTransformerMember(shape.d_model, shape.heads);
    auto plain = ExportPlainNet(net);
    ASSERT_TRUE(plain.ok()) << plain.status();
    for (int n : {1, 7, 8, 9, 67, 119}) {
      std::vector<float> global(net->config().global_features);
      for (float& g : global) g = number(random);
      EncodedSequence seq;
      for (int t = 0; t < n; ++t) {
        seq.types.push_back(static_cast<int64_t>(random() % net->config().vocabulary));
        seq.numbers.push_back(number(random));
        seq.numbers.push_back(number(random));
      }
      ExpectAgreesWithLibtorch(net, *plain, global, seq,
                               "d_model " + std::to_string(shape.d_model) + ", " +
                                   std::to_string(shape.heads) + " heads, " +
                                   std::to_string(n) + " tokens");
    }
  }
}

// The plain forward computes each distinct token once and weighs it by how often it
// occurs. Sequences made of a few distinct tokens repeated in any order (one token 100
// times; three, unevenly; and tokens that differ only in one number or only in their
// type), against libtorch, which computes every position.
TEST(PlainForwardAgainstLibtorch, RepeatedTokensCountAsOftenAsTheyOccur) {
  torch::set_num_threads(1);
  torch::manual_seed(20261125);
  std::mt19937 random(20261125);
  std::uniform_real_distribution<float> number(-2.0f, 2.0f);
  GpuMemNet net = RandomTransformerMember(16, 4);
  auto plain = ExportPlainNet(net);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::vector<float> global = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f};
  struct Token {
    int64_t type;
    float a, b;
  };
  const Token base{3, number(random), number(random)};
  const std::vector<std::vector<Token>> kinds = {
      {base},
      {base, {5, number(random), number(random)}, {1, number(random), number(random)}},
      {base, {base.type, base.a, std::nextafter(base.b, 10.0f)}, {4, base.a, base.b}},
  };
  for (size_t k = 0; k < kinds.size(); ++k) {
    for (int n : {2, 17, 100}) {
      EncodedSequence seq;
      for (int t = 0; t < n; ++t) {
        // Uneven counts: the first token about half of the time.
        const Token& token = kinds[k][random() % 2 == 0 ? 0 : random() % kinds[k].size()];
        seq.types.push_back(token.type);
        seq.numbers.push_back(token.a);
        seq.numbers.push_back(token.b);
      }
      ExpectAgreesWithLibtorch(net, *plain, global, seq,
                               std::to_string(kinds[k].size()) +
                                   " distinct tokens (set " + std::to_string(k) +
                                   ") in " + std::to_string(n));
    }
  }
}

}  // namespace
}  // namespace gpuest::gpumemnet
