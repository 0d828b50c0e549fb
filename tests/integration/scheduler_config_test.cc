// deploy/kubernetes/scheduler-extender.yaml, the KubeSchedulerConfiguration the docs
// tell an operator to use, against the real server: the verbs it names are served at
// the path it names, and its Service forwards to the port it names.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using nlohmann::json;

// Every YAML document of the file, as JSON (Debian's python3-yaml reads the YAML).
std::vector<json> YamlDocuments(const std::string& path) {
  const testing::CommandResult r = testing::RunCommand(
      {GPUEST_PYTHON, "-c",
       "import json, sys, yaml\n"
       "print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
       path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json docs = json::parse(r.out, nullptr, false);
  EXPECT_TRUE(docs.is_array()) << r.out;
  return docs.is_array() ? docs.get<std::vector<json>>() : std::vector<json>{};
}

struct Url {
  std::string scheme, host, path;
  int port = 0;
};

Url ParseUrl(const std::string& url) {
  Url u;
  const size_t scheme_end = url.find("://");
  u.scheme = url.substr(0, scheme_end);
  std::string rest = url.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  u.path = slash == std::string::npos ? "" : rest.substr(slash);
  rest = rest.substr(0, slash);
  const size_t colon = rest.rfind(':');
  u.host = rest.substr(0, colon);
  u.port = colon == std::string::npos ? 80 : std::stoi(rest.substr(colon + 1));
  return u;
}

TEST(SchedulerConfig, TheExampleNamesWhatTheServerServes) {
  const std::vector<json> docs = YamlDocuments(std::string(GPUEST_DEPLOY_DIR) +
                                               "/kubernetes/scheduler-extender.yaml");
  const json* config = nullptr;
  const json* service = nullptr;
  for (const json& doc : docs) {
    if (doc.value("kind", "") == "KubeSchedulerConfiguration") config = &doc;
    if (doc.value("kind", "") == "Service") service = &doc;
  }
  ASSERT_NE(config, nullptr);
  ASSERT_NE(service, nullptr);
  EXPECT_EQ((*config)["apiVersion"], "kubescheduler.config.k8s.io/v1");
  ASSERT_EQ((*config)["extenders"].size(), 1u);
  const json& extender = (*config)["extenders"][0];
  // The fields kube-scheduler's Extender type has, spelled as it spells them.
  for (const auto& field : extender.items()) {
    static const std::set<std::string> known = {
        "urlPrefix",        "filterVerb", "prioritizeVerb",   "weight",
        "nodeCacheCapable", "ignorable",  "httpTimeout",      "enableHTTPS",
        "preemptVerb",      "bindVerb",   "managedResources", "tlsConfig"};
    EXPECT_TRUE(known.count(field.key())) << "unknown extender field " << field.key();
  }
  EXPECT_EQ(extender["ignorable"], true);  // Fail open.
  EXPECT_GT(extender["weight"].get<int>(), 0);
  EXPECT_TRUE(extender["nodeCacheCapable"].is_boolean());
  const std::string timeout = extender["httpTimeout"];
  ASSERT_EQ(timeout.back(), 's');
  const double seconds = std::stod(timeout.substr(0, timeout.size() - 1));
  EXPECT_GE(seconds, 1);
  EXPECT_LE(seconds, 30);

  const Url url = ParseUrl(extender["urlPrefix"]);
  EXPECT_EQ(url.scheme, "http");  // enableHTTPS false: the server speaks plain HTTP.
  EXPECT_EQ(extender.value("enableHTTPS", false), false);
  ASSERT_EQ((*service)["spec"]["ports"].size(), 1u);
  EXPECT_EQ((*service)["spec"]["ports"][0]["port"], url.port);
  EXPECT_EQ((*service)["spec"]["ports"][0]["targetPort"], url.port);
  EXPECT_EQ(url.host, (*service)["metadata"]["name"].get<std::string>() + "." +
                          (*service)["metadata"]["namespace"].get<std::string>() +
                          ".svc.cluster.local");

  // The real server, its extender on a free port (the URL's port is the pod's).
  auto server = testing::ServerProcess::Start({"--extender-listen=127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("127.0.0.1", (*server)->extender_port());
  http.set_read_timeout(60, 0);
  const json args = {{"Pod", {{"metadata", {{"name", "p"}, {"namespace", "default"}}}}},
                     {"Nodes", {{"items", {{{"metadata", {{"name", "n1"}}}}}}}},
                     {"NodeNames", nullptr}};
  // kube-scheduler posts to strings.TrimRight(urlPrefix, "/") + "/" + verb.
  auto filter =
      http.Post((url.path + "/" + extender["filterVerb"].get<std::string>()).c_str(),
                args.dump(), "application/json");
  ASSERT_TRUE(filter);
  EXPECT_EQ(filter->status, 200);
  const json filtered = json::parse(filter->body);
  EXPECT_EQ(filtered["Nodes"]["items"][0]["metadata"]["name"], "n1");
  auto prioritize =
      http.Post((url.path + "/" + extender["prioritizeVerb"].get<std::string>()).c_str(),
                args.dump(), "application/json");
  ASSERT_TRUE(prioritize);
  EXPECT_EQ(prioritize->status, 200);
  EXPECT_EQ(json::parse(prioritize->body), json::parse(R"([{"Host":"n1","Score":0}])"));
  // And a verb it does not serve is not found: the check above could fail.
  auto bind = http.Post((url.path + "/bind").c_str(), args.dump(), "application/json");
  ASSERT_TRUE(bind);
  EXPECT_EQ(bind->status, 404);
}

// Names only (nodeCacheCapable: true) is the default: gpuest.yaml's server answers from
// the node file its node-list sidecar writes, on the port the extender's URL names; the
// real server started so judges a node from the file and passes one not yet in it.
TEST(SchedulerConfig, NamesOnlyIsServedFromTheSidecarsNodeFile) {
  const std::vector<json> config = YamlDocuments(std::string(GPUEST_DEPLOY_DIR) +
                                                 "/kubernetes/scheduler-extender.yaml");
  const std::vector<json> deployment =
      YamlDocuments(std::string(GPUEST_DEPLOY_DIR) + "/kubernetes/gpuest.yaml");
  const json* extender = nullptr;
  for (const json& doc : config) {
    if (doc.value("kind", "") == "KubeSchedulerConfiguration") {
      extender = &doc["extenders"][0];
    }
  }
  ASSERT_NE(extender, nullptr);
  EXPECT_EQ((*extender)["nodeCacheCapable"], true);
  const json* pod = nullptr;
  for (const json& doc : deployment) {
    if (doc.value("kind", "") == "Deployment") pod = &doc["spec"]["template"]["spec"];
  }
  ASSERT_NE(pod, nullptr);
  std::string nodes_file, listen;
  for (const json& arg : (*pod)["containers"][0]["args"]) {
    const std::string a = arg;
    if (a.rfind("--extender-nodes-file=", 0) == 0) nodes_file = a.substr(a.find('=') + 1);
    if (a.rfind("--extender-listen=", 0) == 0) listen = a.substr(a.find('=') + 1);
  }
  ASSERT_FALSE(nodes_file.empty());
  EXPECT_EQ(std::stoi(listen.substr(listen.rfind(':') + 1)),
            ParseUrl((*extender)["urlPrefix"]).port);
  bool sidecar_writes_it = false;
  for (const json& c : (*pod)["containers"]) {
    if (c.value("name", "") != "node-list") continue;
    const std::string script = c["command"].back();
    sidecar_writes_it = script.find("kubectl get nodes -o json") != std::string::npos &&
                        script.find("mv ") != std::string::npos &&
                        script.find(nodes_file) != std::string::npos;
  }
  EXPECT_TRUE(sidecar_writes_it)
      << "no node-list container renaming a NodeList into " << nodes_file;

  // The server as deployed, with a node file as the sidecar writes it.
  const std::string file = ::testing::TempDir() + "/scheduler_config_nodes.json";
  const json full_gpu = {{"model", "a100-40gb"}, {"totalMiB", 40960}, {"freeMiB", 0}};
  std::ofstream(file) << json{
      {"kind", "NodeList"},
      {"items",
       {{{"metadata",
          {{"name", "full"},
           {"annotations", {{"gpuest.io/gpus", json{full_gpu}.dump()}}}}}}}}};
  auto server = testing::ServerProcess::Start(
      {"--extender-listen=127.0.0.1:0", "--extender-nodes-file=" + file});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("127.0.0.1", (*server)->extender_port());
  http.set_read_timeout(60, 0);
  const std::string description =
      testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json");
  const json args = {{"Pod",
                      {{"metadata",
                        {{"name", "p"},
                         {"namespace", "default"},
                         {"annotations", {{"gpuest.io/description", description}}}}}}},
                     {"Nodes", nullptr},
                     {"NodeNames", {"full", "joined-since"}}};
  auto filter = http.Post("/filter", args.dump(), "application/json");
  ASSERT_TRUE(filter);
  ASSERT_EQ(filter->status, 200) << filter->body;
  const json reply = json::parse(filter->body);
  EXPECT_EQ(reply["NodeNames"], json({"joined-since"})) << filter->body;
  EXPECT_TRUE(reply["FailedNodes"].contains("full") ||
              reply["FailedAndUnresolvableNodes"].contains("full"))
      << filter->body;
  std::remove(file.c_str());
}

}  // namespace
}  // namespace gpuest
