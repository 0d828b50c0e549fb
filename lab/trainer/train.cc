// The trainer's libtorch door: c10::Error and std::exception become absl::Status here.
#include "lab/trainer/train.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "estimators/gpumemnet/networks.h"

namespace gpuest::trainer {

struct TrainedMemberImpl {
  explicit TrainedMemberImpl(const gpumemnet::NetworkConfig& config) : net(config) {}
  gpumemnet::GpuMemNet net;
};

namespace {

constexpr int64_t kIgnore = -100;

// The network's inputs for rows [begin, end) of `order` (indices into data).
struct Batch {
  torch::Tensor global, types, numbers, padding, labels;
};

Batch MakeBatch(const EncodedSet& data, const std::vector<int64_t>& rows, bool sequence) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t heads = static_cast<int64_t>(data.labels[0].size());
  Batch b;
  b.global = torch::empty({n, data.global_dim}, torch::kFloat32);
  b.labels = torch::empty({n, heads}, torch::kInt64);
  float* g = b.global.data_ptr<float>();
  int64_t* l = b.labels.data_ptr<int64_t>();
  int64_t longest = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    std::copy_n(data.global.begin() + r * data.global_dim, data.global_dim,
                g + i * data.global_dim);
    std::copy_n(data.labels[r].begin(), heads, l + i * heads);
    if (sequence) longest = std::max<int64_t>(longest, data.types[r].size());
  }
  if (sequence) {
    b.types = torch::zeros({n, longest}, torch::kInt64);
    b.numbers = torch::zeros({n, longest, 2}, torch::kFloat32);
    b.padding = torch::ones({n, longest}, torch::kBool);
    int64_t* t = b.types.data_ptr<int64_t>();
    float* x = b.numbers.data_ptr<float>();
    bool* p = b.padding.data_ptr<bool>();
    for (int64_t i = 0; i < n; ++i) {
      const auto& types = data.types[rows[i]];
      const auto& numbers = data.numbers[rows[i]];
      std::copy(types.begin(), types.end(), t + i * longest);
      std::copy(numbers.begin(), numbers.end(), x + i * longest * 2);
      std::fill_n(p + i * longest, types.size(), false);
    }
  }
  return b;
}

// One epoch's batches in a random order. With layer sequences, rows of similar length
// share a batch (sorted within random windows of 16 batches) so that little is padding.
std::vector<std::vector<int64_t>> EpochBatches(const EncodedSet& data, int batch_size,
                                               bool sequence) {
  const torch::Tensor perm = torch::randperm(data.size(), torch::kInt64);
  std::vector<int64_t> order(perm.data_ptr<int64_t>(),
                             perm.data_ptr<int64_t>() + data.size());
  if (sequence) {
    const size_t window = static_cast<size_t>(batch_size) * 16;
    for (size_t begin = 0; begin < order.size(); begin += window) {
      const auto end = order.begin() + std::min(order.size(), begin + window);
      std::stable_sort(order.begin() + begin, end, [&](int64_t a, int64_t b) {
        return data.types[a].size() < data.types[b].size();
      });
    }
  }
  std::vector<std::vector<int64_t>> batches;
  for (size_t begin = 0; begin < order.size(); begin += batch_size) {
    batches.emplace_back(order.begin() + begin,
                         order.begin() + std::min(order.size(), begin + batch_size));
  }
  if (sequence) {
    const torch::Tensor shuffle =
        torch::randperm(static_cast<int64_t>(batches.size()), torch::kInt64);
    std::vector<std::vector<int64_t>> shuffled;
    for (int64_t i = 0; i < shuffle.size(0); ++i) {
      shuffled.push_back(std::move(batches[shuffle.data_ptr<int64_t>()[i]]));
    }
    batches = std::move(shuffled);
  }
  return batches;
}

torch::Tensor Forward(gpumemnet::GpuMemNet& net, const Batch& b) {
  return net->config().sequence() ? net->forward(b.global, b.types, b.numbers, b.padding)
                                  : net->forward(b.global);
}

}  // namespace

void UseOneThread() { at::set_num_threads(1); }

absl::StatusOr<TrainedMember> TrainMember(const EncodedSet& data, const MemberSpec& spec,
                                          const Progress& progress) {
  try {
    if (data.size() == 0) return absl::InvalidArgumentError("no training rows");
    torch::manual_seed(spec.seed);
    TrainedMember member;
    member.impl = std::make_shared<TrainedMemberImpl>(spec.network);
    gpumemnet::GpuMemNet& net = member.impl->net;
    net->train();
    torch::optim::Adam optimizer(
        net->parameters(),
        torch::optim::AdamOptions(spec.learning_rate).weight_decay(spec.weight_decay));
    const bool sequence = spec.network.sequence();
    const std::vector<int>& heads = spec.network.head_classes;
    for (int epoch = 0; epoch < spec.epochs; ++epoch) {
      const double lr = spec.learning_rate * 0.5 *
                        (1.0 + std::cos(M_PI * epoch / static_cast<double>(spec.epochs)));
      for (auto& group : optimizer.param_groups()) {
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
      }
      double loss_sum = 0;
      int batches = 0;
      for (const std::vector<int64_t>& rows :
           EpochBatches(data, spec.batch_size, sequence)) {
        const Batch b = MakeBatch(data, rows, sequence);
        const torch::Tensor logits = Forward(net, b);
        torch::Tensor loss = torch::zeros({}, torch::kFloat32);
        int64_t offset = 0;
        for (size_t h = 0; h < heads.size(); ++h) {
          const torch::Tensor target = b.labels.select(1, static_cast<int64_t>(h));
          const torch::Tensor measured = (target != kIgnore).sum();
          // Summed, then divided by the measured rows (none measured: no loss).
          loss = loss + torch::nn::functional::cross_entropy(
                            logits.narrow(1, offset, heads[h]), target,
                            torch::nn::functional::CrossEntropyFuncOptions()
                                .ignore_index(kIgnore)
                                .reduction(torch::kSum)) /
                            measured.clamp_min(1);
          offset += heads[h];
        }
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>();
        ++batches;
      }
      member.final_loss = loss_sum / std::max(1, batches);
      if (progress) progress(epoch, member.final_loss);
    }
    net->eval();
    return member;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

absl::StatusOr<std::vector<std::vector<float>>> Predict(const TrainedMember& member,
                                                        const EncodedSet& data) {
  try {
    torch::NoGradGuard no_grad;
    gpumemnet::GpuMemNet& net = member.impl->net;
    net->eval();
    const bool sequence = net->config().sequence();
    const std::vector<int>& heads = net->config().head_classes;
    std::vector<std::vector<float>> out(data.size());
    // Rows by length, so that a chunk is little padding; answers go back in place.
    std::vector<int64_t> order(data.size());
    for (int64_t r = 0; r < data.size(); ++r) order[r] = r;
    if (sequence) {
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return data.types[a].size() < data.types[b].size();
      });
    }
    constexpr int64_t kChunk = 128;
    for (int64_t begin = 0; begin < data.size(); begin += kChunk) {
      const std::vector<int64_t> rows(
          order.begin() + begin,
          order.begin() + std::min<int64_t>(data.size(), begin + kChunk));
      const torch::Tensor logits = Forward(net, MakeBatch(data, rows, sequence));
      std::vector<torch::Tensor> parts;
      int64_t offset = 0;
      for (int classes : heads) {
        parts.push_back(torch::softmax(logits.narrow(1, offset, classes), 1));
        offset += classes;
      }
      const torch::Tensor p = torch::cat(parts, 1).contiguous();
      const float* q = p.data_ptr<float>();
      for (int64_t i = 0; i < p.size(0); ++i) {
        out[rows[i]].assign(q + i * p.size(1), q + (i + 1) * p.size(1));
      }
    }
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

absl::Status SaveMember(const TrainedMember& member, const std::string& path) {
  try {
    torch::save(member.impl->net, path);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("saving ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("saving ", path, ": ", e.what()));
  }
}

}  // namespace gpuest::trainer
