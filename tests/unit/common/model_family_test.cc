// common/model_family: the families' words, read from the enum, and back.
#include "common/model_family.h"

#include "gtest/gtest.h"

namespace gpuest::common {
namespace {

TEST(ModelFamily, EachFamilyHasItsLowerCaseName) {
  EXPECT_EQ(FamilyName(v1::MODEL_FAMILY_MLP), "mlp");
  EXPECT_EQ(FamilyName(v1::MODEL_FAMILY_CNN), "cnn");
  EXPECT_EQ(FamilyName(v1::MODEL_FAMILY_TRANSFORMER), "transformer");
  EXPECT_EQ(FamilyName(v1::MODEL_FAMILY_OTHER), "other");
  // Unspecified, and a number the enum does not name, mean any family.
  EXPECT_EQ(FamilyName(v1::MODEL_FAMILY_UNSPECIFIED), "any");
  EXPECT_EQ(FamilyName(static_cast<v1::ModelFamily>(999)), "any");
}

TEST(ModelFamily, ANameMeansOneConcreteFamily) {
  const google::protobuf::EnumDescriptor* d = v1::ModelFamily_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    const auto family = static_cast<v1::ModelFamily>(d->value(i)->number());
    if (family == v1::MODEL_FAMILY_UNSPECIFIED) continue;
    EXPECT_EQ(FamilyFromName(FamilyName(family)), family) << d->value(i)->name();
  }
  EXPECT_EQ(FamilyFromName("any"), std::nullopt);
  EXPECT_EQ(FamilyFromName("CNN"), std::nullopt);
  EXPECT_EQ(FamilyFromName(""), std::nullopt);
}

}  // namespace
}  // namespace gpuest::common
