#include "requests/summary_parser.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace gpuest::requests {
namespace {

// Far beyond any real model, far below int64 overflow when summed over many rows.
constexpr int64_t kMaxCount = int64_t{1} << 50;

using Shape = std::vector<int64_t>;

// The text as lines, with torchinfo's box-drawing tree glyphs turned into one ASCII
// character each so that columns line up byte for byte: "│" -> '|', "├" -> '+',
// "└" -> '`', "─" -> '-'.
std::vector<std::string> SplitLines(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (std::string& line : lines) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    line = absl::StrReplaceAll(line, {{"\xE2\x94\x82", "|"},
                                      {"\xE2\x94\x9C", "+"},
                                      {"\xE2\x94\x94", "`"},
                                      {"\xE2\x94\x80", "-"}});
  }
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// Errors name the source and, where there is one, the 1-based line.
class Errors {
 public:
  explicit Errors(absl::string_view source) : source_(source) {}
  absl::Status At(size_t index, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, " line ", index + 1, ": ", message));
  }
  absl::Status Whole(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
  }

 private:
  std::string source_;
};

bool IsRule(absl::string_view line, char c) {
  line = absl::StripAsciiWhitespace(line);
  if (line.size() < 10) return false;
  for (char ch : line) {
    if (ch != c) return false;
  }
  return true;
}

bool IsHeader(absl::string_view line) {
  return absl::StrContains(line, "Layer (type") && absl::StrContains(line, "Param #");
}

// "1,234,567" or "0": digits with optional thousands commas.
bool ParseCount(absl::string_view text, int64_t* out) {
  if (text.empty() || !absl::ascii_isdigit(text.front()) ||
      !absl::ascii_isdigit(text.back())) {
    return false;
  }
  std::string digits;
  for (char c : text) {
    if (absl::ascii_isdigit(c)) {
      digits.push_back(c);
    } else if (c != ',') {
      return false;
    }
  }
  return absl::SimpleAtoi(digits, out) && *out >= 0 && *out <= kMaxCount;
}

// "[-1, 64, 112, 112]", "[2, 768]", "[]" or a list of them ("[[-1, 10], [-1, 20]]",
// torchsummary's rows for modules that return several tensors). Appends the shapes.
bool ParseShapes(absl::string_view text, std::vector<Shape>* out) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return false;
  absl::string_view inner = absl::StripAsciiWhitespace(text.substr(1, text.size() - 2));
  if (inner.empty()) {
    out->emplace_back();
    return true;
  }
  if (inner.front() == '[') {
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= inner.size(); ++i) {
      const char c = i < inner.size() ? inner[i] : ',';
      if (c == '[') ++depth;
      if (c == ']' && --depth < 0) return false;
      if (c == ',' && depth == 0) {
        if (!ParseShapes(inner.substr(start, i - start), out)) return false;
        start = i + 1;
      }
    }
    return depth == 0;
  }
  Shape shape;
  for (absl::string_view dim : absl::StrSplit(inner, ',')) {
    int64_t value;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(dim), &value)) return false;
    // The first (batch) dimension may be torchsummary's -1; the others are sizes.
    if (value < (shape.empty() ? -1 : 0)) return false;
    shape.push_back(value);
  }
  out->push_back(std::move(shape));
  return true;
}

// Elements per sample: each shape without its batch dimension, summed over the shapes.
bool PerSample(const std::vector<Shape>& shapes, int64_t* out) {
  int64_t total = 0;
  for (const Shape& shape : shapes) {
    if (shape.empty()) continue;  // A 0-d tensor: nothing per sample.
    int64_t product = 1;
    for (size_t i = 1; i < shape.size(); ++i) {
      if (shape[i] != 0 && product > kMaxCount / shape[i]) return false;
      product *= shape[i];
    }
    total += product;
    if (total > kMaxCount) return false;
  }
  *out = total;
  return true;
}

absl::Status ShapeError(const Errors& errors, size_t index, absl::string_view shape) {
  return errors.At(index, absl::StrCat("output shape '", shape,
                                       "' is not a shape like [-1, 64, 112, 112]"));
}

struct Totals {
  int64_t total = 0;
  size_t total_line = 0;
};

// The three parameter lines after the closing rule; index is the line after the rule.
// Moves index past them.
absl::StatusOr<Totals> ParseTotals(const std::vector<std::string>& lines, size_t& index,
                                   const Errors& errors) {
  Totals totals;
  int64_t values[3] = {0, 0, 0};
  static constexpr const char* kLabels[3] = {"Total params", "Trainable params",
                                             "Non-trainable params"};
  for (int k = 0; k < 3; ++k, ++index) {
    if (index >= lines.size()) {
      return errors.At(lines.size() - 1, absl::StrCat("the summary ends before its '",
                                                      kLabels[k], "' line (cut off?)"));
    }
    absl::string_view line = absl::StripAsciiWhitespace(lines[index]);
    if (!absl::StartsWith(line, kLabels[k])) {
      return errors.At(index,
                       absl::StrCat("expected '", kLabels[k], ": N', got '", line, "'"));
    }
    const size_t colon = line.rfind(':');
    absl::string_view value = colon == absl::string_view::npos
                                  ? ""
                                  : absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (line.substr(0, colon) != kLabels[k] || !ParseCount(value, &values[k])) {
      return errors.At(
          index, absl::StrCat("'", line, "' is not an exact count like '", kLabels[k],
                              ": 1,234' (print it without units)"));
    }
    if (k == 0) totals.total_line = index;
  }
  totals.total = values[0];
  if (values[1] + values[2] != values[0]) {
    return errors.At(
        index - 1,
        absl::StrCat("trainable (", values[1], ") and non-trainable (", values[2],
                     ") parameters do not add up to Total params (", values[0], ")"));
  }
  return totals;
}

// After the totals: anything but a second table is ignored (memory estimates, logs).
absl::Status CheckNoSecondTable(const std::vector<std::string>& lines, size_t index,
                                const Errors& errors) {
  for (; index < lines.size(); ++index) {
    if (IsHeader(lines[index])) {
      return errors.At(index,
                       "a second model summary begins here; give one summary per input");
    }
  }
  return absl::OkStatus();
}

// The rows between the '=' rule under the header and the closing '=' rule; returns the
// index of the closing rule.
absl::StatusOr<size_t> FindTableEnd(const std::vector<std::string>& lines, size_t header,
                                    const Errors& errors) {
  if (header + 1 >= lines.size() || !IsRule(lines[header + 1], '=')) {
    return errors.At(std::min(header + 1, lines.size() - 1),
                     "expected the '=====' rule under the table header");
  }
  for (size_t i = header + 2; i < lines.size(); ++i) {
    if (IsRule(lines[i], '=')) {
      if (i == header + 2) return errors.At(i, "the table has no rows");
      return i;
    }
  }
  return errors.At(
      lines.size() - 1,
      "the table ends without its closing '=====' rule and totals (cut off?)");
}

v1::ModelDescription NewDescription() {
  v1::ModelDescription model;
  model.set_framework("pytorch");
  return model;
}

// ---- torchsummary ----------------------------------------------------------------

// One row "Type-N  [output shape]  params"; number is the row's place, 1-based.
absl::StatusOr<v1::Layer> ParseTorchsummaryRow(absl::string_view line, size_t i,
                                               int number, const Errors& errors) {
  absl::string_view row = absl::StripAsciiWhitespace(line);
  if (row.empty()) return errors.At(i, "blank line inside the table");
  const size_t open = row.find('[');
  absl::string_view label =
      absl::StripTrailingAsciiWhitespace(row.substr(0, std::min(open, row.size())));
  const size_t dash = label.rfind('-');
  int64_t label_number = 0;
  if (open == absl::string_view::npos || dash == absl::string_view::npos || dash == 0 ||
      absl::StrContains(label, ' ') ||
      !absl::SimpleAtoi(label.substr(dash + 1), &label_number)) {
    return errors.At(
        i,
        absl::StrCat("expected a row 'Type-N  [output shape]  params', got '", row, "'"));
  }
  if (label_number != number) {
    return errors.At(i, absl::StrCat("row '", label, "' should be number ", number,
                                     " (a row is missing?)"));
  }
  int depth = 0;
  size_t close = open;
  for (; close < row.size(); ++close) {
    if (row[close] == '[') ++depth;
    if (row[close] == ']' && --depth == 0) break;
  }
  if (close == row.size()) {
    return errors.At(i,
                     absl::StrCat("output shape '", row.substr(open), "' is not closed"));
  }
  const absl::string_view shape_text = row.substr(open, close - open + 1);
  std::vector<Shape> shapes;
  int64_t activations = 0;
  if (!ParseShapes(shape_text, &shapes)) return ShapeError(errors, i, shape_text);
  if (!PerSample(shapes, &activations)) {
    return errors.At(
        i, absl::StrCat("output shape '", shape_text, "' is implausibly large"));
  }
  const absl::string_view params_text = absl::StripAsciiWhitespace(row.substr(close + 1));
  int64_t params = 0;
  if (!ParseCount(params_text, &params)) {
    return errors.At(i,
                     absl::StrCat("parameter count '", params_text, "' is not a number"));
  }
  v1::Layer layer;
  layer.set_type(std::string(label.substr(0, dash)));
  layer.set_name(std::string(label));
  layer.set_output_activations(activations);
  layer.set_parameters(params);
  return layer;
}

absl::StatusOr<v1::ModelDescription> ParseTorchsummary(
    const std::vector<std::string>& lines, size_t header, const Errors& errors) {
  if (!absl::StrContains(lines[header], "Output Shape")) {
    return errors.At(header, "the table header has no 'Output Shape' column");
  }
  GPUEST_ASSIGN_OR_RETURN(const size_t end, FindTableEnd(lines, header, errors));
  v1::ModelDescription model = NewDescription();
  int64_t sum = 0;
  for (size_t i = header + 2; i < end; ++i) {
    GPUEST_ASSIGN_OR_RETURN(
        v1::Layer layer,
        ParseTorchsummaryRow(lines[i], i, model.layers_size() + 1, errors));
    sum += layer.parameters();
    *model.add_layers() = std::move(layer);
  }
  size_t index = end + 1;
  GPUEST_ASSIGN_OR_RETURN(const Totals totals, ParseTotals(lines, index, errors));
  // torchsummary's total is the sum of its rows' counts, so this check is exact.
  if (sum != totals.total) {
    return errors.At(totals.total_line, absl::StrCat("Total params is ", totals.total,
                                                     " but the rows add up to ", sum,
                                                     " (a row is missing or altered?)"));
  }
  if (auto status = CheckNoSecondTable(lines, index, errors); !status.ok()) return status;
  return model;
}

// ---- torchinfo ---------------------------------------------------------------------

struct Column {
  size_t start;
  std::string name;
};

// Column starts: where a word follows two or more spaces (column names hold single
// spaces, e.g. "Param #"). torchinfo left-aligns every value at its column's start.
std::vector<Column> HeaderColumns(absl::string_view header) {
  std::vector<Column> columns;
  size_t i = 0;
  while (i < header.size()) {
    const size_t start = i;
    size_t end = i;
    while (end < header.size() &&
           !(header[end] == ' ' && end + 1 < header.size() && header[end + 1] == ' ')) {
      ++end;
    }
    columns.push_back({start, std::string(absl::StripTrailingAsciiWhitespace(
                                  header.substr(start, end - start)))});
    i = end;
    while (i < header.size() && header[i] == ' ') ++i;
  }
  return columns;
}

struct InfoRow {
  size_t line;
  int depth;
  std::string type;
  std::string var_name;
  std::string depth_idx;
  int64_t activations;
  int64_t params;
};

// The header's columns and where the ones read are (-1: absent).
struct InfoColumns {
  std::vector<Column> columns;
  int output_col = -1, params_col = -1, input_col = -1;

  // Column c of a row, trimmed; "" where the line ends before it.
  absl::string_view Field(absl::string_view line, int c) const {
    const size_t start = columns[c].start;
    if (start >= line.size()) return "";
    const size_t stop = static_cast<size_t>(c) + 1 < columns.size()
                            ? columns[c + 1].start - start
                            : absl::string_view::npos;
    return absl::StripAsciiWhitespace(line.substr(start, stop));
  }
};

absl::StatusOr<InfoColumns> ParseTorchinfoHeader(const std::vector<std::string>& lines,
                                                 size_t header, const Errors& errors) {
  InfoColumns t;
  t.columns = HeaderColumns(lines[header]);
  for (size_t c = 1; c < t.columns.size(); ++c) {
    if (t.columns[c].name == "Output Shape") t.output_col = static_cast<int>(c);
    if (t.columns[c].name == "Param #") t.params_col = static_cast<int>(c);
    if (t.columns[c].name == "Input Shape") t.input_col = static_cast<int>(c);
  }
  if (t.columns.empty() || !absl::StartsWith(t.columns[0].name, "Layer (type") ||
      t.params_col < 0) {
    return errors.At(header,
                     "not a torchinfo table header ('Layer (type...)' ... 'Param #')");
  }
  if (t.output_col < 0) {
    return errors.At(
        header,
        "the table has no 'Output Shape' column: torchinfo prints it only when "
        "summary() is given input_size or input_data");
  }
  return t;
}

// A row's label, into row: the depth from the tree prefix ("|    " per level, then
// "+-"/"`-" or ASCII "+ "), then "Conv2d (conv1): 1-1", "Conv2d: 1-1",
// "Conv2d (conv1)", "Conv2d" or "Cell: 2".
absl::Status ParseTreeLabel(absl::string_view label, size_t i, const Errors& errors,
                            InfoRow& row) {
  size_t p = 0;
  while (p < label.size() && (label[p] == ' ' || label[p] == '|')) ++p;
  if (p + 1 < label.size() && (label[p] == '+' || label[p] == '`') &&
      (label[p + 1] == '-' || label[p + 1] == ' ')) {
    if (p % 5 != 0) return errors.At(i, "the tree prefix is not aligned to a depth");
    row.depth = static_cast<int>(p / 5) + 1;
    label = absl::StripAsciiWhitespace(label.substr(p + 2));
  } else if (p != 0) {
    return errors.At(i, absl::StrCat("expected a tree row like '+-Conv2d: 1-1', got '",
                                     absl::StripAsciiWhitespace(label), "'"));
  }
  if (const size_t colon = label.rfind(": "); colon != absl::string_view::npos) {
    row.depth_idx = std::string(absl::StripAsciiWhitespace(label.substr(colon + 2)));
    label = label.substr(0, colon);
    int depth = -1;
    std::vector<absl::string_view> parts = absl::StrSplit(row.depth_idx, '-');
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &depth) || depth != row.depth) {
      return errors.At(i, absl::StrCat("depth-idx '", row.depth_idx,
                                       "' does not match the row's depth in the tree (",
                                       row.depth, ")"));
    }
  }
  if (const size_t paren = label.find(" ("); paren != absl::string_view::npos) {
    if (!absl::EndsWith(label, ")")) {
      return errors.At(i, absl::StrCat("cannot read the layer label '", label, "'"));
    }
    row.var_name = std::string(label.substr(paren + 2, label.size() - paren - 3));
    label = label.substr(0, paren);
  }
  if (label.empty() || absl::StrContains(label, ' ')) {
    return errors.At(i, absl::StrCat("cannot read the layer type from '", label, "'"));
  }
  row.type = std::string(label);
  return absl::OkStatus();
}

// A layer row's output elements per sample and parameter count, into row.
absl::Status ParseRowCounts(const InfoColumns& t, absl::string_view line,
                            absl::string_view output_text, size_t i, const Errors& errors,
                            InfoRow& row) {
  if (output_text != "--") {
    std::vector<Shape> shapes;
    if (!ParseShapes(output_text, &shapes)) return ShapeError(errors, i, output_text);
    if (!PerSample(shapes, &row.activations)) {
      return errors.At(
          i, absl::StrCat("output shape '", output_text, "' is implausibly large"));
    }
  }
  absl::string_view params_text = t.Field(line, t.params_col);
  if (params_text != "--" && params_text != "(recursive)") {
    // A frozen module's count is printed in parentheses.
    if (absl::StartsWith(params_text, "(") && absl::EndsWith(params_text, ")")) {
      params_text = params_text.substr(1, params_text.size() - 2);
    }
    if (!ParseCount(params_text, &row.params)) {
      return errors.At(i, absl::StrCat("parameter count '", t.Field(line, t.params_col),
                                       "' is not a number"));
    }
  }
  return absl::OkStatus();
}

// The sample's shape from the model's own row (its input shape, less the batch
// dimension), where it reads as one shape of positive sizes.
void ReadInputShape(absl::string_view input_text, std::vector<int64_t>& input_shape) {
  std::vector<Shape> shapes;
  if (input_text != "--" && ParseShapes(input_text, &shapes) && shapes.size() == 1 &&
      shapes[0].size() >= 2) {
    bool positive = true;
    for (size_t d = 1; d < shapes[0].size(); ++d) positive = positive && shapes[0][d] > 0;
    if (positive) input_shape.assign(shapes[0].begin() + 1, shapes[0].end());
  }
}

// The table's layer rows (verbose mode's parameter rows skipped), and the sample's
// input shape where the table gives it.
struct InfoTable {
  std::vector<InfoRow> rows;
  std::vector<int64_t> input_shape;
};

absl::StatusOr<InfoTable> ParseTorchinfoRows(const std::vector<std::string>& lines,
                                             size_t header, size_t end,
                                             const InfoColumns& t, const Errors& errors) {
  InfoTable table;
  std::vector<InfoRow>& rows = table.rows;
  for (size_t i = header + 2; i < end; ++i) {
    absl::string_view line = lines[i];
    if (absl::StripAsciiWhitespace(line).empty()) {
      return errors.At(i, "blank line inside the table");
    }
    for (size_t c = 1; c < t.columns.size(); ++c) {
      if (t.columns[c].start < line.size() && line[t.columns[c].start - 1] != ' ') {
        return errors.At(i, "the row does not line up with the header's columns");
      }
    }
    // Verbose mode's per-parameter rows ("└─weight") print no output shape; their
    // counts are already in the module's row above.
    const absl::string_view output_text = t.Field(line, t.output_col);
    if (output_text.empty()) {
      if (rows.empty()) return errors.At(i, "a parameter row before any layer row");
      continue;
    }
    InfoRow row{i, 0, "", "", "", 0, 0};
    GPUEST_RETURN_IF_ERROR(ParseTreeLabel(
        absl::StripTrailingAsciiWhitespace(line.substr(0, t.columns[1].start)), i, errors,
        row));
    if (!rows.empty() && row.depth > rows.back().depth + 1) {
      return errors.At(i, "the row is more than one level deeper than the row above it");
    }
    GPUEST_RETURN_IF_ERROR(ParseRowCounts(t, line, output_text, i, errors, row));
    if (t.input_col >= 0 && rows.empty() && row.depth == 0) {
      ReadInputShape(t.Field(line, t.input_col), table.input_shape);
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return errors.At(end, "the table has no layer rows");
  return table;
}

// Which rows are leaves (a leaf, or a row at the depth limit, carries its whole
// count), and whether a container row's count is its own (torchinfo's "leftover"
// count) or its children's sum, as the rows add up to Total params.
struct CountedRows {
  std::vector<bool> leaf;
  bool with_containers = false;
};

absl::StatusOr<CountedRows> CountRows(const std::vector<InfoRow>& rows,
                                      const Totals& totals, const Errors& errors) {
  CountedRows counted;
  counted.leaf.resize(rows.size());
  int64_t leaves_sum = 0, containers_sum = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    counted.leaf[r] = r + 1 == rows.size() || rows[r + 1].depth <= rows[r].depth;
    (counted.leaf[r] ? leaves_sum : containers_sum) += rows[r].params;
  }
  if (leaves_sum + containers_sum == totals.total) {
    counted.with_containers = true;
  } else if (leaves_sum == totals.total) {
    // Older torchinfo prints a container's recursive sum: its children already count it.
    counted.with_containers = false;
  } else {
    return errors.At(
        totals.total_line,
        absl::StrCat("Total params is ", totals.total, " but the rows add up to ",
                     leaves_sum + containers_sum, " (leaf rows alone: ", leaves_sum,
                     "); a row is missing or altered?"));
  }
  return counted;
}

// The layers that count: the leaves, and the containers with parameters of their own.
// A layer is named by its var names' path where the table gives any, else by its
// depth-idx.
v1::ModelDescription TorchinfoModel(const InfoTable& table, const CountedRows& counted) {
  v1::ModelDescription model = NewDescription();
  for (int64_t d : table.input_shape) model.add_input_shape(d);
  std::vector<std::string> path;  // var names by depth, for the layers' dotted names
  bool any_var_name = false;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const InfoRow& row = table.rows[r];
    path.resize(row.depth + 1);
    path[row.depth] = row.var_name;
    any_var_name = any_var_name || !row.var_name.empty();
    if (!counted.leaf[r] && !(counted.with_containers && row.params > 0)) continue;
    v1::Layer* layer = model.add_layers();
    layer->set_type(row.type);
    if (any_var_name && row.depth > 0) {
      layer->set_name(absl::StrJoin(path.begin() + 1, path.end(), "."));
    } else {
      layer->set_name(row.depth_idx);
    }
    layer->set_output_activations(row.activations);
    layer->set_parameters(row.params);
  }
  return model;
}

absl::StatusOr<v1::ModelDescription> ParseTorchinfo(const std::vector<std::string>& lines,
                                                    size_t header, const Errors& errors) {
  GPUEST_ASSIGN_OR_RETURN(const InfoColumns columns,
                          ParseTorchinfoHeader(lines, header, errors));
  GPUEST_ASSIGN_OR_RETURN(const size_t end, FindTableEnd(lines, header, errors));
  GPUEST_ASSIGN_OR_RETURN(const InfoTable table,
                          ParseTorchinfoRows(lines, header, end, columns, errors));
  size_t index = end + 1;
  GPUEST_ASSIGN_OR_RETURN(const Totals totals, ParseTotals(lines, index, errors));
  GPUEST_ASSIGN_OR_RETURN(const CountedRows counted,
                          CountRows(table.rows, totals, errors));
  if (auto status = CheckNoSecondTable(lines, index, errors); !status.ok()) return status;
  return TorchinfoModel(table, counted);
}

}  // namespace

absl::StatusOr<v1::ModelDescription> ParseModelSummaryAs(SummaryFormat format,
                                                         absl::string_view text,
                                                         absl::string_view source_name) {
  const Errors errors(source_name);
  const std::vector<std::string> lines = SplitLines(text);
  size_t header = 0;
  while (header < lines.size() && !IsHeader(lines[header])) ++header;
  if (header == lines.size()) {
    // Name the first line that looks like part of a table, for text cut off at the top.
    for (size_t i = 0; i < lines.size(); ++i) {
      absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
      const bool tree_row = absl::StartsWith(line, "+-") ||
                            absl::StartsWith(line, "`-") ||
                            absl::StartsWith(line, "|    ");
      const size_t open = line.find('[');
      const size_t dash = line.substr(0, open).rfind('-');
      const bool flat_row = open != absl::string_view::npos && open > 0 &&
                            dash != absl::string_view::npos && dash + 1 < open &&
                            absl::ascii_isdigit(line[dash + 1]);
      if (tree_row || flat_row || absl::StartsWith(line, "Total params")) {
        return errors.At(
            i,
            "a model-summary row without the table header above it "
            "('Layer (type)   Output Shape   Param #'); cut off at the top?");
      }
    }
    return errors.Whole(
        "not a model summary: no table header with 'Layer (type', 'Output Shape' and "
        "'Param #' (expected torchsummary or torchinfo output)");
  }
  return format == SummaryFormat::kTorchsummary ? ParseTorchsummary(lines, header, errors)
                                                : ParseTorchinfo(lines, header, errors);
}

absl::StatusOr<v1::ModelDescription> ParseModelSummary(absl::string_view text,
                                                       absl::string_view source_name) {
  // torchsummary right-aligns "Layer (type)" in its first column; torchinfo starts the
  // line with it.
  for (const std::string& line : SplitLines(text)) {
    if (IsHeader(line)) {
      return ParseModelSummaryAs(absl::ascii_isspace(line.front())
                                     ? SummaryFormat::kTorchsummary
                                     : SummaryFormat::kTorchinfo,
                                 text, source_name);
    }
  }
  return ParseModelSummaryAs(SummaryFormat::kTorchinfo, text, source_name);
}

}  // namespace gpuest::requests
