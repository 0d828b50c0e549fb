#include "integrations/kubernetes/extender_args.h"

#include <simdjson.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_guard.h"

namespace gpuest::kubernetes {

static_assert(kExtenderBodyPadding >= simdjson::SIMDJSON_PADDING);

namespace {

namespace od = simdjson::ondemand;

// Errors of the simdjson kind, as a refusal of the body naming where.
absl::Status Refuse(simdjson::error_code error, const std::string& where) {
  return absl::InvalidArgumentError(
      absl::StrCat("ExtenderArgs", where.empty() ? "" : ".", where, ": ",
                   error == simdjson::INCORRECT_TYPE ? "not of the expected JSON type"
                                                     : simdjson::error_message(error)));
}

#define GPUEST_JSON(expr, where)                                       \
  do {                                                                 \
    if (const simdjson::error_code e = (expr); e != simdjson::SUCCESS) \
      return Refuse(e, std::string(where));                            \
  } while (0)

// The entries of a labels or annotations map that the extender reads; others skipped.
// A value of another type than string is left out, as Kubernetes never writes one.
absl::Status ReadStringMap(
    od::object map, std::string_view where,
    const std::vector<std::pair<std::string_view, std::optional<std::string>*>>& want) {
  for (auto field : map) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), where);
    for (const auto& [name, out] : want) {
      if (key != name) continue;
      std::string_view text;
      if (field.value().get_string().get(text) == simdjson::SUCCESS)
        *out = std::string(text);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadNodeMetadata(od::object metadata, NodeKeys& keys) {
  for (auto field : metadata) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), "Nodes.items[].metadata");
    if (key == "name") {
      std::string_view name;
      if (field.value().get_string().get(name) == simdjson::SUCCESS) keys.name = name;
    } else if (key == "labels" || key == "annotations") {
      od::object map;
      if (field.value().get_object().get(map) != simdjson::SUCCESS) continue;
      const bool labels = key == "labels";
      absl::Status read =
          labels ? ReadStringMap(map, "Nodes.items[].metadata.labels",
                                 {{kGpuModelLabel, &keys.model_label},
                                  {kGfdProductLabel, &keys.gfd_product},
                                  {kGfdMemoryLabel, &keys.gfd_memory},
                                  {kGfdCountLabel, &keys.gfd_count}})
                 : ReadStringMap(map, "Nodes.items[].metadata.annotations",
                                 {{kNodeGpusAnnotation, &keys.gpus_annotation}});
      if (!read.ok()) return read;
    }
  }
  return absl::OkStatus();
}

// Nodes.items[i]: its text, then its metadata (the object is read twice: once whole
// for its text, once for the keys; the second pass touches metadata only).
absl::StatusOr<ExtenderNode> ReadNode(od::value item, size_t i) {
  const std::string where = absl::StrCat("Nodes.items[", i, "]");
  od::object node;
  GPUEST_JSON(item.get_object().get(node), where);
  ExtenderNode out;
  GPUEST_JSON(node.raw_json().get(out.json), where);
  // raw_json() runs to the next token: the whitespace before it is not the node's.
  while (!out.json.empty() && (out.json.back() == ' ' || out.json.back() == '\n' ||
                               out.json.back() == '\r' || out.json.back() == '\t')) {
    out.json.remove_suffix(1);
  }
  GPUEST_JSON(node.reset().error(), where);
  for (auto field : node) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), where);
    if (key != "metadata") continue;
    od::object metadata;
    if (field.value().get_object().get(metadata) != simdjson::SUCCESS) continue;
    if (absl::Status s = ReadNodeMetadata(metadata, out.keys); !s.ok()) return s;
  }
  return out;
}

// The on-demand parser checks what it reads; what it skips, and the filter's reply
// echoes (each Node's text, the NodeList around the items), must be JSON too, or the
// reply is not: each is checked whole by the DOM parser (strings, numbers, literals,
// nesting to kMaxJsonDepth), one node at a time.
class EchoCheck {
 public:
  absl::Status Check(std::string_view text, const std::string& where) {
    if ((text.size() > parser_.capacity() ||
         parser_.max_depth() != common::kMaxJsonDepth) &&
        parser_.allocate(std::max(text.size(), size_t{64} << 10),
                         common::kMaxJsonDepth) != simdjson::SUCCESS) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ExtenderArgs.", where, ": cannot allocate its check"));
    }
    // The bytes after text are the body's (its padding at the end): readable.
    const simdjson::error_code error =
        parser_.parse(text.data(), text.size(), /*realloc_if_needed=*/false).error();
    if (error == simdjson::SUCCESS) return absl::OkStatus();
    if (error == simdjson::DEPTH_ERROR) {
      return absl::InvalidArgumentError(
          absl::StrCat("ExtenderArgs.", where, ": JSON nested more than ",
                       common::kMaxJsonDepth, " levels deep"));
    }
    return absl::InvalidArgumentError(absl::StrCat("ExtenderArgs.", where,
                                                   ": not valid JSON (",
                                                   simdjson::error_message(error), ")"));
  }

 private:
  simdjson::dom::parser parser_;
};

bool IsNull(od::value& value) {
  bool null = false;
  return value.is_null().get(null) == simdjson::SUCCESS && null;
}

// One container's nvidia.com/gpu limit: a quantity string ("2"), or a number where a
// client wrote one; 0 when it has none.
absl::StatusOr<uint32_t> ContainerGpus(od::object container) {
  constexpr char kWhere[] = "Pod.spec.containers[].resources.limits[nvidia.com/gpu]";
  for (auto field : container) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), "Pod.spec.containers[]");
    if (key != "resources") continue;
    od::object resources;
    if (field.value().get_object().get(resources) != simdjson::SUCCESS) return 0;
    for (auto part : resources) {
      GPUEST_JSON(part.unescaped_key().get(key), "Pod.spec.containers[].resources");
      if (key != "limits") continue;
      od::object limits;
      if (part.value().get_object().get(limits) != simdjson::SUCCESS) return 0;
      for (auto limit : limits) {
        GPUEST_JSON(limit.unescaped_key().get(key),
                    "Pod.spec.containers[].resources.limits");
        if (key != kGpuResource) continue;
        std::string_view text;
        uint64_t count = 0;
        od::value value = limit.value();
        if (value.get_string().get(text) == simdjson::SUCCESS) {
          // simdjson's views are std::string_view; this abseil's string_view is its own.
          const std::string quantity(text.substr(0, 32));
          if (text.size() > quantity.size() || !absl::SimpleAtoi(quantity, &count)) {
            return absl::InvalidArgumentError(
                absl::StrCat(kWhere, ": '", quantity, "' is not a whole number"));
          }
        } else if (value.get_uint64().get(count) != simdjson::SUCCESS) {
          return absl::InvalidArgumentError(
              absl::StrCat(kWhere, ": a whole number or its string is needed"));
        }
        if (count > kMaxPodGpus) {
          return absl::InvalidArgumentError(
              absl::StrCat(kWhere, ": at most ", kMaxPodGpus, ", got ", count));
        }
        return static_cast<uint32_t>(count);
      }
    }
  }
  return 0;
}

// The pod's GPUs: its containers' limits, summed (extended resources are asked for as
// limits, and requests equal them). Init containers hold theirs only before the
// containers start: left out.
absl::Status ReadPodGpus(od::object spec, ExtenderArgs& args) {
  for (auto field : spec) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), "Pod.spec");
    if (key != "containers") continue;
    od::array containers;
    if (field.value().get_array().get(containers) != simdjson::SUCCESS) continue;
    for (auto item : containers) {
      od::object container;
      if (item.get_object().get(container) != simdjson::SUCCESS) continue;
      absl::StatusOr<uint32_t> gpus = ContainerGpus(container);
      if (!gpus.ok()) return gpus.status();
      args.gpus_requested += *gpus;
      if (args.gpus_requested > kMaxPodGpus) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Pod.spec.containers: more than ", kMaxPodGpus, " nvidia.com/gpu in all"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPod(od::object pod, ExtenderArgs& args) {
  std::string name = "?", space = "default";
  for (auto field : pod) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), "Pod");
    if (key == "spec") {
      od::object spec;
      GPUEST_JSON(field.value().get_object().get(spec), "Pod.spec");
      if (absl::Status s = ReadPodGpus(spec, args); !s.ok()) return s;
      continue;
    }
    if (key != "metadata") continue;
    od::object metadata;
    GPUEST_JSON(field.value().get_object().get(metadata), "Pod.metadata");
    for (auto entry : metadata) {
      std::string_view k;
      GPUEST_JSON(entry.unescaped_key().get(k), "Pod.metadata");
      std::string_view text;
      if (k == "name" && entry.value().get_string().get(text) == simdjson::SUCCESS) {
        name = text;
      } else if (k == "namespace" &&
                 entry.value().get_string().get(text) == simdjson::SUCCESS) {
        space = text;
      } else if (k == "annotations") {
        od::object annotations;
        if (entry.value().get_object().get(annotations) != simdjson::SUCCESS) continue;
        if (absl::Status s = ReadStringMap(annotations, "Pod.metadata.annotations",
                                           {{kDescriptionAnnotation, &args.description}});
            !s.ok()) {
          return s;
        }
      }
    }
  }
  args.pod = absl::StrCat(space, "/", name);
  return absl::OkStatus();
}

// Nodes, a v1.NodeList: its text and its items' (views into the body), then each item.
absl::Status ReadNodeList(od::value value, ExtenderArgs& args) {
  od::object list;
  if (value.get_object().get(list) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("ExtenderArgs.Nodes: not a v1.NodeList");
  }
  GPUEST_JSON(list.raw_json().get(args.node_list_json), "Nodes");
  GPUEST_JSON(list.reset().error(), "Nodes");
  bool have_items = false;
  for (auto entry : list) {
    std::string_view k;
    GPUEST_JSON(entry.unescaped_key().get(k), "Nodes");
    if (k != "items") continue;
    od::array items;
    if (entry.value().get_array().get(items) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("ExtenderArgs.Nodes: not a v1.NodeList");
    }
    GPUEST_JSON(items.raw_json().get(args.items_json), "Nodes.items");
    GPUEST_JSON(items.reset().error(), "Nodes.items");
    have_items = true;
    size_t i = 0;
    for (auto item : items) {
      od::value node;
      GPUEST_JSON(item.get(node), absl::StrCat("Nodes.items[", i, "]"));
      absl::StatusOr<ExtenderNode> read = ReadNode(node, i++);
      if (!read.ok()) return read.status();
      args.nodes.push_back(*std::move(read));
    }
  }
  if (!have_items) {
    return absl::InvalidArgumentError("ExtenderArgs.Nodes: not a v1.NodeList");
  }
  return absl::OkStatus();
}

absl::Status ReadNodeNames(od::value value, ExtenderArgs& args) {
  od::array names;
  if (value.get_array().get(names) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("ExtenderArgs.NodeNames: not a list of strings");
  }
  for (auto name : names) {
    std::string_view text;
    if (name.get_string().get(text) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("ExtenderArgs.NodeNames: not a list of strings");
    }
    args.names.emplace_back(text);
  }
  args.names_only = true;
  return absl::OkStatus();
}

// What the filter's reply echoes of Nodes, checked whole (EchoCheck): each Node's text,
// then the NodeList around its items.
absl::Status CheckEchoes(const ExtenderArgs& args) {
  EchoCheck check;
  for (size_t i = 0; i < args.nodes.size(); ++i) {
    absl::Status valid =
        check.Check(args.nodes[i].json, absl::StrCat("Nodes.items[", i, "]"));
    if (!valid.ok()) return valid;
  }
  // On malformed JSON the on-demand parser's raw span of the list can end before its
  // items (a fuzzer found one): that is a malformed body, never an out-of-range copy.
  const std::string_view list = args.node_list_json;
  if (args.items_json.data() < list.data() ||
      args.items_json.data() + args.items_json.size() > list.data() + list.size()) {
    return absl::InvalidArgumentError("ExtenderArgs.Nodes: not valid JSON");
  }
  const size_t at = static_cast<size_t>(args.items_json.data() - list.data());
  std::string around = PaddedCopy(list.substr(0, at));
  around += "[]";
  around += list.substr(at + args.items_json.size());
  around.reserve(around.size() + kExtenderBodyPadding);
  return check.Check(around, "Nodes");
}

}  // namespace

absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string& body) {
  // Before parsing: a refusal that says the depth bound (simdjson would stop at 1,024),
  // and no key named twice (simdjson's on-demand reader sees every copy; which one
  // counts would depend on the order of our reads).
  if (absl::Status shape = common::CheckJsonText(body, "the body"); !shape.ok())
    return shape;
  const size_t length = body.size();
  body.reserve(length + kExtenderBodyPadding);
  od::parser parser;
  od::document doc;
  if (parser.iterate(simdjson::padded_string_view(body.data(), length, body.capacity()))
          .get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the body is not an ExtenderArgs JSON object");
  }
  od::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the body is not an ExtenderArgs JSON object");
  }
  ExtenderArgs args;
  bool have_pod = false, have_nodes = false;
  for (auto field : top) {
    std::string_view key;
    GPUEST_JSON(field.unescaped_key().get(key), "");
    od::value value;
    GPUEST_JSON(field.value().get(value), key);
    if (key == "Pod") {
      od::object pod;
      if (value.get_object().get(pod) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError("ExtenderArgs.Pod: missing or not an object");
      }
      if (absl::Status s = ReadPod(pod, args); !s.ok()) return s;
      have_pod = true;
    } else if (key == "Nodes" && !IsNull(value)) {
      if (absl::Status s = ReadNodeList(value, args); !s.ok()) return s;
      have_nodes = true;
    } else if (key == "NodeNames" && !IsNull(value)) {
      if (absl::Status s = ReadNodeNames(value, args); !s.ok()) return s;
    }
  }
  if (!have_pod) {
    return absl::InvalidArgumentError("ExtenderArgs.Pod: missing or not an object");
  }
  if (have_nodes) {
    args.names_only = false;
    args.names.clear();
    if (absl::Status s = CheckEchoes(args); !s.ok()) return s;
  } else if (!args.names_only) {
    return absl::InvalidArgumentError(
        "ExtenderArgs: neither Nodes nor NodeNames is given");
  }
  return args;
}

std::string PaddedCopy(std::string_view text) {
  std::string copy;
  copy.reserve(text.size() + kExtenderBodyPadding);
  copy.append(text);
  return copy;
}

}  // namespace gpuest::kubernetes
