#include "lab/gpu/ml_check/ml_rows.h"

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace gpuest::ml_check {
namespace {

// splitmix64: a fixed sequence on every platform.
class Generator {
 public:
  explicit Generator(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n).
  int64_t Below(int64_t n) {
    return static_cast<int64_t>(Unit() * static_cast<double>(n));
  }

 private:
  uint64_t state_;
};

std::string Text(float x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(x));
  return buffer;
}

std::string Text(double x) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  return buffer;
}

}  // namespace

uint64_t SeedOf(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<Row> GenerateRows(const GenerationSpec& spec, uint64_t seed, int n) {
  Generator g(seed);
  std::vector<Row> rows(static_cast<size_t>(n));
  for (Row& row : rows) {
    for (const GenerationSpec::Feature& f : spec.features) {
      const double raw = f.min + (f.max - f.min) * g.Unit();
      row.global.push_back(static_cast<float>((raw - f.mean) / (f.std > 0 ? f.std : 1)));
    }
    if (spec.max_length <= 0) continue;
    const int64_t length = 1 + g.Below(spec.max_length);
    for (int64_t t = 0; t < length; ++t) {
      row.types.push_back(g.Below(spec.vocabulary));
      row.numbers.push_back(static_cast<float>(4 * g.Unit() - 2));
      row.numbers.push_back(static_cast<float>(4 * g.Unit() - 2));
    }
  }
  return rows;
}

void WriteRows(std::ostream& out, const std::map<std::string, RowSet>& sets) {
  out << "gpuest-ml-rows 1\n";
  for (const auto& [id, set] : sets) {
    out << "ensemble " << id << " " << set.rows.size() << " " << set.source << "\n";
    for (const Row& r : set.rows) {
      out << "row " << r.global.size();
      for (float x : r.global) out << " " << Text(x);
      out << " " << r.types.size();
      for (size_t t = 0; t < r.types.size(); ++t) {
        out << " " << r.types[t] << " " << Text(r.numbers[2 * t]) << " "
            << Text(r.numbers[2 * t + 1]);
      }
      out << " " << r.reference.size();
      for (double p : r.reference) out << " " << Text(p);
      out << "\n";
    }
  }
}

std::map<std::string, RowSet> ReadRows(std::istream& in) {
  std::map<std::string, RowSet> sets;
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("rows file line " + std::to_string(number) + ": " + why);
  };
  if (!std::getline(in, line) || line != "gpuest-ml-rows 1") {
    ++number;
    fail("not a gpuest-ml-rows 1 file");
  }
  ++number;
  RowSet* current = nullptr;
  std::map<std::string, size_t> declared;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream words(line);
    std::string word;
    words >> word;
    if (word == "ensemble") {
      std::string id;
      size_t rows = 0;
      if (!(words >> id >> rows)) fail("ensemble <id> <rows> <source> expected");
      if (sets.count(id) > 0) fail("ensemble " + id + " a second time");
      declared[id] = rows;
      current = &sets[id];
      std::getline(words >> std::ws, current->source);
      continue;
    }
    if (word != "row" || current == nullptr) fail("'ensemble' or 'row' expected");
    Row r;
    size_t n = 0;
    if (!(words >> n) || n > 4096) fail("global feature count");
    r.global.resize(n);
    for (float& x : r.global) words >> x;
    if (!(words >> n) || n > 65536) fail("token count");
    r.types.resize(n);
    r.numbers.resize(2 * n);
    for (size_t t = 0; t < n; ++t)
      words >> r.types[t] >> r.numbers[2 * t] >> r.numbers[2 * t + 1];
    if (!(words >> n) || n > 65536) fail("reference count");
    r.reference.resize(n);
    for (double& p : r.reference) words >> p;
    if (words.fail()) fail("a number is missing or unreadable");
    if (words >> word) fail("more numbers than its counts say");
    current->rows.push_back(std::move(r));
  }
  for (const auto& [id, set] : sets) {
    if (set.rows.empty() || set.rows.size() != declared[id]) {
      throw std::runtime_error("rows file: ensemble " + id + " has " +
                               std::to_string(set.rows.size()) + " rows, its line says " +
                               std::to_string(declared[id]));
    }
  }
  return sets;
}

}  // namespace gpuest::ml_check
