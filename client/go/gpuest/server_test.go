package gpuest

// The tests' real gpuest-server on loopback, the real CLI beside it, and a throw-away
// PKI, as tests/support/server_process and pki do for the C++ tests. ctest sets
// GPUEST_SERVER, GPUEST_CLI, GPUEST_MODELS, GPUEST_EXAMPLES, GPUEST_POLICY and
// GPUEST_GO_BIN (client/go/CMakeLists.txt); a missing one fails the run: a skip would let it pass
// without reaching a server.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var env = map[string]string{}

func TestMain(m *testing.M) {
	for _, name := range []string{"GPUEST_SERVER", "GPUEST_CLI", "GPUEST_MODELS",
		"GPUEST_EXAMPLES", "GPUEST_POLICY", "GPUEST_GO_BIN"} {
		env[name] = os.Getenv(name)
		if env[name] == "" {
			fmt.Fprintf(os.Stderr, "%s is not set (ctest sets it: client/go/CMakeLists.txt)\n", name)
			os.Exit(1)
		}
	}
	code := m.Run()
	if shared != nil {
		shared.kill()
	}
	os.Exit(code)
}

type serverProcess struct {
	cmd     *exec.Cmd
	logPath string
	port    int
	target  string
	exited  chan struct{}
}

// startServer starts gpuest-server on 127.0.0.1 (an ephemeral port unless flags name
// one: they come after the defaults, so they win) and waits for its ready file. It is
// killed when the test ends.
func startServer(t *testing.T, flags ...string) *serverProcess {
	t.Helper()
	s, err := launchServer(t.TempDir(), flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func launchServer(dir string, flags ...string) (*serverProcess, error) {
	ready := filepath.Join(dir, "ready.json")
	s := &serverProcess{logPath: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	log, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := append([]string{"--listen=127.0.0.1:0", "--metrics-listen=",
		"--models=" + env["GPUEST_MODELS"], "--ready-file=" + ready}, flags...)
	s.cmd = exec.Command(env["GPUEST_SERVER"], args...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if text, err := os.ReadFile(ready); err == nil && len(text) > 0 {
			var ports struct {
				GrpcPort int `json:"grpc_port"`
			}
			if err := json.Unmarshal(text, &ports); err != nil {
				s.kill()
				return nil, fmt.Errorf("ready file %s: %v", ready, err)
			}
			s.port = ports.GrpcPort
			s.target = fmt.Sprintf("127.0.0.1:%d", s.port)
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("gpuest-server exited: %s", s.log())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("gpuest-server did not become ready: %s", s.log())
		}
	}
}

// kill sends SIGKILL (a crash, no drain) and waits for the exit.
func (s *serverProcess) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

func (s *serverProcess) log() string {
	text, _ := os.ReadFile(s.logPath)
	return string(text)
}

var (
	sharedOnce sync.Once
	shared     *serverProcess
	sharedErr  error
)

// sharedServer is one server for the tests that only call it (none kills it).
func sharedServer(t *testing.T) *serverProcess {
	t.Helper()
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuest-go-test-")
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = launchServer(dir)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freePort is a loopback port nothing listens on (it was free a moment ago).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func example(t *testing.T, name string) string {
	return filepath.Join(env["GPUEST_EXAMPLES"], name)
}

// exampleRequest is examples/<name> as an EstimateRequest on gpu.
func exampleRequest(t *testing.T, name, gpu string) *gpuestv1.EstimateRequest {
	t.Helper()
	text, err := os.ReadFile(example(t, name))
	if err != nil {
		t.Fatal(err)
	}
	req, err := ParseRequest(text)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	req.Gpu = gpu
	return req
}

type cliResult struct {
	code        int
	stdout      []byte
	stderr      string
	commandLine string
}

// cli runs the C++ CLI, build/client/gpuest, with args.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(env["GPUEST_CLI"], args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.Bytes(), stderr: errOut.String(),
		commandLine: "gpuest " + strings.Join(args, " ")}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", r.commandLine, err)
	}
	return r
}

// cliJSON runs the CLI with --json, expects success, and reads its answer into m.
func cliJSON(t *testing.T, m proto.Message, args ...string) {
	t.Helper()
	r := cli(t, append([]string{"--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("%s: exit %d: %s", r.commandLine, r.code, r.stderr)
	}
	if err := protojson.Unmarshal(r.stdout, m); err != nil {
		t.Fatalf("%s: its JSON does not parse as %T: %v", r.commandLine, m, err)
	}
}

// writeJSON writes m in protobuf's JSON form to a file of the test's.
func writeJSON(t *testing.T, m proto.Message) string {
	t.Helper()
	text, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameAnswer fails the test unless want and got are equal but for the timings the
// server measures per call (fields named *latency_us).
func sameAnswer(t *testing.T, what string, want, got proto.Message) {
	t.Helper()
	want, got = withoutLatencies(want), withoutLatencies(got)
	if !proto.Equal(want, got) {
		t.Errorf("%s: the Go client's answer differs from the CLI's\nCLI: %v\nGo:  %v",
			what, protojson.Format(want), protojson.Format(got))
	}
}

func withoutLatencies(m proto.Message) proto.Message {
	m = proto.Clone(m)
	switch r := m.(type) {
	case *gpuestv1.EstimateResponse:
		r.ServerLatencyUs = 0
		for _, result := range r.Results {
			result.LatencyUs = 0
		}
	case *gpuestv1.CheckPlacementResponse:
		r.ServerLatencyUs = 0
	case *gpuestv1.RankGpusResponse:
		r.ServerLatencyUs = 0
	}
	return m
}

// pki is a throw-away PKI made with the openssl CLI, as tests/support/pki.cc makes it.
type pki struct{ dir string }

func newPKI(t *testing.T) *pki {
	t.Helper()
	return &pki{dir: t.TempDir()}
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("openssl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// makeCA: <name>.key and a self-signed <name>.pem.
func (p *pki) makeCA(t *testing.T, name string) {
	p.run(t, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
		"-nodes", "-keyout", p.path(name+".key"), "-out", p.path(name+".pem"), "-days", "1",
		"-subj", "/CN="+name)
}

// makeLeaf: <name>.key and <name>.pem signed by ca, with the subjectAltName given.
func (p *pki) makeLeaf(t *testing.T, name, ca, subjectAltName string) {
	p.run(t, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", p.path(name+".key"), "-out", p.path(name+".csr"), "-subj", "/CN="+name)
	if err := os.WriteFile(p.path(name+".ext"), []byte("subjectAltName="+subjectAltName+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.run(t, "x509", "-req", "-in", p.path(name+".csr"), "-CA", p.path(ca+".pem"), "-CAkey",
		p.path(ca+".key"), "-CAcreateserial", "-out", p.path(name+".pem"), "-days", "1",
		"-extfile", p.path(name+".ext"))
}

// within is a context with a deadline d, cancelled when the test ends.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
