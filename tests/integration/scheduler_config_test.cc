// deploy/kubernetes/scheduler-extender.yaml, the KubeSchedulerConfiguration the docs
// tell an operator to use, against the real server: the verbs it names are served at
// the path it names, and its Service forwards to the port it names.
#include <cmath>
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

}  // namespace
}  // namespace gpuest
