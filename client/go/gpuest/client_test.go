package gpuest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every RPC answers what the C++ CLI answers for the same request, field for field
// (but the server's timings).
func TestEstimateAnswersAsTheCLI(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	for _, name := range []string{"mlp.json", "cnn.json", "transformer.json", "resnet50.json"} {
		for _, gpu := range []string{"", "a100-40gb", "h100-80gb"} {
			got, err := c.Estimate(within(t, 30*time.Second), exampleRequest(t, name, gpu))
			if err != nil {
				t.Fatalf("%s on %q: %v", name, gpu, err)
			}
			if got.GetRecommendation().GetMemoryBytes() == 0 || len(got.GetResults()) == 0 {
				t.Fatalf("%s on %q: an empty answer: %v", name, gpu, got)
			}
			want := &gpuestv1.EstimateResponse{}
			args := []string{"--target=" + s.target, "estimate", example(t, name)}
			if gpu != "" {
				args = append(args, "--gpu="+gpu)
			}
			cliJSON(t, want, args...)
			sameAnswer(t, name+" on "+gpu, want, got)
		}
	}
}

func TestCheckPlacementAnswersAsTheCLI(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	candidate := exampleRequest(t, "cnn.json", "")
	for _, gpu := range []*gpuestv1.PlacementGpu{
		{Gpu: &gpuestv1.PlacementGpu_CatalogId{CatalogId: "a100-40gb"}},
		{Gpu: &gpuestv1.PlacementGpu_NodeReported{NodeReported: &gpuestv1.NodeReportedGpu{
			TotalBytes: 40 << 30, FreeBytes: 12 << 30, Model: "a100-40gb"}}},
	} {
		req := &gpuestv1.CheckPlacementRequest{
			Gpu: gpu,
			Existing: []*gpuestv1.PlacementJob{{Name: "running", Job: &gpuestv1.PlacementJob_Measured{
				Measured: &gpuestv1.MeasuredJob{MemoryInUseBytes: 6 << 30, GpuUtil: 70, MemUtil: 30,
					Source: gpuestv1.UtilizationSource_UTILIZATION_SOURCE_NVIDIA_SMI}}}},
			Candidate: &gpuestv1.PlacementJob{Name: "candidate",
				Job: &gpuestv1.PlacementJob_Description{Description: candidate}},
		}
		got, err := c.CheckPlacement(within(t, 30*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetJobs()) != 2 || len(got.GetReasons()) == 0 {
			t.Fatalf("an answer without its jobs or reasons: %v", got)
		}
		want := &gpuestv1.CheckPlacementResponse{}
		cliJSON(t, want, "--target="+s.target, "place", writeJSON(t, req))
		sameAnswer(t, fmt.Sprint("CheckPlacement on ", gpu), want, got)
	}
}

func TestRankGpusAnswersAsTheCLI(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	req := &gpuestv1.RankGpusRequest{Job: &gpuestv1.PlacementJob{Name: "job",
		Job: &gpuestv1.PlacementJob_Description{Description: exampleRequest(t, "transformer.json", "")}}}
	got, err := c.RankGpus(within(t, 30*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetGpus()) < 2 {
		t.Fatalf("a ranking of fewer than 2 GPUs: %v", got)
	}
	want := &gpuestv1.RankGpusResponse{}
	cliJSON(t, want, "--target="+s.target, "rank", writeJSON(t, req))
	sameAnswer(t, "RankGpus", want, got)
}

func TestListEstimatorsAndHealthAnswerAsTheCLI(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	got, err := c.ListEstimators(within(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetEstimators()) == 0 || got.GetModelsVersion() == "" {
		t.Fatalf("no estimators: %v", got)
	}
	want := &gpuestv1.ListEstimatorsResponse{}
	cliJSON(t, want, "--target="+s.target, "models")
	sameAnswer(t, "ListEstimators", want, got)

	for _, service := range []string{"", "gpuest.v1.Estimator"} {
		state, err := c.Health(within(t, 10*time.Second), service)
		if err != nil || state != Serving {
			t.Errorf("Health(%q): %v %v, want SERVING", service, state, err)
		}
	}
	if r := cli(t, "--json", "--target="+s.target, "health"); r.code != 0 ||
		!strings.Contains(string(r.stdout), `"SERVING"`) {
		t.Errorf("the CLI's health: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	// A service the server does not serve: NOT_FOUND with its reason, as gRPC's health
	// service answers.
	if _, err := c.Health(within(t, 10*time.Second), "no.such.Service"); CodeOf(err) != codes.NotFound {
		t.Errorf("Health of an unknown service: %v, want NotFound", err)
	}
}

// Bad input is an *Error with the server's reason (the same words the CLI prints) and
// the field it names; never a panic.
func TestBadInputGivesTheServersReason(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})

	unknownGPU := exampleRequest(t, "mlp.json", "no-such-gpu")
	_, err := c.Estimate(within(t, 10*time.Second), unknownGPU)
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Field != "gpu" ||
		!strings.Contains(e.Message, "no-such-gpu") {
		t.Fatalf("unknown GPU: %#v, want InvalidArgument naming gpu and no-such-gpu", err)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("status.Code does not read the code: %v", status.Code(err))
	}
	r := cli(t, "--target="+s.target, "estimate", writeJSON(t, unknownGPU))
	if r.code != 2 || !strings.Contains(r.stderr, e.Message) {
		t.Errorf("the CLI says (exit %d) %q; the Go client %q", r.code, r.stderr, e.Message)
	}

	malformed := exampleRequest(t, "mlp.json", "")
	malformed.GetModel().BatchSize = -4
	_, err = c.Estimate(within(t, 10*time.Second), malformed)
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || !strings.Contains(e.Field, "batch_size") {
		t.Errorf("a negative batch size: %#v, want InvalidArgument naming batch_size", err)
	}
	empty := &gpuestv1.EstimateRequest{Input: &gpuestv1.EstimateRequest_Model{Model: &gpuestv1.ModelDescription{}}}
	if _, err := c.Estimate(within(t, 10*time.Second), empty); CodeOf(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "Estimate: InvalidArgument: ") {
		t.Errorf("an empty description: %v, want InvalidArgument", err)
	}

	overfull := &gpuestv1.CheckPlacementRequest{
		Gpu: &gpuestv1.PlacementGpu{Gpu: &gpuestv1.PlacementGpu_NodeReported{NodeReported: &gpuestv1.NodeReportedGpu{
			TotalBytes: 1 << 30, FreeBytes: 2 << 30}}},
		Candidate: &gpuestv1.PlacementJob{Job: &gpuestv1.PlacementJob_Estimate{
			Estimate: &gpuestv1.EstimatedJob{PeakBytes: 1 << 20}}},
	}
	if _, err := c.CheckPlacement(within(t, 10*time.Second), overfull); !errors.As(err, &e) ||
		e.Field != "gpu.node_reported.free_bytes" {
		t.Errorf("free above total: %#v, want the field gpu.node_reported.free_bytes", err)
	}

	// No request, no context: errors, not panics.
	if _, err := c.Estimate(nil, nil); CodeOf(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "request: is nil") {
		t.Errorf("nil request: %v", err)
	}
	if _, err := c.CheckPlacement(context.Background(), nil); CodeOf(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v", err)
	}
	if _, err := c.RankGpus(context.Background(), nil); CodeOf(err) != codes.InvalidArgument {
		t.Errorf("nil request: %v", err)
	}
	// protojson says where, not which field.
	if _, err := ParseRequest([]byte(`{"batchSize": "many"}`)); err == nil ||
		!strings.Contains(err.Error(), `(line 1:15): invalid value for int64 type: "many"`) {
		t.Errorf("a malformed description file: %v, want an error saying where", err)
	}
	if _, err := ParseRequest([]byte(`{"gpu": "a100-40gb", "model": {"batchSize": true}}`)); err == nil ||
		!strings.Contains(err.Error(), "not an EstimateRequest") {
		t.Errorf("a malformed request file: %v", err)
	}
}

// A server that is down: UNAVAILABLE saying no server was reachable, at the call's
// deadline (the context's, else the default); at once with one attempt.
func TestDeadlines(t *testing.T) {
	down := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	req := exampleRequest(t, "mlp.json", "")

	c := newClient(t, Options{Targets: []string{down}, DefaultDeadline: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.Estimate(context.Background(), req)
	took := time.Since(start)
	if CodeOf(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "no server was reachable at "+down+" before the deadline") {
		t.Errorf("server down: %v", err)
	}
	if took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("server down, default deadline 300 ms: returned after %v", took)
	}

	patient := newClient(t, Options{Targets: []string{down}, DefaultDeadline: time.Minute})
	start = time.Now()
	_, err = patient.Estimate(within(t, 200*time.Millisecond), req)
	if took := time.Since(start); CodeOf(err) != codes.Unavailable || took > 3*time.Second {
		t.Errorf("the context's 200 ms deadline: %v after %v", err, took)
	}

	once := newClient(t, Options{Targets: []string{down}, DefaultDeadline: time.Minute, MaxAttempts: 1})
	start = time.Now()
	_, err = once.Estimate(context.Background(), req)
	if took := time.Since(start); CodeOf(err) != codes.Unavailable || took > 5*time.Second {
		t.Errorf("one attempt, server down: %v after %v, want UNAVAILABLE at once", err, took)
	}

	// A connected server that cannot answer in time: DEADLINE_EXCEEDED, not UNAVAILABLE.
	s := sharedServer(t)
	up := newClient(t, Options{Targets: []string{s.target}})
	if _, err := up.Health(within(t, 10*time.Second), ""); err != nil {
		t.Fatal(err)
	}
	_, err = up.Estimate(within(t, time.Microsecond), exampleRequest(t, "resnet50.json", "a100-40gb"))
	if CodeOf(err) != codes.DeadlineExceeded {
		t.Errorf("1 us deadline on a connected server: %v, want DeadlineExceeded", err)
	}
	// A caller's cancellation stays CANCELLED.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := up.Estimate(cancelled, req); CodeOf(err) != codes.Canceled {
		t.Errorf("cancelled by the caller: %v, want Canceled", err)
	}
}

// FailOpen: no opinion with the reason, for gpuest down and for a request it refuses.
func TestFailOpen(t *testing.T) {
	if FailOpen(nil) != nil {
		t.Error("FailOpen(nil) is an opinion-less answer")
	}
	down := newClient(t, Options{Targets: []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))},
		DefaultDeadline: 200 * time.Millisecond})
	_, err := down.Estimate(context.Background(), exampleRequest(t, "mlp.json", ""))
	no := FailOpen(err)
	if no == nil || no.Code != codes.Unavailable || no.RequestRefused ||
		!strings.Contains(no.Reason, "no opinion: gpuest could not answer") ||
		!strings.Contains(no.Reason, "no server was reachable") {
		t.Errorf("server down: %+v", no)
	}

	s := sharedServer(t)
	up := newClient(t, Options{Targets: []string{s.target}})
	_, err = up.Estimate(within(t, 10*time.Second), exampleRequest(t, "mlp.json", "no-such-gpu"))
	no = FailOpen(err)
	if no == nil || no.Code != codes.InvalidArgument || !no.RequestRefused ||
		!strings.Contains(no.Reason, "gpuest refused the pod's request") ||
		!strings.Contains(no.Reason, "no-such-gpu") {
		t.Errorf("unknown GPU: %+v", no)
	}

	// The scheduler's helpers fail open the same way.
	job, err := NewPodJob("ns/pod", exampleRequest(t, "mlp.json", ""), 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Filter(context.Background(), down, job, []GPUState{{Model: "a100-40gb"}})
	if no := FailOpen(err); no == nil || no.Code != codes.Unavailable {
		t.Errorf("Filter with gpuest down: %v", err)
	}
}

// Calls made while the server is killed (SIGKILL) and restarted on its port all get
// their answer within their deadline: the policy's retries and wait-for-ready.
func TestCallsRideOutAKillAndRestart(t *testing.T) {
	first := startServer(t)
	c := newClient(t, Options{Targets: []string{first.target}, DefaultDeadline: 30 * time.Second})
	req := exampleRequest(t, "cnn.json", "")

	var mu sync.Mutex
	ok := 0
	var failures []error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := c.Estimate(context.Background(), req)
			mu.Lock()
			if err != nil {
				failures = append(failures, err)
			} else {
				ok++
			}
			mu.Unlock()
		}
	}()
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return ok + len(failures)
	}
	waitCalls := func(n int) bool {
		deadline := time.Now().Add(60 * time.Second)
		for calls() < n {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
		return true
	}
	restarted := false
	if waitCalls(20) {
		first.kill()
		before := calls()
		second := startServer(t, "--listen="+first.target)
		restarted = waitCalls(before + 20)
		if !restarted {
			t.Errorf("no calls answered after the restart: %s", second.log())
		}
	} else {
		t.Error("no calls answered before the kill")
	}
	close(stop)
	<-done
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed, the first: %v", len(failures), ok+len(failures), failures[0])
	}
	if restarted && ok < 40 {
		t.Errorf("%d calls answered", ok)
	}
}

// Two servers, one target list: with one killed, every call still gets an answer from
// the other (round robin, and the call the kill interrupted retried there).
func TestFailoverBetweenTargets(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c := newClient(t, Options{Targets: []string{a.target, b.target}, DefaultDeadline: 10 * time.Second})
	req := exampleRequest(t, "mlp.json", "a100-40gb")
	for i := 0; i < 10; i++ {
		if _, err := c.Estimate(context.Background(), req); err != nil {
			t.Fatalf("both up, call %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := c.Estimate(context.Background(), req); err != nil {
					errs <- err
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	a.kill()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed with one of two servers down: %v", err)
	}
	for i := 0; i < 10; i++ {
		if _, err := c.Estimate(context.Background(), req); err != nil {
			t.Fatalf("one server down, call %d: %v", i, err)
		}
	}
}

// TLS and mutual TLS on the gRPC port, with certificates made by openssl, as
// tests/integration/tls_test.cc.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	p.makeCA(t, "ca")
	p.makeCA(t, "other-ca")
	p.makeLeaf(t, "server", "ca", "IP:127.0.0.1,DNS:localhost")
	p.makeLeaf(t, "client", "ca", "DNS:scheduler")
	p.makeLeaf(t, "impostor", "other-ca", "DNS:scheduler")
	tlsFlags := []string{"--tls-cert=" + p.path("server.pem"), "--tls-key=" + p.path("server.key")}
	req := exampleRequest(t, "cnn.json", "")

	estimate := func(targets []string, tls TLSOptions) error {
		c, err := NewClient(Options{Targets: targets, TLS: tls, MaxAttempts: 1,
			DefaultDeadline: 10 * time.Second})
		if err != nil {
			return err
		}
		defer c.Close()
		r, err := c.Estimate(context.Background(), req)
		if err == nil && r.GetRecommendation().GetMemoryBytes() == 0 {
			return fmt.Errorf("an empty answer")
		}
		return err
	}

	server := startServer(t, tlsFlags...)
	if err := estimate([]string{server.target}, TLSOptions{CAFile: p.path("ca.pem")}); err != nil {
		t.Errorf("TLS, trusting the CA: %v", err)
	}
	// Several addresses: each checked against its own IP.
	if err := estimate([]string{server.target, server.target}, TLSOptions{CAFile: p.path("ca.pem")}); err != nil {
		t.Errorf("TLS over two addresses: %v", err)
	}
	if err := estimate([]string{server.target}, TLSOptions{}); CodeOf(err) != codes.Unavailable {
		t.Errorf("plaintext to a TLS server: %v, want Unavailable", err)
	}
	err := estimate([]string{server.target}, TLSOptions{CAFile: p.path("other-ca.pem")})
	if CodeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the server's CA: %v, want Unavailable about its certificate", err)
	}
	if err := estimate([]string{"localhost:" + fmt.Sprint(server.port)}, TLSOptions{CAFile: p.path("ca.pem")}); err != nil {
		t.Errorf("TLS by host name: %v", err)
	}

	mutual := startServer(t, append(tlsFlags, "--tls-client-ca="+p.path("ca.pem"))...)
	if err := estimate([]string{mutual.target}, TLSOptions{CAFile: p.path("ca.pem"),
		CertFile: p.path("client.pem"), KeyFile: p.path("client.key")}); err != nil {
		t.Errorf("mutual TLS with a client certificate from the client CA: %v", err)
	}
	if err := estimate([]string{mutual.target}, TLSOptions{CAFile: p.path("ca.pem")}); CodeOf(err) != codes.Unavailable {
		t.Errorf("mutual TLS without a client certificate: %v, want Unavailable", err)
	}
	if err := estimate([]string{mutual.target}, TLSOptions{CAFile: p.path("ca.pem"),
		CertFile: p.path("impostor.pem"), KeyFile: p.path("impostor.key")}); CodeOf(err) != codes.Unavailable {
		t.Errorf("mutual TLS with a certificate of another CA: %v, want Unavailable", err)
	}
	if err := estimate([]string{mutual.target}, TLSOptions{CAFile: p.path("ca.pem"),
		CertFile: p.path("client.pem"), KeyFile: p.path("impostor.key")}); err == nil ||
		!strings.Contains(err.Error(), "TLS.CertFile, TLS.KeyFile") {
		t.Errorf("a key that is not the certificate's: %v", err)
	}
}
