// Package gpuest is the Go client of gpuest-server, for schedulers that ask it, on
// their critical path, how much GPU memory a training job needs and whether it fits a
// GPU beside the jobs already there.
//
// It applies the policy of the C++ and Python clients, read from the same file
// (proto/gpuest/v1/client_policy.json, embedded at build time): one connection
// round-robin over every target, a deadline per call (the context's, else the
// policy's default), retries of UNAVAILABLE and CANCELLED with gRPC's backoff within
// that deadline, each attempt waiting for a reachable server up to it; TLS and mutual
// TLS. Errors are *Error values carrying the server's reason; FailOpen turns one into
// "no opinion". Filter, ScorePlacement and Size (scheduling.go) are what a scheduler
// plugin calls.
//
//	c, err := gpuest.NewClient(gpuest.Options{Targets: []string{"10.0.0.5:50051"}})
//	...
//	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
//	defer cancel()
//	r, err := c.Estimate(ctx, &gpuestv1.EstimateRequest{Input: ..., Gpu: "a100-40gb"})
//	r.GetRecommendation().GetMemoryBytes()
package gpuest

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	gpuestv1 "github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// DefaultTarget is the target of Options with none.
const DefaultTarget = "127.0.0.1:50051"

// DefaultMaxMessageBytes is the server's default --max-message-size: a long trace fits.
const DefaultMaxMessageBytes = 16 << 20

// Options of a client; the zero value is the policy's defaults on DefaultTarget.
type Options struct {
	// Either host:port addresses (IPv4, or [IPv6]), balanced round-robin with failover,
	// or a single gRPC target ("dns:///gpuest.svc:50051", "name:port") whose resolver
	// yields them. Empty: DefaultTarget.
	Targets []string
	// For calls whose context has no deadline; 0: the policy's (long enough to ride out
	// a server restart). A scheduler on its critical path gives each call a context
	// with a tighter one.
	DefaultDeadline time.Duration
	// Attempts per call, the first included, when the server answers UNAVAILABLE (at
	// most 5, gRPC's limit); waiting for a reachable server uses up none. 0: the
	// policy's. 1 turns retries off, and calls then fail at once while no server is
	// reachable.
	MaxAttempts int
	// 0: DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Empty: plaintext.
	TLS TLSOptions
}

// ServingState is a health check's answer.
type ServingState int

// The states a health check reports.
const (
	ServingUnknown ServingState = iota
	Serving
	NotServing
)

func (s ServingState) String() string {
	switch s {
	case Serving:
		return "SERVING"
	case NotServing:
		return "NOT_SERVING"
	}
	return "UNKNOWN"
}

// Client is safe for concurrent use; make one per process and Close it at the end.
type Client struct {
	target          string
	defaultDeadline time.Duration
	conn            *grpc.ClientConn
	estimator       gpuestv1.EstimatorClient
	placement       gpuestv1.PlacementClient
	health          healthpb.HealthClient
}

var (
	policyOnce sync.Once
	policy     Policy
)

// ClientPolicy is the embedded policy, parsed once.
func ClientPolicy() Policy {
	policyOnce.Do(func() { policy = EmbeddedPolicy() })
	return policy
}

// manualSchemes numbers the resolver scheme of each client given several addresses.
var (
	schemeMu   sync.Mutex
	schemeNext int
)

// NewClient checks the options and makes the connection; it does not connect: the
// first call does.
func NewClient(opts Options) (*Client, error) {
	p := ClientPolicy()
	if opts.DefaultDeadline < 0 {
		return nil, fmt.Errorf("gpuest: DefaultDeadline: must be positive, got %v", opts.DefaultDeadline)
	}
	if opts.DefaultDeadline == 0 {
		opts.DefaultDeadline = p.DefaultDeadline
	}
	if opts.MaxAttempts < 0 {
		return nil, fmt.Errorf("gpuest: MaxAttempts: must be at least 1, got %d", opts.MaxAttempts)
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = p.Retry.MaxAttempts
	}
	if opts.MaxAttempts > grpcMaxAttempts {
		opts.MaxAttempts = grpcMaxAttempts
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if len(opts.Targets) == 0 {
		opts.Targets = []string{DefaultTarget}
	}
	creds, err := transportCredentials(opts.TLS)
	if err != nil {
		return nil, err
	}
	retry := p.Retry
	retry.MaxAttempts = opts.MaxAttempts
	dial := []grpc.DialOption{
		creds,
		grpc.WithDefaultServiceConfig(p.ServiceConfigJSON(opts.MaxAttempts)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  p.InitialReconnectBackoff,
				Multiplier: backoff.DefaultConfig.Multiplier,
				Jitter:     backoff.DefaultConfig.Jitter,
				MaxDelay:   p.MaxReconnectBackoff,
			},
			// gRPC core's min_reconnect_backoff: the shortest a connect attempt is given.
			MinConnectTimeout: p.MinReconnectBackoff,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(opts.MaxMessageBytes)),
		grpc.WithUnaryInterceptor(retryInterceptor(retry, rand.Float64)),
	}
	target, addresses, err := channelTarget(opts.Targets)
	if err != nil {
		return nil, err
	}
	dialTarget := target
	if addresses != nil {
		// Several addresses: a resolver of this client's own that yields them all, each
		// with its host as the name TLS checks.
		schemeMu.Lock()
		scheme := fmt.Sprintf("gpuest-targets-%d", schemeNext)
		schemeNext++
		schemeMu.Unlock()
		r := manual.NewBuilderWithScheme(scheme)
		var state resolver.State
		for _, a := range addresses {
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a, ServerName: a})
		}
		r.InitialState(state)
		dial = append(dial, grpc.WithResolvers(r))
		dialTarget = scheme + ":///gpuest"
	}
	conn, err := grpc.Dial(dialTarget, dial...)
	if err != nil {
		return nil, fmt.Errorf("gpuest: Targets: cannot use %q: %v", target, err)
	}
	return &Client{
		target:          target,
		defaultDeadline: opts.DefaultDeadline,
		conn:            conn,
		estimator:       gpuestv1.NewEstimatorClient(conn),
		placement:       gpuestv1.NewPlacementClient(conn),
		health:          healthpb.NewHealthClient(conn),
	}, nil
}

// Close ends the connection; calls still running fail.
func (c *Client) Close() error { return c.conn.Close() }

// Target is the target list the connection was made with, as one string.
func (c *Client) Target() string { return c.target }

// Estimate estimates one job's peak GPU memory and utilization; the answer's
// Recommendation is the figure to reserve.
func (c *Client) Estimate(ctx context.Context, req *gpuestv1.EstimateRequest) (*gpuestv1.EstimateResponse, error) {
	if req == nil {
		return nil, nilRequest("Estimate")
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := c.estimator.Estimate(ctx, req)
	return r, c.wrap(ctx, "Estimate", err)
}

// ListEstimators lists the estimators the server has loaded.
func (c *Client) ListEstimators(ctx context.Context) (*gpuestv1.ListEstimatorsResponse, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := c.estimator.ListEstimators(ctx, &gpuestv1.ListEstimatorsRequest{})
	return r, c.wrap(ctx, "ListEstimators", err)
}

// CheckPlacement asks whether a job fits a GPU beside the jobs already on it, and how
// much they would slow each other. A job given by description is estimated on the
// server: give the call tens of milliseconds.
func (c *Client) CheckPlacement(ctx context.Context, req *gpuestv1.CheckPlacementRequest) (*gpuestv1.CheckPlacementResponse, error) {
	if req == nil {
		return nil, nilRequest("CheckPlacement")
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := c.placement.CheckPlacement(ctx, req)
	return r, c.wrap(ctx, "CheckPlacement", err)
}

// RankGpus ranks every GPU model of the server's catalog (MIG profiles included) for
// one job: fitting ones first, tightest first.
func (c *Client) RankGpus(ctx context.Context, req *gpuestv1.RankGpusRequest) (*gpuestv1.RankGpusResponse, error) {
	if req == nil {
		return nil, nilRequest("RankGpus")
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := c.placement.RankGpus(ctx, req)
	return r, c.wrap(ctx, "RankGpus", err)
}

// Health is the standard health check, of the whole server ("") or of a service
// ("gpuest.v1.Estimator").
func (c *Client) Health(ctx context.Context, service string) (ServingState, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	r, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return ServingUnknown, c.wrap(ctx, "Health.Check", err)
	}
	switch r.GetStatus() {
	case healthpb.HealthCheckResponse_SERVING:
		return Serving, nil
	case healthpb.HealthCheckResponse_NOT_SERVING:
		return NotServing, nil
	}
	return ServingUnknown, nil
}

func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.defaultDeadline)
}

func (c *Client) wrap(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	return callError(ctx, method, err, c.conn, c.target)
}

func nilRequest(method string) error {
	return &Error{Method: method, Code: codes.InvalidArgument, Message: "request: is nil"}
}

var (
	ipv4Address = regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+:\d+$`)
	ipv6Address = regexp.MustCompile(`^\[[^\]]+\]:\d+$`)
)

// channelTarget is the target list as one string and, for several, the addresses to
// balance; the same rules as the C++ and Python clients.
func channelTarget(targets []string) (string, []string, error) {
	for i, t := range targets {
		if strings.TrimSpace(t) == "" {
			return "", nil, fmt.Errorf("gpuest: Targets[%d]: is empty", i)
		}
	}
	if len(targets) == 1 {
		return targets[0], nil, nil
	}
	allV4, allV6 := true, true
	for _, t := range targets {
		allV4 = allV4 && ipv4Address.MatchString(t)
		allV6 = allV6 && ipv6Address.MatchString(t)
		if _, _, err := net.SplitHostPort(t); err != nil {
			allV4, allV6 = false, false
		}
	}
	switch {
	case allV4:
		return "ipv4:" + strings.Join(targets, ","), targets, nil
	case allV6:
		return "ipv6:" + strings.Join(targets, ","), targets, nil
	}
	return "", nil, fmt.Errorf("gpuest: Targets: several targets must all be IPv4 or all " +
		"[IPv6] host:port addresses; for host names give one DNS target (dns:///name:port) " +
		"and let it resolve to many")
}

// retryInterceptor applies the policy's retry policy (gRFC A6) within the call's
// deadline: an attempt that fails with a retryable code is made again after a random
// wait of up to min(initial x multiplier^(n-1), max), unless that wait would pass the
// deadline or the caller cancelled. random draws in [0, 1).
func retryInterceptor(p RetryPolicy, random func() float64) grpc.UnaryClientInterceptor {
	retryable := map[codes.Code]bool{}
	for _, c := range p.RetryableCodes {
		retryable[c] = true
	}
	return func(ctx context.Context, method string, req, reply interface{},
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		backoffCap := float64(p.InitialBackoff)
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt >= p.MaxAttempts || ctx.Err() != nil ||
				!retryable[status.Code(err)] {
				return err
			}
			wait := time.Duration(random() * backoffCap)
			backoffCap = minFloat(backoffCap*p.BackoffMultiplier, float64(p.MaxBackoff))
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
				return err
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return err
			case <-timer.C:
			}
		}
	}
}

func minFloat(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}
