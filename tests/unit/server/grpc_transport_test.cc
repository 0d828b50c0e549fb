// server/grpc_transport: the bounds one peer meets on a gRPC port, in the start-up
// log's words, and set on the builder: a header block over the bound is refused.
#include "server/grpc_transport.h"

#include <future>
#include <memory>
#include <string>

#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

TEST(GrpcTransport, TheBoundsInEffectInOneLine) {
  EXPECT_EQ(DescribeTransportBounds(GrpcTransportOptions{}),
            "streams per connection 32, transport memory 256 MiB, headers 16384 bytes, "
            "idle connections closed after 300 s, a connection resetting over 200 "
            "streams a second is cut");
  GrpcTransportOptions none;
  none.max_concurrent_streams = 0;
  none.memory_bytes = 0;
  none.max_connection_idle_ms = 0;
  none.max_resets_per_second = 0;
  EXPECT_EQ(DescribeTransportBounds(none),
            "streams per connection unbounded (gRPC's default), transport memory "
            "unbounded (gRPC's default), headers 16384 bytes, idle connections closed "
            "after never, a connection resetting over any number of (never cut) streams "
            "a second is cut");
}

// Answers every method by echoing the one message it was sent.
class Echo final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&message_); }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "no message"));
        StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer message_;
    };
    return new Reactor;
  }
};

// One call with a header of header_bytes to a server on the loopback with options'
// bounds applied: its status.
grpc::Status CallWithHeader(const GrpcTransportOptions& options, size_t header_bytes) {
  Echo echo;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&echo);
  ApplyTransportBounds(options, "test", builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no server");
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("x-padding", std::string(header_bytes, 'x'));
  grpc::Slice hello("hello");
  const grpc::ByteBuffer request(&hello, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/test.Echo/Say", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  server->Shutdown();
  return status;
}

TEST(GrpcTransport, AHeaderBlockOverTheBoundIsRefused) {
  GrpcTransportOptions options;
  EXPECT_TRUE(CallWithHeader(options, 8192).ok());  // Under the 16 KiB default.
  options.max_metadata_bytes = 2048;
  EXPECT_TRUE(CallWithHeader(options, 256).ok());
  EXPECT_FALSE(CallWithHeader(options, 8192).ok());
}

}  // namespace
}  // namespace gpuest::server
