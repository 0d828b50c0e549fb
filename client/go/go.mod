// The Go client of gpuest-server (client/go/README.md). The build (CMake) generates
// the gpuest.v1 stubs into gpuestv1/ and copies proto/gpuest/v1/client_policy.json
// beside gpuest/policy.go; Debian's packages build it offline in GOPATH mode. The
// versions below are the minimums it is built and tested with (Debian 12).
module github.com/gpuest/gpuest/client/go

go 1.19

require (
	// 1.5: with an older one, grpc-go marshals protoc-gen-go 1.28 messages through the
	// old table marshaller and panics (deploy/install-deps.sh).
	github.com/golang/protobuf v1.5.2 // indirect
	// google.rpc.BadRequest (errdetails): the field an INVALID_ARGUMENT names.
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
