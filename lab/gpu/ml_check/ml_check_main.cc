// gpuest-ml-check: every served GPUMemNet / GPUUtilNet ensemble of a model repository,
// loaded on the CPU and, where libtorch sees one, on a CUDA device, fed the same rows.
// It reports the largest difference of the served probabilities between the two (and
// against the served CPU path's own numbers, when the rows carry them), whether any
// served bin or class differs, the time per request at batch 1 and 64 on each device,
// and the GPU memory the loaded ensembles hold. JSON to --out, a table to stdout.
//
// It builds with a compiler, CMake and libtorch alone (lab/gpu/ml_check/CMakeLists.txt)
// and runs the served module's own code (estimators/gpumemnet/network_module.cc), so
// that a GPU machine with nothing but PyTorch's wheel proves the CUDA path. Exit
// status: 0 every check passed, 1 a check failed, 2 the command line or a file is
// wrong.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "estimators/gpumemnet/network_module.h"
#include "lab/gpu/ml_check/mini_json.h"
#include "lab/gpu/ml_check/ml_rows.h"

#if defined(GPUEST_ML_CHECK_ALLOCATOR_STATS)
#include <c10/core/CachingDeviceAllocator.h>
#endif

namespace gpuest::ml_check {
namespace {

using gpumemnet::GpuMemNetModule;
using gpumemnet::NetworkKind;
using gpumemnet::NetworkShape;

struct Options {
  std::string models = "models";
  std::string rows_file;  // Empty: generate.
  std::string out;        // Empty: no JSON file.
  std::string device = "auto";
  int rows = 1000;
  int timing_requests = 200;
  int threads = 1;
  double bound = 1e-5;
};

struct Head {
  std::string name, target;
  int classes = 0, offset = 0;
};

// One ensemble as its manifest describes it.
struct Ensemble {
  std::string id, directory;
  bool transformer = false;
  std::vector<Head> heads;
  int served_head = -1;
  int total_classes = 0;
  std::vector<NetworkShape> shapes;
  std::vector<std::string> files;
  GenerationSpec generation;
};

// The heads a reply serves: the served memory head and every utilization head.
bool Served(const Ensemble& e, size_t h) {
  return static_cast<int>(h) == e.served_head || e.heads[h].target == "utilization";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

NetworkShape ShapeOf(const Json& n) {
  NetworkShape s;
  const std::string& kind = n["kind"].String();
  if (kind != "mlp" && kind != "transformer") {
    throw std::runtime_error("network kind '" + kind + "': want mlp|transformer");
  }
  s.kind = kind == "transformer" ? NetworkKind::kTransformer : NetworkKind::kMlp;
  s.global_features = n["global_features"].Int();
  for (const Json& c : n["head_classes"].Items()) s.head_classes.push_back(c.Int());
  for (const Json& w : n["hidden"].Items()) s.hidden.push_back(w.Int());
  s.dropout = n["dropout"].Number();
  if (s.sequence()) {
    s.vocabulary = n["vocabulary"].Int();
    s.d_model = n["d_model"].Int();
    s.attention_heads = n["attention_heads"].Int();
    s.encoder_layers = n["encoder_layers"].Int();
    s.feedforward = n["feedforward"].Int();
  }
  return s;
}

// nullopt for a manifest of another estimator type.
std::optional<Ensemble> ReadEnsemble(const std::string& directory) {
  const std::string path = directory + "/manifest.json";
  const Json m = Json::Parse(ReadFile(path));
  if (!m.Has("estimator_type") || m["estimator_type"].String() != "gpumemnet") {
    return std::nullopt;
  }
  Ensemble e;
  e.id = m["id"].String();
  e.directory = directory;
  e.transformer = m["kind"].String() == "transformer";
  const std::string served = m["memory"]["served_head"].String();
  for (const Json& h : m["heads"].Items()) {
    Head head{h["name"].String(), h["target"].String(), h["classes"].Int(),
              e.total_classes};
    if (head.name == served) e.served_head = static_cast<int>(e.heads.size());
    e.total_classes += head.classes;
    e.heads.push_back(head);
  }
  if (e.served_head < 0) throw std::runtime_error(path + ": no head named " + served);
  for (const Json& member : m["members"].Items()) {
    NetworkShape s = ShapeOf(member["network"]);
    if (s.total_classes() != e.total_classes || s.sequence() != e.transformer) {
      throw std::runtime_error(path + ": a member's network does not match the heads");
    }
    e.shapes.push_back(s);
    e.files.push_back(directory + "/" + member["file"].String());
  }
  if (e.shapes.empty()) throw std::runtime_error(path + ": no members");
  const Json& encoding = m["encoding"];
  for (const Json& f : encoding["features"].Items()) {
    e.generation.features.push_back(
        {f["mean"].Number(), f["std"].Number(), f["min"].Number(), f["max"].Number()});
  }
  if (e.transformer) {
    e.generation.max_length = encoding["sequence"]["max_length"].Int();
    e.generation.vocabulary = e.shapes.front().vocabulary;
  }
  if (static_cast<int>(e.generation.features.size()) !=
      e.shapes.front().global_features) {
    throw std::runtime_error(path + ": the encoding's features are not the network's");
  }
  return e;
}

std::vector<GpuMemNetModule> LoadMembers(const Ensemble& e, const torch::Device& device) {
  std::vector<GpuMemNetModule> members;
  for (size_t i = 0; i < e.shapes.size(); ++i) {
    GpuMemNetModule net(e.shapes[i]);
    torch::load(net, e.files[i]);
    net->eval();
    net->to(device);
    members.push_back(net);
  }
  return members;
}

int64_t ParameterBytes(const std::vector<GpuMemNetModule>& members) {
  int64_t bytes = 0;
  for (const GpuMemNetModule& m : members) {
    for (const torch::Tensor& t : m->parameters()) bytes += t.numel() * t.element_size();
    for (const torch::Tensor& t : m->buffers()) bytes += t.numel() * t.element_size();
  }
  return bytes;
}

// A Transformer-based batch's token types, numbers and padding mask, appended to
// `args`: padded to its longest row, the padding masked.
void AppendSequences(const std::vector<Row>& rows, size_t begin, int64_t b,
                     std::vector<torch::Tensor>& args) {
  int64_t length = 1;
  for (int64_t i = 0; i < b; ++i) {
    length = std::max<int64_t>(length, rows[begin + i].types.size());
  }
  torch::Tensor types = torch::zeros({b, length}, torch::kInt64);
  torch::Tensor numbers = torch::zeros({b, length, 2}, torch::kFloat32);
  torch::Tensor padding = torch::ones({b, length}, torch::kBool);
  for (int64_t i = 0; i < b; ++i) {
    const Row& r = rows[begin + i];
    const int64_t n = static_cast<int64_t>(r.types.size());
    std::copy(r.types.begin(), r.types.end(), types.data_ptr<int64_t>() + i * length);
    std::copy(r.numbers.begin(), r.numbers.end(),
              numbers.data_ptr<float>() + i * length * 2);
    padding[i].slice(0, 0, n).fill_(false);
  }
  args.push_back(types);
  args.push_back(numbers);
  args.push_back(padding);
}

// The forward's inputs for rows [begin, begin + count), on `device`.
std::vector<torch::Tensor> Inputs(const Ensemble& e, const torch::Device& device,
                                  const std::vector<Row>& rows, size_t begin,
                                  size_t count) {
  const int64_t b = static_cast<int64_t>(count);
  const int64_t g = static_cast<int64_t>(rows[begin].global.size());
  torch::Tensor global = torch::empty({b, g}, torch::kFloat32);
  for (int64_t i = 0; i < b; ++i) {
    std::copy(rows[begin + i].global.begin(), rows[begin + i].global.end(),
              global.data_ptr<float>() + i * g);
  }
  std::vector<torch::Tensor> args = {global};
  if (e.transformer) AppendSequences(rows, begin, b, args);
  if (!device.is_cpu()) {
    for (torch::Tensor& t : args) t = t.to(device);
  }
  return args;
}

// Adds one member's probabilities (softmax per head, in double) times `weight` to
// `mean`; `logits` is on the CPU, float, contiguous, a row per entry of `mean`.
void AddProbabilities(const Ensemble& e, const torch::Tensor& logits, double weight,
                      std::vector<std::vector<double>>& mean) {
  const float* z0 = logits.data_ptr<float>();
  for (size_t i = 0; i < mean.size(); ++i) {
    const float* z = z0 + i * e.total_classes;
    for (const Head& h : e.heads) {
      const float top = *std::max_element(z + h.offset, z + h.offset + h.classes);
      std::vector<double> p(h.classes);
      double sum = 0;
      for (int k = 0; k < h.classes; ++k) {
        sum += p[k] = std::exp(double{z[h.offset + k]} - top);
      }
      for (int k = 0; k < h.classes; ++k) {
        mean[i][h.offset + k] += weight * p[k] / sum;
      }
    }
  }
}

// The ensemble's mean probability per class (every head, softmax per head in double,
// as the served estimator does) for rows [begin, begin + count), run as one batch.
// A Transformer-based batch is padded to its longest row, the padding masked.
std::vector<std::vector<double>> Probabilities(const Ensemble& e,
                                               std::vector<GpuMemNetModule>& members,
                                               const torch::Device& device,
                                               const std::vector<Row>& rows, size_t begin,
                                               size_t count) {
  c10::InferenceMode inference;  // Over the inputs too: they are built in it.
  std::vector<torch::Tensor> args = Inputs(e, device, rows, begin, count);
  std::vector<std::vector<double>> mean(count, std::vector<double>(e.total_classes, 0.0));
  const double weight = 1.0 / static_cast<double>(members.size());
  for (GpuMemNetModule& member : members) {
    torch::Tensor logits = e.transformer
                               ? member->forward(args[0], args[1], args[2], args[3])
                               : member->forward(args[0]);
    logits = logits.to(torch::kCPU, torch::kFloat32).contiguous();
    AddProbabilities(e, logits, weight, mean);
  }
  return mean;
}

// Every row, one request each (batch 1, as the server answers).
std::vector<std::vector<double>> EachRow(const Ensemble& e,
                                         std::vector<GpuMemNetModule>& members,
                                         const torch::Device& device,
                                         const std::vector<Row>& rows) {
  std::vector<std::vector<double>> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out.push_back(Probabilities(e, members, device, rows, i, 1).front());
  }
  return out;
}

// Every row, in requests of 64.
std::vector<std::vector<double>> InBatches(const Ensemble& e,
                                           std::vector<GpuMemNetModule>& members,
                                           const torch::Device& device,
                                           const std::vector<Row>& rows) {
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < rows.size(); i += 64) {
    for (auto& p : Probabilities(e, members, device, rows, i,
                                 std::min<size_t>(64, rows.size() - i))) {
      out.push_back(std::move(p));
    }
  }
  return out;
}

struct Comparison {
  double max_abs_difference = 0;
  int served_bins_differing = 0;          // Rows whose served memory bin differs.
  int utilization_classes_differing = 0;  // Rows with a utilization class that differs.
  bool ran = false;
};

int ArgMax(const std::vector<double>& p, const Head& h) {
  return static_cast<int>(
      std::max_element(p.begin() + h.offset, p.begin() + h.offset + h.classes) -
      (p.begin() + h.offset));
}

Comparison Compare(const Ensemble& e, const std::vector<std::vector<double>>& a,
                   const std::vector<std::vector<double>>& b) {
  Comparison c;
  c.ran = true;
  for (size_t r = 0; r < a.size(); ++r) {
    bool utilization_differs = false;
    for (size_t h = 0; h < e.heads.size(); ++h) {
      if (!Served(e, h)) continue;
      const Head& head = e.heads[h];
      for (int k = head.offset; k < head.offset + head.classes; ++k) {
        c.max_abs_difference =
            std::max(c.max_abs_difference, std::abs(a[r][k] - b[r][k]));
      }
      if (ArgMax(a[r], head) == ArgMax(b[r], head)) continue;
      if (static_cast<int>(h) == e.served_head) {
        ++c.served_bins_differing;
      } else {
        utilization_differs = true;
      }
    }
    c.utilization_classes_differing += utilization_differs;
  }
  return c;
}

// The median time of one request of `batch` rows, in microseconds, after warming up.
double MicrosPerRequest(const Ensemble& e, std::vector<GpuMemNetModule>& members,
                        const torch::Device& device, const std::vector<Row>& rows,
                        size_t batch, int requests) {
  batch = std::min(batch, rows.size());
  for (int i = 0; i < std::min(10, requests); ++i) {
    Probabilities(e, members, device, rows, 0, batch);
  }
  std::vector<double> times;
  for (int i = 0; i < requests; ++i) {
    const size_t begin = (static_cast<size_t>(i) * batch) % (rows.size() - batch + 1);
    const auto start = std::chrono::steady_clock::now();
    Probabilities(e, members, device, rows, begin, batch);
    times.push_back(std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

struct CudaMemory {
  int64_t parameter_bytes = 0;
  int64_t allocated_after_load = -1, reserved_after_load = -1, reserved_peak = -1;
};

void ReadAllocator(int64_t& allocated, int64_t& reserved, int64_t* peak) {
#if defined(GPUEST_ML_CHECK_ALLOCATOR_STATS)
  const auto stats = c10::getDeviceAllocator(c10::DeviceType::CUDA)->getDeviceStats(0);
  allocated = stats.allocated_bytes[0].current;  // [0]: the aggregate of the pools.
  reserved = stats.reserved_bytes[0].current;
  if (peak != nullptr) *peak = stats.reserved_bytes[0].peak;
#else
  (void)allocated;
  (void)reserved;
  (void)peak;
#endif
}

struct Result {
  std::string id, source;
  bool transformer = false;
  size_t members = 0, rows = 0;
  int64_t parameter_bytes = 0;
  Comparison cpu_vs_reference, batch64_vs_batch1, cuda_vs_cpu;
  double cpu_b1 = -1, cpu_b64 = -1, cuda_b1 = -1, cuda_b64 = -1;
  std::string error;  // Not empty: it did not load or run.
};

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string Number(double x) {
  if (!std::isfinite(x)) return "null";  // JSON has no NaN; the failure line says it.
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.6g", x);
  return buffer;
}

std::string ComparisonJson(const Comparison& c, const char* why_not) {
  if (!c.ran) return std::string("{\"ran\": false, \"why\": ") + Quote(why_not) + "}";
  return "{\"ran\": true, \"max_abs_probability_difference\": " +
         Number(c.max_abs_difference) +
         ", \"served_bins_differing\": " + std::to_string(c.served_bins_differing) +
         ", \"utilization_classes_differing\": " +
         std::to_string(c.utilization_classes_differing) + "}";
}

std::string Micros(double us) { return us < 0 ? "null" : Number(us); }

bool Passes(const Comparison& c, double bound) {
  return !c.ran || (c.max_abs_difference <= bound && c.served_bins_differing == 0 &&
                    c.utilization_classes_differing == 0);
}

std::string Cell(const Comparison& c) {
  if (!c.ran) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1e/%d", c.max_abs_difference,
                c.served_bins_differing + c.utilization_classes_differing);
  return buffer;
}

std::string Cell(double us) {
  if (us < 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f", us);
  return buffer;
}

int Usage(const std::string& why) {
  std::cerr << "gpuest-ml-check: " << why << "\n"
            << "usage: gpuest-ml-check [--models DIR] [--rows FILE | --generate N] "
               "[--device auto|cpu|cuda] [--out FILE.json] [--bound 1e-5] "
               "[--timing-requests N] [--threads N]\n"
               "  --rows FILE: rows gpuest-ml-rows wrote (GPUMemNet's measured rows and "
               "the served CPU path's probabilities); without it N rows per ensemble "
               "are generated from each manifest's training ranges (default 1000).\n"
               "  --device cuda: the GPU half must run (an error without CUDA); auto: "
               "it runs where libtorch sees a CUDA device; cpu: never.\n";
  return 2;
}

// Sets one flag's value: false for a flag this program does not know; std::stoi and
// std::stod throw for a value that is not a number.
bool SetFlag(const std::string& flag, const std::string& value, Options& o) {
  if (flag == "--models") {
    o.models = value;
  } else if (flag == "--rows") {
    o.rows_file = value;
  } else if (flag == "--generate") {
    o.rows = std::stoi(value);
  } else if (flag == "--out") {
    o.out = value;
  } else if (flag == "--device") {
    o.device = value;
  } else if (flag == "--bound") {
    o.bound = std::stod(value);
  } else if (flag == "--timing-requests") {
    o.timing_requests = std::stoi(value);
  } else if (flag == "--threads") {
    o.threads = std::stoi(value);
  } else {
    return false;
  }
  return true;
}

// nullopt: run with `o`; otherwise the exit status (--help, or the usage after an error).
std::optional<int> ParseFlags(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      Usage("the served ensembles on the CPU and a CUDA device, compared");
      return 0;
    }
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      if (!SetFlag(flag, value, o)) return Usage("unknown flag " + flag);
    } catch (const std::exception&) {
      return Usage(flag + ": not a number: " + value);
    }
  }
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    return Usage("--device " + o.device + ": want auto|cpu|cuda");
  }
  if (o.rows < 64 || o.timing_requests < 1 || o.threads < 1) {
    return Usage(
        "--generate wants at least 64 rows; --timing-requests and --threads 1 or more");
  }
  return std::nullopt;
}

// Whether the CUDA half runs, and what libtorch sees.
struct GpuHalf {
  bool cuda_seen = false;
  int cuda_devices = 0;
  std::string status = "run";  // "run", or why not.

  bool run() const { return status == "run"; }
};

GpuHalf DecideGpuHalf(const std::string& device) {
  GpuHalf g;
  g.cuda_seen = torch::cuda::is_available();
  g.cuda_devices = static_cast<int>(torch::cuda::device_count());
  if (device == "cpu") {
    g.status = "not run: --device cpu";
  } else if (!g.cuda_seen) {
    g.status = "NOT RUN: libtorch " TORCH_VERSION
               " sees no CUDA device (a CPU-only libtorch, or no GPU on this machine)";
  }
  return g;
}

// The rows --rows names, by ensemble id; none without it.
std::map<std::string, RowSet> ReadGivenRows(const std::string& rows_file) {
  if (rows_file.empty()) return {};
  std::ifstream in(rows_file);
  if (!in) throw std::runtime_error("cannot read " + rows_file);
  return ReadRows(in);
}

// The folders of `models` that hold a manifest.json, sorted.
std::vector<std::string> ModelDirectories(const std::string& models,
                                          std::error_code& ec) {
  std::vector<std::string> directories;
  for (const auto& entry : std::filesystem::directory_iterator(models, ec)) {
    if (std::filesystem::exists(entry.path() / "manifest.json")) {
      directories.push_back(entry.path().string());
    }
  }
  std::sort(directories.begin(), directories.end());
  return directories;
}

// What the steps of one run share.
struct Check {
  Options options;
  GpuHalf gpu_half;
  std::map<std::string, RowSet> given;  // --rows, by ensemble id.
  torch::Device cpu{torch::kCPU};
  torch::Device gpu{torch::kCPU};  // cuda:0 where the GPU half runs.
  std::vector<Ensemble> ensembles;
  // Every ensemble's members on the GPU at once, as a server holds them.
  std::vector<std::vector<GpuMemNetModule>> on_gpu;
  std::vector<Result> results;
  std::vector<std::string> failures;
  CudaMemory memory;
};

// The gpumemnet ensembles among the directories; one that cannot be read is a failed
// result.
void ReadEnsembles(const std::vector<std::string>& directories, Check& c) {
  for (const std::string& directory : directories) {
    try {
      std::optional<Ensemble> e = ReadEnsemble(directory);
      if (e) c.ensembles.push_back(std::move(*e));
    } catch (const std::exception& ex) {
      Result r;
      r.id = std::filesystem::path(directory).filename().string();
      r.error = ex.what();
      c.results.push_back(r);
      c.failures.push_back(r.id + ": " + r.error);
    }
  }
}

// Every ensemble onto the GPU (none for one that fails to load), and what it holds.
void LoadOnGpu(Check& c) {
  for (const Ensemble& e : c.ensembles) {
    try {
      c.on_gpu.push_back(LoadMembers(e, c.gpu));
    } catch (const std::exception& ex) {
      c.on_gpu.emplace_back();
      c.failures.push_back(e.id + ": loading on cuda: " + ex.what());
    }
    c.memory.parameter_bytes += ParameterBytes(c.on_gpu.back());
  }
  ReadAllocator(c.memory.allocated_after_load, c.memory.reserved_after_load, nullptr);
}

// The ensemble's rows: from --rows, else generated from its manifest.
std::vector<Row> RowsFor(const Ensemble& e, Check& c, std::string& source) {
  if (auto it = c.given.find(e.id); it != c.given.end()) {
    source = it->second.source;
    return it->second.rows;
  }
  std::vector<Row> rows = GenerateRows(e.generation, SeedOf(e.id), c.options.rows);
  source = "generated from the manifest's training ranges (seed: FNV-1a of the id)";
  if (!c.given.empty()) c.failures.push_back(e.id + ": not in " + c.options.rows_file);
  return rows;
}

// Throws for a row that does not fit the ensemble's inputs or heads.
void CheckRowsFit(const Ensemble& e, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    if (static_cast<int>(row.global.size()) != e.shapes.front().global_features ||
        (e.transformer && row.types.empty()) || (!e.transformer && !row.types.empty()) ||
        (!row.reference.empty() &&
         static_cast<int>(row.reference.size()) != e.total_classes)) {
      throw std::runtime_error("a row does not fit the ensemble's inputs or heads");
    }
    for (int64_t t : row.types) {
      if (t < 0 || t >= e.shapes.front().vocabulary) {
        throw std::runtime_error("a row's token type is outside the vocabulary");
      }
    }
  }
}

// The CPU half into `r`: batch 64 against batch 1, against the rows' reference, and
// the times. Returns the batch-1 probabilities the GPU's are compared with.
std::vector<std::vector<double>> CheckOnCpu(const Ensemble& e, const Check& c,
                                            const std::vector<Row>& rows, Result& r) {
  std::vector<GpuMemNetModule> members = LoadMembers(e, c.cpu);
  r.parameter_bytes = ParameterBytes(members);
  auto cpu_each = EachRow(e, members, c.cpu, rows);
  r.batch64_vs_batch1 = Compare(e, InBatches(e, members, c.cpu, rows), cpu_each);
  if (!rows.front().reference.empty()) {
    std::vector<std::vector<double>> reference;
    for (const Row& row : rows) reference.push_back(row.reference);
    r.cpu_vs_reference = Compare(e, cpu_each, reference);
  }
  const int requests = c.options.timing_requests;
  r.cpu_b1 = MicrosPerRequest(e, members, c.cpu, rows, 1, requests);
  r.cpu_b64 = MicrosPerRequest(e, members, c.cpu, rows, 64, std::max(1, requests / 10));
  return cpu_each;
}

// The GPU half into `r`: batch 1 on cuda against the CPU's, and the times.
void CheckOnCuda(const Ensemble& e, Check& c, size_t n, const std::vector<Row>& rows,
                 const std::vector<std::vector<double>>& cpu_each, Result& r) {
  std::vector<GpuMemNetModule>& members = c.on_gpu[n];
  const int requests = c.options.timing_requests;
  r.cuda_vs_cpu = Compare(e, EachRow(e, members, c.gpu, rows), cpu_each);
  r.cuda_b1 = MicrosPerRequest(e, members, c.gpu, rows, 1, requests);
  r.cuda_b64 = MicrosPerRequest(e, members, c.gpu, rows, 64, std::max(1, requests / 10));
}

// A failure line for each comparison of `r` that does not pass.
void AddComparisonFailures(const Result& r, double bound,
                           std::vector<std::string>& failures) {
  for (const auto& [what, c] :
       {std::pair{"cpu vs reference", &r.cpu_vs_reference},
        std::pair{"cpu batch 64 vs batch 1", &r.batch64_vs_batch1},
        std::pair{"cuda vs cpu", &r.cuda_vs_cpu}}) {
    if (!Passes(*c, bound)) {
      failures.push_back(
          r.id + ": " + what + ": max difference " + Number(c->max_abs_difference) +
          " (bound " + Number(bound) + "), " + std::to_string(c->served_bins_differing) +
          " served bins and " + std::to_string(c->utilization_classes_differing) +
          " rows' utilization classes differ");
    }
  }
}

// Ensemble n on its rows, on the CPU and, where it loaded there, on the GPU.
Result CheckEnsemble(Check& c, size_t n) {
  const Ensemble& e = c.ensembles[n];
  Result r;
  r.id = e.id;
  r.transformer = e.transformer;
  r.members = e.shapes.size();
  try {
    const std::vector<Row> rows = RowsFor(e, c, r.source);
    CheckRowsFit(e, rows);
    r.rows = rows.size();
    const auto cpu_each = CheckOnCpu(e, c, rows, r);
    if (c.gpu_half.run() && !c.on_gpu[n].empty()) CheckOnCuda(e, c, n, rows, cpu_each, r);
  } catch (const c10::Error& ex) {
    r.error = std::string("libtorch: ") + ex.what_without_backtrace();
  } catch (const std::exception& ex) {
    r.error = ex.what();
  }
  if (!r.error.empty()) c.failures.push_back(e.id + ": " + r.error);
  AddComparisonFailures(r, c.options.bound, c.failures);
  return r;
}

void PrintTable(const Check& c) {
  std::printf("gpuest-ml-check: libtorch %s, %d CPU thread(s); GPU half: %s\n",
              TORCH_VERSION, c.options.threads, c.gpu_half.status.c_str());
  std::printf("%-34s %7s %5s  %-13s %-13s %-13s  %9s %9s %9s %9s\n", "ensemble",
              "members", "rows", "cpu~reference", "cuda~cpu", "b64~b1 (cpu)", "cpu b1",
              "cpu b64", "cuda b1", "cuda b64");
  for (const Result& r : c.results) {
    if (!r.error.empty()) {
      std::printf("%-34s ERROR: %s\n", r.id.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-34s %7zu %5zu  %-13s %-13s %-13s  %9s %9s %9s %9s\n", r.id.c_str(),
                r.members, r.rows, Cell(r.cpu_vs_reference).c_str(),
                Cell(r.cuda_vs_cpu).c_str(), Cell(r.batch64_vs_batch1).c_str(),
                Cell(r.cpu_b1).c_str(), Cell(r.cpu_b64).c_str(), Cell(r.cuda_b1).c_str(),
                Cell(r.cuda_b64).c_str());
  }
  std::printf(
      "(differences: max |p - p'| over the served heads' probabilities / rows whose "
      "served bin or class differs; times: median microseconds per request)\n");
  if (c.gpu_half.run()) {
    std::printf(
        "GPU memory: parameters %lld bytes; caching allocator after loading: "
        "allocated %lld, reserved %lld; reserved peak %lld (-1: not read by this "
        "build)\n",
        static_cast<long long>(c.memory.parameter_bytes),
        static_cast<long long>(c.memory.allocated_after_load),
        static_cast<long long>(c.memory.reserved_after_load),
        static_cast<long long>(c.memory.reserved_peak));
  }
  for (const std::string& f : c.failures) std::printf("FAILED: %s\n", f.c_str());
  std::printf("%s\n", c.failures.empty() ? "PASSED" : "FAILED");
}

// One entry of the JSON's "ensembles".
void WriteResultJson(const Result& r, const GpuHalf& gpu_half, std::ostream& json) {
  json << "\n    {\"id\": " << Quote(r.id);
  if (!r.error.empty()) {
    json << ", \"error\": " << Quote(r.error) << "}";
    return;
  }
  json << ", \"kind\": " << Quote(r.transformer ? "transformer" : "mlp")
       << ", \"members\": " << r.members << ", \"rows\": " << r.rows
       << ", \"rows_source\": " << Quote(r.source)
       << ", \"parameter_bytes\": " << r.parameter_bytes
       << ",\n     \"cpu_vs_reference\": "
       << ComparisonJson(r.cpu_vs_reference, "the rows carry no reference")
       << ",\n     \"cuda_vs_cpu\": "
       << ComparisonJson(r.cuda_vs_cpu, gpu_half.run() ? "did not load on cuda (failures)"
                                                       : gpu_half.status.c_str())
       << ",\n     \"cpu_batch64_vs_batch1\": " << ComparisonJson(r.batch64_vs_batch1, "")
       << ",\n     \"us_per_request\": {\"cpu\": {\"batch1\": " << Micros(r.cpu_b1)
       << ", \"batch64\": " << Micros(r.cpu_b64)
       << "}, \"cuda\": {\"batch1\": " << Micros(r.cuda_b1)
       << ", \"batch64\": " << Micros(r.cuda_b64) << "}}}";
}

// The JSON report to --out; false when it cannot be written.
bool WriteJson(const Check& c) {
  const Options& o = c.options;
  std::ofstream json(o.out);
  json << "{\n  \"torch_version\": " << Quote(TORCH_VERSION)
       << ",\n  \"cuda_available\": " << (c.gpu_half.cuda_seen ? "true" : "false")
       << ",\n  \"cuda_devices\": " << c.gpu_half.cuda_devices
       << ",\n  \"cpu_threads\": " << o.threads
       << ",\n  \"gpu_half\": " << Quote(c.gpu_half.status)
       << ",\n  \"bound\": " << Number(o.bound)
       << ",\n  \"rows_file\": " << (o.rows_file.empty() ? "null" : Quote(o.rows_file))
       << ",\n  \"ensembles\": [";
  for (size_t i = 0; i < c.results.size(); ++i) {
    json << (i ? "," : "");
    WriteResultJson(c.results[i], c.gpu_half, json);
  }
  json << "\n  ],\n  \"cuda_memory\": ";
  if (c.gpu_half.run()) {
    json << "{\"parameter_bytes\": " << c.memory.parameter_bytes
         << ", \"allocator_allocated_bytes_after_load\": "
         << c.memory.allocated_after_load
         << ", \"allocator_reserved_bytes_after_load\": " << c.memory.reserved_after_load
         << ", \"allocator_reserved_bytes_peak\": " << c.memory.reserved_peak
         << ", \"note\": \"-1: this build does not read the caching allocator\"}";
  } else {
    json << "null";
  }
  json << ",\n  \"failures\": [";
  for (size_t i = 0; i < c.failures.size(); ++i) {
    json << (i ? ", " : "") << Quote(c.failures[i]);
  }
  json << "],\n  \"passed\": " << (c.failures.empty() ? "true" : "false") << "\n}\n";
  return static_cast<bool>(json);
}

int Run(int argc, char** argv) {
  Check c;
  if (std::optional<int> exit = ParseFlags(argc, argv, c.options)) return *exit;
  const Options& o = c.options;
  // As the server: one intra-op thread per call (its worker pool is its parallelism).
  at::set_num_threads(o.threads);
  c.gpu_half = DecideGpuHalf(o.device);
  if (o.device == "cuda" && !c.gpu_half.run()) {
    std::cerr << "gpuest-ml-check: --device cuda, but " << c.gpu_half.status.substr(9)
              << "\n";
    return 2;
  }
  try {
    c.given = ReadGivenRows(o.rows_file);
  } catch (const std::exception& ex) {
    return Usage(ex.what());
  }
  std::error_code ec;
  const std::vector<std::string> directories = ModelDirectories(o.models, ec);
  if (ec) return Usage("cannot list " + o.models + ": " + ec.message());

  if (c.gpu_half.run()) c.gpu = torch::Device(torch::kCUDA, 0);
  ReadEnsembles(directories, c);
  if (c.gpu_half.run()) LoadOnGpu(c);
  for (size_t n = 0; n < c.ensembles.size(); ++n)
    c.results.push_back(CheckEnsemble(c, n));
  if (c.ensembles.empty())
    c.failures.push_back("no GPUMemNet ensemble under " + o.models);
  if (c.gpu_half.run()) {
    int64_t allocated = 0, reserved = 0;
    ReadAllocator(allocated, reserved, &c.memory.reserved_peak);
  }

  PrintTable(c);
  if (!o.out.empty() && !WriteJson(c)) {
    std::cerr << "gpuest-ml-check: cannot write " << o.out << "\n";
    return 2;
  }
  return c.failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace gpuest::ml_check

int main(int argc, char** argv) { return gpuest::ml_check::Run(argc, argv); }
