package gpuest

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// Error is a call that failed: its gRPC code, the server's reason and, for
// INVALID_ARGUMENT, the request field the server named.
type Error struct {
	Method string // "Estimate", "CheckPlacement", ...
	Code   codes.Code
	// The server's reason as it gave it; or the client's, for a call no server took.
	Message string
	// INVALID_ARGUMENT only: the field of the request the server named
	// ("model.batch_size"), from the google.rpc.BadRequest in the call's rich error
	// details (server/status_util.h); empty when it named none.
	Field string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gpuest: %s: %s: %s", e.Method, e.Code, e.Message)
}

// GRPCStatus lets status.Code(err) and status.Convert(err) read the code.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// CodeOf is the code of an error this package returned; codes.Unknown for another
// error, codes.OK for nil.
func CodeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codes.Unknown
}

// callError is the *Error of a failed call, mapped as the C++ and Python clients map
// theirs: a deadline that passed while the channel had no connection means no server
// was reachable (UNAVAILABLE), not a slow answer; a CANCELLED the caller did not cause
// came from a server shutting down (UNAVAILABLE too).
func callError(ctx context.Context, method string, err error, conn *grpc.ClientConn,
	target string) *Error {
	s := status.Convert(err)
	e := &Error{Method: method, Code: s.Code(), Message: s.Message()}
	switch {
	case s.Code() == codes.DeadlineExceeded && conn.GetState() != connectivity.Ready:
		e.Code = codes.Unavailable
		e.Message = fmt.Sprintf("no server was reachable at %s before the deadline: %s",
			target, s.Message())
	case s.Code() == codes.Canceled && ctx.Err() == nil:
		e.Code = codes.Unavailable
		e.Message = "the server cancelled the call (shutting down?): " + s.Message()
	case s.Code() == codes.InvalidArgument:
		for _, detail := range s.Details() {
			if bad, ok := detail.(*errdetails.BadRequest); ok && len(bad.FieldViolations) > 0 {
				e.Field = bad.FieldViolations[0].Field
				break
			}
		}
	}
	return e
}

// NoOpinion is what a scheduler that must not block does with a failed call: it
// places as if gpuest were not there, and logs why.
type NoOpinion struct {
	// Why gpuest has no opinion, for the scheduler's log or the pod's event.
	Reason string
	Code   codes.Code
	// The request itself was refused (INVALID_ARGUMENT, NOT_FOUND,
	// FAILED_PRECONDITION: a malformed description, an unknown GPU): asking again
	// gives the same answer. Otherwise gpuest could not answer (down, too slow,
	// overloaded) and may later.
	RequestRefused bool
}

// FailOpen turns a call's error into "no opinion" with its reason; nil when err is nil
// (the answer stands). Every error gives no opinion: a scheduler on its critical path
// never blocks a pod on gpuest. Reason says which it was.
func FailOpen(err error) *NoOpinion {
	if err == nil {
		return nil
	}
	code := CodeOf(err)
	refused := code == codes.InvalidArgument || code == codes.NotFound ||
		code == codes.FailedPrecondition
	why := "gpuest could not answer"
	if refused {
		why = "gpuest refused the pod's request"
	}
	return &NoOpinion{
		Reason:         fmt.Sprintf("no opinion: %s: %v", why, err),
		Code:           code,
		RequestRefused: refused,
	}
}
