// File: extender_options.h
//
// How the Kubernetes scheduler extender is configured: the server's flags fill it
// (server/options.h holds it among the server's options), the extender reads it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace gpuest::kubernetes {

struct ExtenderOptions {
  std::string listen_address;    // host:port; empty: no extender.
  std::string descriptions_dir;  // ConfigMaps mounted here as NAME/KEY; empty: none.
  std::string nodes_file;        // v1.NodeList JSON for NodeNames-only requests.
  // A call's work stops here and it answers an Error (kube-scheduler then skips an
  // ignorable extender for the pod): under kube-scheduler's httpTimeout, with a margin.
  absl::Duration timeout = absl::Milliseconds(4500);
  // The largest body accepted: kube-scheduler posts whole Node objects (5-10 KB each),
  // so 128 MiB holds 10,000 nodes or more.
  int64_t max_body_bytes = int64_t{128} << 20;
};

}  // namespace gpuest::kubernetes
