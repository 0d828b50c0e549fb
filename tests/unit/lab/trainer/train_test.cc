// lab/trainer/train: one ensemble member trained on a tiny separable set: the loss
// falls, the same seed trains the same member, the predictions are probabilities per
// head, unmeasured targets are ignored, and the member saves to a file.
#include "lab/trainer/train.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::trainer {
namespace {

// 48 rows of two features: head 0 is whether the first is positive, head 1 the second's
// sign in three classes, not measured on every fourth row.
EncodedSet Separable() {
  EncodedSet data;
  data.global_dim = 2;
  for (int i = 0; i < 48; ++i) {
    const float x = static_cast<float>(i % 8) - 3.5f;
    const float y = static_cast<float>(i % 6) - 2.5f;
    data.global.push_back(x);
    data.global.push_back(y);
    const int64_t second = i % 4 == 3 ? -100 : (y < -1 ? 0 : y < 1 ? 1 : 2);
    data.labels.push_back({x > 0 ? 1 : 0, second});
  }
  return data;
}

MemberSpec Spec() {
  MemberSpec spec;
  spec.network.kind = gpumemnet::NetworkKind::kMlp;
  spec.network.global_features = 2;
  spec.network.head_classes = {2, 3};
  spec.network.hidden = {16};
  spec.learning_rate = 1e-2;
  spec.epochs = 40;
  spec.batch_size = 8;
  spec.seed = 7;
  return spec;
}

TEST(Train, AMemberLearnsASeparableSetAndPredictsProbabilities) {
  UseOneThread();
  const EncodedSet data = Separable();
  std::vector<double> losses;
  auto member = TrainMember(data, Spec(), [&losses](int epoch, double loss) {
    EXPECT_EQ(epoch, static_cast<int>(losses.size()));
    losses.push_back(loss);
  });
  ASSERT_TRUE(member.ok()) << member.status();
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
  EXPECT_EQ(member->final_loss, losses.back());
  auto p = Predict(*member, data);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 48u);
  int right = 0;
  for (int i = 0; i < 48; ++i) {
    const std::vector<float>& row = (*p)[i];
    ASSERT_EQ(row.size(), 5u);  // 2 + 3 classes.
    EXPECT_NEAR(row[0] + row[1], 1.0, 1e-5);
    EXPECT_NEAR(row[2] + row[3] + row[4], 1.0, 1e-5);
    right += (row[1] > row[0]) == (data.labels[i][0] == 1) ? 1 : 0;
  }
  EXPECT_GE(right, 45);
}

TEST(Train, TheSameSeedTrainsTheSameMember) {
  UseOneThread();
  const EncodedSet data = Separable();
  MemberSpec spec = Spec();
  spec.epochs = 5;
  auto a = TrainMember(data, spec, nullptr);
  auto b = TrainMember(data, spec, nullptr);
  spec.seed = 8;
  auto c = TrainMember(data, spec, nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->final_loss, b->final_loss);
  EXPECT_NE(a->final_loss, c->final_loss);
  EXPECT_EQ(*Predict(*a, data), *Predict(*b, data));
}

TEST(Train, AMemberSavesToAFileAndNoRowsIsRefused) {
  UseOneThread();
  MemberSpec spec = Spec();
  spec.epochs = 1;
  auto member = TrainMember(Separable(), spec, nullptr);
  ASSERT_TRUE(member.ok()) << member.status();
  const std::string path =
      ::testing::TempDir() + "/train_test_" + std::to_string(getpid()) + ".pt";
  ASSERT_TRUE(SaveMember(*member, path).ok());
  EXPECT_GT(std::filesystem::file_size(path), 0u);
  std::filesystem::remove(path);
  EXPECT_FALSE(SaveMember(*member, "/nonexistent/dir/member.pt").ok());
  const absl::StatusOr<TrainedMember> none = TrainMember(EncodedSet{}, spec, nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "no training rows");
}

}  // namespace
}  // namespace gpuest::trainer
