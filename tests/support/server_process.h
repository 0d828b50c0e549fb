// File: server_process.h
//
// Starts the real gpuest-server binary on ephemeral loopback ports for a test and
// stops it afterwards. Ports come from the server's --ready-file.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpuest::testing {

class ServerProcess {
 public:
  // Extra flags are appended after the defaults (--listen 127.0.0.1:0,
  // --metrics-listen 127.0.0.1:0, --models <repo models>), so they win.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& extra_flags = {});
  ~ServerProcess();  // SIGKILL if still running.

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // The scheduler extender's HTTP port (--extender-listen), 0 when it is off.
  int extender_port() const { return extender_port_; }
  // The admission webhook's HTTPS port (--admission-listen), 0 when it is off.
  int admission_port() const { return admission_port_; }
  // 0 unless the server was started with --admin-listen.
  int admin_port() const { return admin_port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int pid() const { return pid_; }

  void Signal(int signal_number) const;
  // The exit code, or DeadlineExceeded if it is still running after timeout.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);
  // What the server wrote to stderr so far.
  std::string Log() const;
  // Whether the process is still running (not exited, not killed).
  bool Running();

 private:
  ServerProcess() = default;
  int pid_ = -1;
  bool exited_ = false;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int extender_port_ = 0;
  int admin_port_ = 0;
  int admission_port_ = 0;
  std::string dir_;
};

// A TCP connection to 127.0.0.1:port that sends bytes (MSG_NOSIGNAL) and then stays
// open; -1 when it cannot connect or send. The caller closes it.
// source: the loopback address it connects from ("127.0.0.2" ...; empty: the kernel's
// choice, 127.0.0.1), for a crowd spread over peers (the front's per-peer limit).
int OpenConnection(int port, const std::string& bytes = "",
                   const std::string& source = "");

// Polls cond, every `every`, until it holds or timeout passes; whether it holds.
bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout,
             absl::Duration every = absl::Milliseconds(1));

// Runs a program to completion with a timeout, capturing stdout and stderr.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::string& stdin_text = "",
                         const std::vector<std::string>& env = {},
                         absl::Duration timeout = absl::Seconds(30));

// The whole file; aborts the test binary when it cannot be read, so that a test never
// compares against the empty text of a file that is not there.
std::string ReadFileOrDie(const std::string& path);

}  // namespace gpuest::testing
