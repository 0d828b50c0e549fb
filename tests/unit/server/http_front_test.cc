// server/http_front: one front in the test process on 127.0.0.1:0 with small routes of
// the test's own, called over real HTTP (cpp-httplib) and HTTPS (a throw-away PKI):
// what it serves, what it refuses from the headers before reading a body, the limits
// it holds bodies to, the deadline a route's work gets, the dispatcher's refusals as
// 503s, the request metrics, HTTPS with and without client certificates, a rotated
// certificate, and Stop. The time bounds of seconds (headers, idle connections, a
// request's whole time) are the hostile tests' (tests/hostile).
#include "server/http_front.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/intake.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/worker_pool.h"
#include "tests/support/pki.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"

namespace gpuest::server {
namespace {

using nlohmann::json;

// The nice value of the calling thread.
int ThisThreadsNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}

// What the routes saw, for the test to read after the call.
struct Seen {
  absl::Mutex mu;
  int calls ABSL_GUARDED_BY(mu) = 0;
  std::string body ABSL_GUARDED_BY(mu);
  size_t spare_capacity ABSL_GUARDED_BY(mu) = 0;
  absl::Duration deadline_left ABSL_GUARDED_BY(mu);  // At the work's start.
  int nice ABSL_GUARDED_BY(mu) = 0;

  int Calls() {
    absl::MutexLock lock(&mu);
    return calls;
  }
};

// The dispatcher's parts as the server makes them, small.
struct Dispatch {
  explicit Dispatch(int64_t max_bytes_in_flight = 1 << 20, int blocking_share = 4)
      : metrics(Metrics::Create()),
        pool(2, 8),
        intake(max_bytes_in_flight, 2),
        dispatcher(*metrics, pool, intake, /*max_response_bytes=*/1 << 20,
                   /*inline_max_request_bytes=*/0, blocking_share) {}

  std::optional<double> Sample(const std::string& name,
                               const std::map<std::string, std::string>& labels) {
    auto samples = testing::ParsePrometheusText(metrics->Text());
    EXPECT_TRUE(samples.ok()) << samples.status();
    if (!samples.ok()) return std::nullopt;
    return testing::SumSamples(*samples, name, labels);
  }

  std::unique_ptr<Metrics> metrics;
  WorkerPool pool;
  Intake intake;
  CallDispatcher dispatcher;
};

HttpFrontOptions Options() {
  HttpFrontOptions options;
  options.name = "test front";
  options.flag = "--test-listen";
  options.listen_address = "127.0.0.1:0";
  options.max_body_bytes = 1024;
  options.body_padding = 64;
  options.timeout = absl::Seconds(1);
  options.error_body = [](const std::string& why) { return json{{"Error", why}}.dump(); };
  options.pages.push_back(
      {"/page", "text/plain; charset=utf-8", [] { return "a page"; }});
  return options;
}

// POST /echo answers its body (on method ExtenderFilter); /invalid answers 422 with
// code InvalidArgument (ListEstimators); /wait (ExtenderPrioritize) holds until its
// deadline, or when given release, until release is notified, whatever its deadline.
std::vector<HttpRoute> Routes(Seen& seen, absl::Notification* entered = nullptr,
                              absl::Notification* release = nullptr) {
  auto record = [&seen](const std::string& body, const common::WorkDeadline& deadline) {
    absl::MutexLock lock(&seen.mu);
    ++seen.calls;
    seen.body = body;
    seen.spare_capacity = body.capacity() - body.size();
    seen.deadline_left = deadline.deadline() - absl::Now();
    seen.nice = ThisThreadsNice();
  };
  return {
      {"/echo", RpcMethod::kExtenderFilter,
       [record](std::string body, const common::WorkDeadline& deadline) {
         record(body, deadline);
         return common::HttpReply{200, body};
       }},
      {"/invalid", RpcMethod::kListEstimators,
       [record](std::string body, const common::WorkDeadline& deadline) {
         record(body, deadline);
         return common::HttpReply{422, R"({"Error":"the body is wrong"})",
                                  absl::StatusCode::kInvalidArgument};
       }},
      {"/wait", RpcMethod::kExtenderPrioritize,
       [record, entered, release](std::string body,
                                  const common::WorkDeadline& deadline) {
         record(body, deadline);
         if (entered != nullptr) entered->Notify();
         if (release != nullptr) {
           release->WaitForNotificationWithTimeout(absl::Seconds(3));
           return common::HttpReply{200, R"({"released":true})"};
         }
         while (deadline.Check().ok()) absl::SleepFor(absl::Milliseconds(5));
         return common::HttpReply{504, R"({"Error":"stopped at the deadline"})",
                                  absl::StatusCode::kDeadlineExceeded};
       }},
  };
}

std::unique_ptr<HttpFront> StartOrDie(HttpFrontOptions options,
                                      std::vector<HttpRoute> routes,
                                      CallDispatcher* dispatcher) {
  auto front = HttpFront::Start(std::move(options), std::move(routes), dispatcher);
  EXPECT_TRUE(front.ok()) << front.status();
  if (!front.ok()) return nullptr;
  EXPECT_GT((*front)->port(), 0);
  return *std::move(front);
}

std::unique_ptr<httplib::Client> Http(const HttpFront& front) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", front.port());
  client->set_read_timeout(5, 0);
  return client;
}

// Sends bytes on a fresh connection and reads until the front closes it (or 2 s).
std::string RawExchange(int port, const std::string& bytes) {
  const int fd = testing::OpenConnection(port, bytes);
  EXPECT_GE(fd, 0);
  if (fd < 0) return "";
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    answer.append(buffer, n);
  close(fd);
  return answer;
}

std::string ErrorOf(const httplib::Result& r) {
  const json body = json::parse(r->body, nullptr, false);
  return body.is_object() && body.contains("Error")
             ? body["Error"].get<std::string>()
             : "(not an error body: " + r->body + ")";
}

TEST(HttpFront, ServesHealthzItsPagesAndItsRoutes) {
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  auto http = Http(*front);

  auto healthz = http->Get("/healthz");
  ASSERT_TRUE(healthz) << httplib::to_string(healthz.error());
  EXPECT_EQ(healthz->status, 200);
  EXPECT_EQ(healthz->body, "ok\n");
  EXPECT_EQ(healthz->get_header_value("Content-Type"), "text/plain");

  auto page = http->Get("/page");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, "a page");
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/plain; charset=utf-8");

  const std::string body = R"({"hello":"front"})";
  auto echo = http->Post("/echo", body, "application/json; charset=utf-8");
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->status, 200);
  EXPECT_EQ(echo->body, body);
  EXPECT_EQ(echo->get_header_value("Content-Type"), "application/json");
  {
    absl::MutexLock lock(&seen.mu);
    EXPECT_EQ(seen.calls, 1);
    EXPECT_EQ(seen.body, body);
    // The parser's room past the end (HttpFrontOptions::body_padding) came with it.
    EXPECT_GE(seen.spare_capacity, 64u);
  }
  // The call went through the dispatcher: counted by its route's method.
  EXPECT_EQ(
      d.Sample("gpuest_requests_total", {{"method", "extender/filter"}, {"code", "OK"}}),
      1);
  EXPECT_EQ(d.Sample("gpuest_request_bytes_in_flight", {}), 0);  // Released after.
  // Pages and /healthz are not calls.
  EXPECT_EQ(d.Sample("gpuest_requests_total", {{"code", "OK"}}), 1);
}

TEST(HttpFront, TheRoutesStatusAndCodePassThrough) {
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  auto r = Http(*front)->Post("/invalid", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(ErrorOf(r), "the body is wrong");
  EXPECT_EQ(d.Sample("gpuest_requests_total",
                     {{"method", "ListEstimators"}, {"code", "INVALID_ARGUMENT"}}),
            1);
}

TEST(HttpFront, RefusesFromTheHeadersWithoutCallingTheRoute) {
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  auto http = Http(*front);
  struct Case {
    std::string what;
    httplib::Result result;
    int status;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({"unknown path", http->Post("/nowhere", "{}", "application/json"), 404,
                   "the test front serves POST /echo, POST /invalid, POST /wait, GET "
                   "/page, GET /healthz"});
  cases.push_back({"GET of a route", http->Get("/echo"), 405, "/echo takes POST"});
  cases.push_back({"not JSON", http->Post("/echo", "a=b", "text/plain"), 415,
                   "the body is sent as 'text/plain'"});
  cases.push_back({"no type", http->Post("/echo", "{}", ""), 415, "takes JSON"});
  cases.push_back(
      {"gzip",
       http->Post("/echo", {{"Content-Encoding", "gzip"}}, "{}", "application/json"), 415,
       "Content-Encoding 'gzip' is not accepted"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_TRUE(c.result) << httplib::to_string(c.result.error());
    EXPECT_EQ(c.result->status, c.status);
    EXPECT_TRUE(absl::StrContains(ErrorOf(c.result), c.says)) << c.result->body;
    // The options' error shape and type.
    EXPECT_EQ(c.result->get_header_value("Content-Type"), "application/json");
  }
  // A chunked body and one without a length, as their headers alone (the refusal
  // closes the connection before any body would be read).
  const std::string chunked =
      RawExchange(front->port(),
                  "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(chunked, "HTTP/1.1 411")) << chunked;
  EXPECT_TRUE(absl::StrContains(chunked, "a chunked body is not accepted")) << chunked;
  const std::string no_length =
      RawExchange(front->port(),
                  "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "\r\n");
  EXPECT_TRUE(absl::StartsWith(no_length, "HTTP/1.1 411")) << no_length;
  EXPECT_TRUE(absl::StrContains(no_length, "the request has no Content-Length"))
      << no_length;
  EXPECT_EQ(seen.Calls(), 0);
  // Still serving, on a fresh connection.
  auto echo = Http(*front)->Post("/echo", "{}", "application/json");
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->status, 200);
}

TEST(HttpFront, ABodyUpToTheLimitIsTakenAndALargerOneRefusedUnread) {
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  const size_t limit = Options().max_body_bytes;
  // A JSON string of exactly n bytes.
  auto body_of = [](size_t n) { return "\"" + std::string(n - 2, 'x') + "\""; };

  auto at_limit = Http(*front)->Post("/echo", body_of(limit), "application/json");
  ASSERT_TRUE(at_limit);
  EXPECT_EQ(at_limit->status, 200);
  EXPECT_EQ(at_limit->body.size(), limit);
  EXPECT_EQ(seen.Calls(), 1);

  // Up to twice the limit the body is read and dropped, so the client, which sends it
  // all before reading, gets the answer.
  for (size_t size : {limit + 1, limit * 3 / 2}) {
    auto over = Http(*front)->Post("/echo", body_of(size), "application/json");
    ASSERT_TRUE(over) << size << ": " << httplib::to_string(over.error());
    EXPECT_EQ(over->status, 413);
    EXPECT_EQ(ErrorOf(over),
              absl::StrCat("a body of ", size, " bytes exceeds the limit of ", limit,
                           " bytes"));
  }
  EXPECT_EQ(seen.Calls(), 1);
}

TEST(HttpFront, BytesThatDoNotFitTheInFlightBoundAre503UnreadAndCounted) {
  Dispatch d(/*max_bytes_in_flight=*/100);
  Seen seen;
  auto front = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  {
    // Another entry point holds 60 of the 100 bytes.
    auto held = d.dispatcher.HoldRequestBytes(RpcMethod::kEstimate, 60);
    ASSERT_TRUE(held.ok()) << held.status();
    const std::string body = "\"" + std::string(48, 'x') + "\"";  // 50 bytes.
    auto refused = Http(*front)->Post("/echo", body, "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 503);
    EXPECT_TRUE(absl::StartsWith(ErrorOf(refused), "gpuest: the server holds 60 bytes"))
        << refused->body;
    EXPECT_EQ(seen.Calls(), 0);
    EXPECT_EQ(d.Sample("gpuest_requests_shed_total",
                       {{"method", "extender/filter"}, {"reason", "bytes_in_flight"}}),
              1);
    EXPECT_EQ(d.Sample("gpuest_requests_total",
                       {{"method", "extender/filter"}, {"code", "RESOURCE_EXHAUSTED"}}),
              1);
    EXPECT_EQ(d.Sample("gpuest_request_bytes_in_flight", {}), 60);
  }
  // Released: the same body is taken.
  EXPECT_EQ(d.Sample("gpuest_request_bytes_in_flight", {}), 0);
  auto taken =
      Http(*front)->Post("/echo", "\"" + std::string(48, 'x') + "\"", "application/json");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->status, 200);
}

TEST(HttpFront, ARoutesWorkHasTheTimeoutFromItsHeadersAsItsDeadline) {
  Dispatch d;
  Seen seen;
  HttpFrontOptions options = Options();
  options.timeout = absl::Milliseconds(300);
  auto front = StartOrDie(options, Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  const absl::Time sent = absl::Now();
  auto r = Http(*front)->Post("/wait", "{}", "application/json");
  const absl::Duration took = absl::Now() - sent;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504);
  EXPECT_EQ(ErrorOf(r), "stopped at the deadline");
  EXPECT_GE(took, absl::Milliseconds(280));
  EXPECT_LT(took, absl::Milliseconds(1300));
  {
    absl::MutexLock lock(&seen.mu);
    EXPECT_LE(seen.deadline_left, options.timeout);
    EXPECT_GT(seen.deadline_left, options.timeout - absl::Milliseconds(200));
  }
  EXPECT_EQ(d.Sample("gpuest_requests_total",
                     {{"method", "extender/prioritize"}, {"code", "DEADLINE_EXCEEDED"}}),
            1);
}

TEST(HttpFront, ACallBeyondTheEntryPointsShareIs503WhenItsTimeRunsOut) {
  Dispatch d(1 << 20, /*blocking_share=*/1);
  Seen seen;
  absl::Notification entered, release;
  HttpFrontOptions options = Options();
  options.timeout = absl::Milliseconds(300);
  auto front = StartOrDie(options, Routes(seen, &entered, &release), &d.dispatcher);
  ASSERT_NE(front, nullptr);

  // The one place of the share, held by a call at work until the test releases it.
  std::optional<httplib::Result> holding;
  std::thread first(
      [&] { holding.emplace(Http(*front)->Post("/wait", "{}", "application/json")); });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(2)));
  auto refused = Http(*front)->Post("/echo", "{}", "application/json");
  release.Notify();
  first.join();

  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_TRUE(absl::StartsWith(
      ErrorOf(refused), "gpuest: the server is busy with this entry point's calls"))
      << refused->body;
  EXPECT_EQ(d.Sample("gpuest_requests_shed_total",
                     {{"method", "extender/filter"}, {"reason", "entry_point_share"}}),
            1);
  ASSERT_TRUE(holding.has_value() && *holding);
  EXPECT_EQ((*holding)->status, 200);
  EXPECT_EQ((*holding)->body, R"({"released":true})");
  EXPECT_EQ(seen.Calls(), 1);  // The refused call never reached its route.
}

TEST(HttpFront, ALowPriorityFrontsWorkRunsAtNiceTen) {
  const int process_nice = ThisThreadsNice();
  for (bool lower : {false, true}) {
    SCOPED_TRACE(lower ? "lower_priority" : "normal priority");
    Dispatch d;
    Seen seen;
    HttpFrontOptions options = Options();
    options.lower_priority = lower;
    auto front = StartOrDie(options, Routes(seen), &d.dispatcher);
    ASSERT_NE(front, nullptr);
    auto r = Http(*front)->Post("/echo", "{}", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    absl::MutexLock lock(&seen.mu);
    if (lower) {
      EXPECT_EQ(seen.nice, std::max(10, process_nice));
    } else {
      EXPECT_EQ(seen.nice, process_nice);
    }
  }
}

TEST(HttpFront, StopLetsTheCallAtWorkFinishThenRefusesConnections) {
  Dispatch d;
  Seen seen;
  absl::Notification entered, release;
  auto front = StartOrDie(Options(), Routes(seen, &entered, &release), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  const int port = front->port();
  std::optional<httplib::Result> answer;
  std::thread call(
      [&] { answer.emplace(Http(*front)->Post("/wait", "{}", "application/json")); });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(2)));
  std::thread stopper([&] { front->Stop(); });
  absl::SleepFor(absl::Milliseconds(100));
  release.Notify();
  stopper.join();
  call.join();
  // The caller got the route's whole answer, not a cut connection.
  ASSERT_TRUE(answer.has_value() && *answer);
  EXPECT_EQ((*answer)->status, 200);
  EXPECT_EQ((*answer)->body, R"({"released":true})");
  // The route's work ran to its own end (released), not cut off.
  {
    absl::MutexLock lock(&seen.mu);
    EXPECT_EQ(seen.calls, 1);
  }
  EXPECT_EQ(d.Sample("gpuest_requests_total",
                     {{"method", "extender/prioritize"}, {"code", "OK"}}),
            1);
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1, 0);
  EXPECT_FALSE(after.Get("/healthz"));
  front->Stop();  // Idempotent.
}

TEST(HttpFront, StartRefusesWhatCannotServeNamingTheFlag) {
  Dispatch d;
  Seen seen;
  auto refused = [&](HttpFrontOptions options, absl::StatusCode code,
                     const std::string& says, bool with_dispatcher = true) {
    auto front = HttpFront::Start(std::move(options), Routes(seen),
                                  with_dispatcher ? &d.dispatcher : nullptr);
    ASSERT_FALSE(front.ok()) << says;
    EXPECT_EQ(front.status().code(), code) << front.status();
    EXPECT_TRUE(absl::StrContains(front.status().message(), says)) << front.status();
  };
  HttpFrontOptions options = Options();
  options.listen_address = "127.0.0.1";
  refused(options, absl::StatusCode::kInvalidArgument, "--test-listen: not host:port");
  options.listen_address = "127.0.0.1:65536";
  refused(options, absl::StatusCode::kInvalidArgument, "--test-listen: not host:port");

  options = Options();
  options.tls_cert_file = "/nonexistent/cert.pem";
  refused(options, absl::StatusCode::kInvalidArgument,
          "--test-listen: HTTPS needs both a certificate and its key");
  options = Options();
  options.tls_client_ca_file = "/nonexistent/ca.pem";
  refused(options, absl::StatusCode::kInvalidArgument,
          "--test-listen: a client CA needs HTTPS");
  refused(Options(), absl::StatusCode::kInternal, "routes need a dispatcher",
          /*with_dispatcher=*/false);

  // A port already taken: Unavailable, not a second listener beside the first.
  auto first = StartOrDie(Options(), Routes(seen), &d.dispatcher);
  ASSERT_NE(first, nullptr);
  options = Options();
  options.listen_address = absl::StrCat("127.0.0.1:", first->port());
  refused(options, absl::StatusCode::kUnavailable, "cannot serve the test front on");

  // A front of pages alone needs no dispatcher.
  auto pages = HttpFront::Start(Options(), {}, nullptr);
  ASSERT_TRUE(pages.ok()) << pages.status();
  auto page = httplib::Client("127.0.0.1", (*pages)->port()).Get("/page");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->body, "a page");
}

// HTTPS, with a throw-away PKI: the server's leaf for 127.0.0.1 signed by "ca", a
// client certificate it signed, and "other-ca" with a leaf of its own (a rotated
// server certificate, or a stranger's client certificate). Each test makes only the
// files it uses (openssl takes a while).
class HttpsFrontTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new testing::Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  // Makes name (a CA, or a leaf that ca signs) unless it is made already.
  static void Make(const std::string& name, const std::string& ca = "") {
    if (std::filesystem::exists(pki_->Path(name + ".pem"))) return;
    if (ca.empty()) {
      pki_->MakeCa(name);
    } else {
      Make(ca);
      pki_->MakeLeaf(name, ca, "IP:127.0.0.1,DNS:" + name);
    }
  }

  static HttpFrontOptions TlsOptions() {
    Make("server", "ca");
    HttpFrontOptions options = Options();
    options.tls_cert_file = pki_->Path("server.pem");
    options.tls_key_file = pki_->Path("server.key");
    return options;
  }

  // A client that verifies the server against ca_name, presenting client_name's
  // certificate when given.
  static std::unique_ptr<httplib::SSLClient> Https(const HttpFront& front,
                                                   const std::string& ca_name = "ca",
                                                   const std::string& client_name = "") {
    auto client = client_name.empty()
                      ? std::make_unique<httplib::SSLClient>("127.0.0.1", front.port())
                      : std::make_unique<httplib::SSLClient>(
                            "127.0.0.1", front.port(), pki_->Path(client_name + ".pem"),
                            pki_->Path(client_name + ".key"));
    client->set_ca_cert_path(pki_->Path(ca_name + ".pem").c_str());
    client->enable_server_certificate_verification(true);
    client->set_read_timeout(5, 0);
    return client;
  }

  static testing::Pki* pki_;
};
testing::Pki* HttpsFrontTest::pki_ = nullptr;

TEST_F(HttpsFrontTest, ServesItsRoutesOverHttpsWithTheGivenCertificate) {
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(TlsOptions(), Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  auto echo = Https(*front)->Post("/echo", "{}", "application/json");
  ASSERT_TRUE(echo) << httplib::to_string(echo.error());
  EXPECT_EQ(echo->status, 200);
  EXPECT_EQ(echo->body, "{}");
  // A client trusting another CA refuses the handshake; plain HTTP gets no answer.
  Make("other-ca");
  EXPECT_FALSE(Https(*front, "other-ca")->Get("/healthz"));
  EXPECT_FALSE(Http(*front)->Get("/healthz"));
}

TEST_F(HttpsFrontTest, AClientCaAsksEveryRouteForACertificateItSignedButNotHealthz) {
  Dispatch d;
  Seen seen;
  Make("client", "ca");
  Make("stranger", "other-ca");
  HttpFrontOptions options = TlsOptions();
  options.tls_client_ca_file = pki_->Path("ca.pem");
  auto front = StartOrDie(options, Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);

  auto anonymous = Https(*front)->Post("/echo", "{}", "application/json");
  ASSERT_TRUE(anonymous) << httplib::to_string(anonymous.error());
  EXPECT_EQ(anonymous->status, 403);
  EXPECT_TRUE(absl::StrContains(ErrorOf(anonymous), "--test-listen's client CA"))
      << anonymous->body;
  auto healthz = Https(*front)->Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);

  auto stranger =
      Https(*front, "ca", "stranger")->Post("/echo", "{}", "application/json");
  // The handshake takes it (the certificate is asked for, not required); the route
  // refuses it.
  ASSERT_TRUE(stranger) << httplib::to_string(stranger.error());
  EXPECT_EQ(stranger->status, 403);
  EXPECT_EQ(seen.Calls(), 0);

  auto known = Https(*front, "ca", "client")->Post("/echo", "{}", "application/json");
  ASSERT_TRUE(known) << httplib::to_string(known.error());
  EXPECT_EQ(known->status, 200);
  EXPECT_EQ(seen.Calls(), 1);
}

TEST_F(HttpsFrontTest, ARotatedCertificateServesWithoutARestart) {
  const std::string dir = pki_->Path("rotation");
  std::filesystem::create_directories(dir);
  HttpFrontOptions options = TlsOptions();
  Make("rotated", "other-ca");
  options.tls_cert_file = dir + "/tls.crt";
  options.tls_key_file = dir + "/tls.key";
  std::filesystem::copy_file(pki_->Path("server.pem"), options.tls_cert_file);
  std::filesystem::copy_file(pki_->Path("server.key"), options.tls_key_file);
  Dispatch d;
  Seen seen;
  auto front = StartOrDie(options, Routes(seen), &d.dispatcher);
  ASSERT_NE(front, nullptr);
  ASSERT_TRUE(Https(*front, "ca")->Get("/healthz"));
  ASSERT_FALSE(Https(*front, "other-ca")->Get("/healthz"));

  // Each file replaced whole, as a Secret volume is updated; the front looks once a
  // second.
  for (const auto& [from, to] :
       {std::pair{pki_->Path("rotated.pem"), options.tls_cert_file},
        std::pair{pki_->Path("rotated.key"), options.tls_key_file}}) {
    std::filesystem::copy_file(from, to + ".new");
    std::filesystem::rename(to + ".new", to);
  }
  EXPECT_TRUE(testing::WaitFor(
      [&] { return static_cast<bool>(Https(*front, "other-ca")->Get("/healthz")); },
      absl::Milliseconds(1800), absl::Milliseconds(50)));
  EXPECT_FALSE(Https(*front, "ca")->Get("/healthz"));
}

}  // namespace
}  // namespace gpuest::server
