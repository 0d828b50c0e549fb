// File: http_reply.h
//
// What an HTTP entry point's logic answers (the scheduler extender, the admission
// webhook), for the server's HTTP front to send: a status, a JSON body, and the call's
// outcome for the request metrics.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuest::common {

struct HttpReply {
  int status = 200;
  std::string body;
  // OK, InvalidArgument for a body or description refused, DeadlineExceeded when the
  // work stopped at its deadline.
  absl::StatusCode code = absl::StatusCode::kOk;
};

}  // namespace gpuest::common
