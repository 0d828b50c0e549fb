package gpuest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The policy the package embeds is the repository's file as it is now, read with its
// numbers as the file gives them.
func TestEmbeddedPolicyIsTheSharedFile(t *testing.T) {
	source, err := os.ReadFile(env["GPUEST_POLICY"])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(source, embeddedPolicy) {
		t.Fatalf("the embedded client_policy.json is not %s: rebuild (the build copies it)", env["GPUEST_POLICY"])
	}
	var file struct {
		DefaultDeadlineSeconds float64
		ReconnectBackoffMs     struct{ Initial, Min, Max int }
		ServiceConfig          struct {
			MethodConfig []struct {
				RetryPolicy struct {
					MaxAttempts          int
					RetryableStatusCodes []string
				}
			}
		}
	}
	if err := json.Unmarshal(source, &file); err != nil {
		t.Fatal(err)
	}
	p := ClientPolicy()
	if want := time.Duration(file.DefaultDeadlineSeconds * float64(time.Second)); p.DefaultDeadline != want {
		t.Errorf("DefaultDeadline %v, the file says %v", p.DefaultDeadline, want)
	}
	if p.InitialReconnectBackoff != time.Duration(file.ReconnectBackoffMs.Initial)*time.Millisecond ||
		p.MinReconnectBackoff != time.Duration(file.ReconnectBackoffMs.Min)*time.Millisecond ||
		p.MaxReconnectBackoff != time.Duration(file.ReconnectBackoffMs.Max)*time.Millisecond {
		t.Errorf("reconnect backoff %+v, the file says %+v", p, file.ReconnectBackoffMs)
	}
	retry := file.ServiceConfig.MethodConfig[0].RetryPolicy
	if p.Retry.MaxAttempts != retry.MaxAttempts {
		t.Errorf("MaxAttempts %d, the file says %d", p.Retry.MaxAttempts, retry.MaxAttempts)
	}
	var names []string
	for _, c := range p.Retry.RetryableCodes {
		names = append(names, strings.ToUpper(strings.ReplaceAll(c.String(), "Canceled", "Cancelled")))
	}
	if strings.Join(names, ",") != strings.Join(retry.RetryableStatusCodes, ",") {
		t.Errorf("retryable codes %v, the file says %v", names, retry.RetryableStatusCodes)
	}
}

// Read as strictly as the C++ and Python clients read it: the error names the key.
func TestPolicyParserNamesTheKey(t *testing.T) {
	edit := func(f func(map[string]interface{})) []byte {
		var doc map[string]interface{}
		if err := json.Unmarshal(embeddedPolicy, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc)
		text, _ := json.Marshal(doc)
		return text
	}
	method := func(doc map[string]interface{}) map[string]interface{} {
		return doc["serviceConfig"].(map[string]interface{})["methodConfig"].([]interface{})[0].(map[string]interface{})
	}
	cases := []struct {
		name, key string
		text      []byte
	}{
		{"unknown key", "retries", edit(func(d map[string]interface{}) { d["retries"] = 3 })},
		{"missing key", "defaultDeadlineSeconds", edit(func(d map[string]interface{}) { delete(d, "defaultDeadlineSeconds") })},
		{"wrong type", "defaultDeadlineSeconds", edit(func(d map[string]interface{}) { d["defaultDeadlineSeconds"] = "5" })},
		{"not positive", "defaultDeadlineSeconds", edit(func(d map[string]interface{}) { d["defaultDeadlineSeconds"] = 0 })},
		{"backoff order", "reconnectBackoffMs", edit(func(d map[string]interface{}) {
			d["reconnectBackoffMs"].(map[string]interface{})["min"] = 5000
		})},
		{"backoff type", "reconnectBackoffMs.max", edit(func(d map[string]interface{}) {
			d["reconnectBackoffMs"].(map[string]interface{})["max"] = 1.5
		})},
		{"attempts", "serviceConfig.methodConfig[0].retryPolicy.maxAttempts", edit(func(d map[string]interface{}) {
			method(d)["retryPolicy"].(map[string]interface{})["maxAttempts"] = 9
		})},
		{"backoff duration", "serviceConfig.methodConfig[0].retryPolicy.initialBackoff", edit(func(d map[string]interface{}) {
			method(d)["retryPolicy"].(map[string]interface{})["initialBackoff"] = "soon"
		})},
	}
	for _, c := range cases {
		_, err := ParsePolicy(c.text, "client_policy.json")
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Key != c.key {
			t.Errorf("%s: got %v, want an error naming '%s'", c.name, err, c.key)
		}
	}
	if _, err := ParsePolicy(embeddedPolicy, "client_policy.json"); err != nil {
		t.Errorf("the shipped file: %v", err)
	}
}

// grpc-go gets the service config without the retry policy (the client applies it
// itself); with one attempt, also without waitForReady, as the C++ client.
func TestServiceConfigForGrpcGo(t *testing.T) {
	p := ClientPolicy()
	var config struct {
		LoadBalancingConfig []map[string]interface{}
		MethodConfig        []map[string]interface{}
	}
	if err := json.Unmarshal([]byte(p.ServiceConfigJSON(3)), &config); err != nil {
		t.Fatal(err)
	}
	if _, ok := config.LoadBalancingConfig[0]["round_robin"]; !ok {
		t.Errorf("no round_robin: %v", config.LoadBalancingConfig)
	}
	for _, m := range config.MethodConfig {
		if _, ok := m["retryPolicy"]; ok {
			t.Errorf("retryPolicy given to grpc-go: %v", m)
		}
		if m["waitForReady"] != true {
			t.Errorf("waitForReady missing: %v", m)
		}
	}
	if strings.Contains(p.ServiceConfigJSON(1), "waitForReady") {
		t.Errorf("one attempt keeps waitForReady: %s", p.ServiceConfigJSON(1))
	}
}

// The retry loop, on an invoker that fails as told: retryable codes are retried up to
// the attempts, with a backoff that stays within the deadline; others are not.
func TestRetryInterceptor(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond, BackoffMultiplier: 2,
		RetryableCodes: []codes.Code{codes.Unavailable, codes.Canceled}}
	// The longest wait each time: random() gives (almost) 1.
	longest := func() float64 { return 0.999999 }
	run := func(ctx context.Context, p RetryPolicy, fail []codes.Code) (int, error) {
		calls := 0
		invoker := func(ctx context.Context, method string, req, reply interface{},
			cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			calls++
			if calls <= len(fail) {
				return status.Error(fail[calls-1], "told to fail")
			}
			return nil
		}
		err := retryInterceptor(p, longest)(ctx, "/gpuest.v1.Estimator/Estimate", nil, nil, nil, invoker)
		return calls, err
	}
	bg := context.Background()
	start := time.Now()
	if calls, err := run(bg, policy, []codes.Code{codes.Unavailable, codes.Canceled}); err != nil || calls != 3 {
		t.Errorf("two retryable failures: %d calls, %v; want 3 calls and the answer", calls, err)
	}
	// Waits of up to 10 ms, then up to 20 ms (x2).
	if waited := time.Since(start); waited < 29*time.Millisecond {
		t.Errorf("two retries after %v, want the backoff's 10 + 20 ms", waited)
	}
	if calls, err := run(bg, policy, []codes.Code{codes.Unavailable, codes.Unavailable, codes.Unavailable}); status.Code(err) != codes.Unavailable || calls != 3 {
		t.Errorf("three failures: %d calls, %v; want 3 calls and UNAVAILABLE", calls, err)
	}
	if calls, err := run(bg, policy, []codes.Code{codes.InvalidArgument}); status.Code(err) != codes.InvalidArgument || calls != 1 {
		t.Errorf("INVALID_ARGUMENT: %d calls, %v; want 1 call", calls, err)
	}
	one := policy
	one.MaxAttempts = 1
	if calls, _ := run(bg, one, []codes.Code{codes.Unavailable}); calls != 1 {
		t.Errorf("MaxAttempts 1: %d calls", calls)
	}
	// A backoff that would pass the deadline is not waited for: the last error at once.
	slow := policy
	slow.InitialBackoff, slow.MaxBackoff = time.Second, time.Second
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if calls, err := run(ctx, slow, []codes.Code{codes.Unavailable, codes.Unavailable}); calls != 1 || status.Code(err) != codes.Unavailable {
		t.Errorf("a 1 s backoff within 200 ms: %d calls, %v; want 1 call and UNAVAILABLE", calls, err)
	}
	if waited := time.Since(start); waited > 100*time.Millisecond {
		t.Errorf("returned after %v, want at once", waited)
	}
	// A caller's cancellation is not retried.
	cancelled, cancelNow := context.WithCancel(bg)
	cancelNow()
	if calls, _ := run(cancelled, policy, []codes.Code{codes.Canceled}); calls != 1 {
		t.Errorf("caller cancelled: %d calls", calls)
	}
}

// The target rules of the C++ and Python clients, and options refused naming the field.
func TestOptionsAreChecked(t *testing.T) {
	for _, c := range []struct {
		targets []string
		want    string
	}{
		{[]string{"127.0.0.1:1", "127.0.0.2:2"}, "ipv4:127.0.0.1:1,127.0.0.2:2"},
		{[]string{"[::1]:1", "[::1]:2"}, "ipv6:[::1]:1,[::1]:2"},
		{[]string{"dns:///gpuest.svc:50051"}, "dns:///gpuest.svc:50051"},
	} {
		cl, err := NewClient(Options{Targets: c.targets})
		if err != nil || cl.Target() != c.want {
			t.Errorf("%v: %v %v, want %s", c.targets, cl, err, c.want)
			continue
		}
		cl.Close()
	}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Targets: []string{"a.example:1", "b.example:2"}}, "Targets: several targets must all be IPv4"},
		{Options{Targets: []string{"127.0.0.1:1", ""}}, "Targets[1]: is empty"},
		{Options{MaxAttempts: -1}, "MaxAttempts"},
		{Options{DefaultDeadline: -time.Second}, "DefaultDeadline"},
		{Options{TLS: TLSOptions{CertFile: "c.pem"}}, "TLS.KeyFile: required with TLS.CertFile"},
		{Options{TLS: TLSOptions{CertFile: "c.pem", KeyFile: "k.pem"}}, "TLS.CAFile: required"},
		{Options{TLS: TLSOptions{CAFile: "/nonexistent/ca.pem"}}, "TLS.CAFile: cannot read /nonexistent/ca.pem"},
		{Options{TLS: TLSOptions{CAFile: env["GPUEST_POLICY"]}}, "is not a PEM file"},
	} {
		_, err := NewClient(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}
