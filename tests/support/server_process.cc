#include "tests/support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace gpuest::testing {
namespace {

std::string MakeTempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "gpuest-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// posix_spawn with stdin/stdout/stderr redirected to files.
int Spawn(std::vector<std::string> argv, std::vector<std::string> env,
          const std::string& in, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  for (char** e = environ; *e != nullptr; ++e) env.insert(env.begin(), *e);
  auto cargv = CStrings(argv);
  auto cenv = CStrings(env);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

absl::StatusOr<int> Reap(int pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (absl::Now() > deadline)
      return absl::DeadlineExceededError("process still running");
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace

int OpenConnection(int port, const std::string& bytes, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd);
      return -1;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      (!bytes.empty() && send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::abort();
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& extra_flags) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->dir_ = MakeTempDir();
  const std::string ready = server->dir_ + "/ready.json";
  std::vector<std::string> argv = {
      GPUEST_SERVER_PATH, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
      std::string("--models=") + GPUEST_MODELS_DIR, "--ready-file=" + ready};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  server->pid_ =
      Spawn(argv, {}, "/dev/null", server->dir_ + "/stdout", server->dir_ + "/stderr");
  if (server->pid_ < 0) return absl::InternalError("cannot spawn gpuest-server");

  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(ready)) {
    auto exited = Reap(server->pid_, absl::ZeroDuration());
    if (exited.ok()) {
      server->exited_ = true;
      return absl::InternalError(
          absl::StrCat("gpuest-server exited with ", *exited, ": ", server->Log()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("gpuest-server did not become ready: " +
                                         server->Log());
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  const auto doc = nlohmann::json::parse(ReadFileOrDie(ready));
  server->grpc_port_ = doc.at("grpc_port").get<int>();
  server->metrics_port_ = doc.at("metrics_port").get<int>();
  server->extender_port_ = doc.value("extender_port", 0);
  server->admin_port_ = doc.value("admin_port", 0);
  server->admission_port_ = doc.value("admission_port", 0);
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    (void)Reap(pid_, absl::Seconds(10));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void ServerProcess::Signal(int signal_number) const { kill(pid_, signal_number); }

absl::StatusOr<int> ServerProcess::WaitForExit(absl::Duration timeout) {
  auto code = Reap(pid_, timeout);
  if (code.ok()) exited_ = true;
  return code;
}

bool ServerProcess::Running() {
  if (exited_) return false;
  if (Reap(pid_, absl::ZeroDuration()).ok()) exited_ = true;
  return !exited_;
}

std::string ServerProcess::Log() const { return ReadFileOrDie(dir_ + "/stderr"); }

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout,
             absl::Duration every) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(every);
  }
  return true;
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::string& stdin_text,
                         const std::vector<std::string>& env, absl::Duration timeout) {
  const std::string dir = MakeTempDir();
  {
    std::ofstream in(dir + "/stdin");
    in << stdin_text;
  }
  CommandResult result;
  const int pid = Spawn(argv, env, dir + "/stdin", dir + "/stdout", dir + "/stderr");
  if (pid > 0) {
    auto code = Reap(pid, timeout);
    if (!code.ok()) {
      kill(pid, SIGKILL);
      (void)Reap(pid, absl::Seconds(5));
    }
    result.exit_code = code.ok() ? *code : -1;
    result.out = ReadFileOrDie(dir + "/stdout");
    result.err = ReadFileOrDie(dir + "/stderr");
  } else {
    result.err = "cannot spawn " + argv.front();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

}  // namespace gpuest::testing
