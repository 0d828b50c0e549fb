// File: ml_rows.h
//
// The rows gpuest-ml-check feeds the ensembles: each one member input as the served
// estimator builds it (standardised global features; for the Transformer-based kind
// the layer tokens), and optionally the probabilities the served CPU path (the plain
// forward) gave for it. Standard C++ only: the check builds with libtorch alone.
//
// Rows come from a file that gpuest-ml-rows writes in the full build (GPUMemNet's
// measured rows, encoded by the project's one feature function, with the served
// probabilities), or are generated here, deterministically, from the manifest's
// training ranges when no file is given.
//
// The file, one line each, numbers as text (floats with 9 significant digits, exact):
//   gpuest-ml-rows 1
//   ensemble <id> <rows> <source words...>
//   row <G> g1..gG <L> (type a b)*L <K> p1..pK     (K = 0: no reference)
// K, when not 0, is every head's classes; the p are the ensemble's mean probability per
// class, head after head, as the served estimator computes them.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace gpuest::ml_check {

struct Row {
  std::vector<float> global;
  std::vector<int64_t> types;     // One per token; empty for the MLP-based kind.
  std::vector<float> numbers;     // Two per token.
  std::vector<double> reference;  // Empty: none.
};

struct RowSet {
  std::string source;  // Where the rows came from, in words.
  std::vector<Row> rows;
};

// What generating rows needs to know of an ensemble's encoding.
struct GenerationSpec {
  // Per global feature: its standardisation and raw training range.
  struct Feature {
    double mean = 0, std = 1, min = 0, max = 0;
  };
  std::vector<Feature> features;
  int max_length = 0;  // 0: no tokens.
  int vocabulary = 0;
};

// n rows, the same for the same (seed, spec) on every machine: each global feature
// uniform over its raw training range, then standardised; for the Transformer-based
// kind a length uniform in [1, max_length], types uniform over the vocabulary and the
// two numbers uniform in [-2, 2] (standardised units). Own arithmetic on a 64-bit
// generator (splitmix64), no std:: distributions, whose results differ by library.
std::vector<Row> GenerateRows(const GenerationSpec& spec, uint64_t seed, int n);
// A seed from an ensemble's id (FNV-1a).
uint64_t SeedOf(const std::string& id);

// Writes / reads the file above. Read throws std::runtime_error naming the line.
void WriteRows(std::ostream& out, const std::map<std::string, RowSet>& sets);
std::map<std::string, RowSet> ReadRows(std::istream& in);

}  // namespace gpuest::ml_check
