package gpuest

import (
	_ "embed" // client_policy.json
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// The policy every gpuest client applies, C++, Python and Go: the build copies
// proto/gpuest/v1/client_policy.json here (client/go/CMakeLists.txt), so that this
// package carries the one copy of its numbers.
//
//go:embed client_policy.json
var embeddedPolicy []byte

// Policy is client_policy.json as this client applies it.
type Policy struct {
	// A call's deadline when its context has none.
	DefaultDeadline time.Duration
	// gRPC's reconnect backoff: the first wait, the shortest connect attempt, the longest wait.
	InitialReconnectBackoff time.Duration
	MinReconnectBackoff     time.Duration
	MaxReconnectBackoff     time.Duration
	// The retry policy of the service config's method configs (one for all of them).
	Retry RetryPolicy
	// The service config as the file has it, JSON; ServiceConfigJSON derives gRPC's.
	ServiceConfig json.RawMessage
}

// RetryPolicy is gRPC's retryPolicy (gRFC A6). grpc-go 1.33 applies none unless
// GRPC_GO_RETRY=on, so this client applies it itself, as an interceptor, and gives
// grpc-go the service config without it (ServiceConfigJSON): one retry loop, whatever
// the grpc-go version.
type RetryPolicy struct {
	MaxAttempts       int
	InitialBackoff    time.Duration
	MaxBackoff        time.Duration
	BackoffMultiplier float64
	RetryableCodes    []codes.Code
}

// grpcMaxAttempts is gRPC's limit: a retry policy's maxAttempts above it counts as 5.
const grpcMaxAttempts = 5

// PolicyError names the file and the key of a policy document that is not one.
type PolicyError struct {
	File, Key, Problem string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s: '%s' %s", e.File, e.Key, e.Problem)
}

// EmbeddedPolicy is the policy this package was built with. It is part of the build,
// so one that does not parse is a defect of the build (a test catches it); it then
// panics at the first client made, naming the key.
func EmbeddedPolicy() Policy {
	p, err := ParsePolicy(embeddedPolicy, "client_policy.json")
	if err != nil {
		panic(err)
	}
	return p
}

// ParsePolicy reads a policy document as strictly as the C++ and Python clients do: a
// key missing or unknown, or a value of the wrong type, is a *PolicyError naming it.
func ParsePolicy(text []byte, file string) (Policy, error) {
	fail := func(key, problem string) (Policy, error) {
		return Policy{}, &PolicyError{File: file, Key: key, Problem: problem}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(text, &top); err != nil {
		return fail("", "is not a JSON object: "+err.Error())
	}
	if key, problem := exactKeys(top, "doc", "defaultDeadlineSeconds", "reconnectBackoffMs",
		"serviceConfig"); key != "" {
		return fail(key, problem)
	}
	var doc map[string]json.RawMessage // Prose for people; any keys.
	if json.Unmarshal(top["doc"], &doc) != nil || doc == nil {
		return fail("doc", "must be a JSON object")
	}
	var p Policy
	var seconds float64
	if json.Unmarshal(top["defaultDeadlineSeconds"], &seconds) != nil {
		return fail("defaultDeadlineSeconds", "must be a number")
	}
	if !(seconds > 0) {
		return fail("defaultDeadlineSeconds", "must be positive")
	}
	p.DefaultDeadline = time.Duration(seconds * float64(time.Second))

	var backoff map[string]json.RawMessage
	if json.Unmarshal(top["reconnectBackoffMs"], &backoff) != nil || backoff == nil {
		return fail("reconnectBackoffMs", "must be a JSON object")
	}
	if key, problem := exactKeys(backoff, "initial", "min", "max"); key != "" {
		return fail("reconnectBackoffMs."+key, problem)
	}
	ms := map[string]int{}
	for key, raw := range backoff {
		var v int
		if json.Unmarshal(raw, &v) != nil {
			return fail("reconnectBackoffMs."+key, "must be an integer")
		}
		ms[key] = v
	}
	if !(0 < ms["min"] && ms["min"] <= ms["initial"] && ms["initial"] <= ms["max"]) {
		return fail("reconnectBackoffMs", "must hold 0 < min <= initial <= max")
	}
	p.InitialReconnectBackoff = time.Duration(ms["initial"]) * time.Millisecond
	p.MinReconnectBackoff = time.Duration(ms["min"]) * time.Millisecond
	p.MaxReconnectBackoff = time.Duration(ms["max"]) * time.Millisecond

	// The service config is gRPC's to check; read here is the retry policy this client
	// applies itself, the same in every method config.
	var config struct {
		MethodConfig []struct {
			RetryPolicy *struct {
				MaxAttempts          *int         `json:"maxAttempts"`
				InitialBackoff       string       `json:"initialBackoff"`
				MaxBackoff           string       `json:"maxBackoff"`
				BackoffMultiplier    *float64     `json:"backoffMultiplier"`
				RetryableStatusCodes []codes.Code `json:"retryableStatusCodes"`
			} `json:"retryPolicy"`
		} `json:"methodConfig"`
	}
	if err := json.Unmarshal(top["serviceConfig"], &config); err != nil {
		return fail("serviceConfig", "is not a service config: "+err.Error())
	}
	if len(config.MethodConfig) == 0 {
		return fail("serviceConfig.methodConfig", "must have a method config")
	}
	for i, method := range config.MethodConfig {
		where := fmt.Sprintf("serviceConfig.methodConfig[%d].retryPolicy", i)
		r := method.RetryPolicy
		if r == nil {
			return fail(where, "is missing")
		}
		if r.MaxAttempts == nil || *r.MaxAttempts < 2 || *r.MaxAttempts > grpcMaxAttempts {
			return fail(where+".maxAttempts", "must be 2 to 5 (gRPC's limits)")
		}
		initial, err1 := protoDuration(r.InitialBackoff)
		maxBackoff, err2 := protoDuration(r.MaxBackoff)
		if err1 != nil || !(initial > 0) {
			return fail(where+".initialBackoff", "must be a positive duration such as \"0.01s\"")
		}
		if err2 != nil || maxBackoff < initial {
			return fail(where+".maxBackoff", "must be a duration of at least initialBackoff")
		}
		if r.BackoffMultiplier == nil || !(*r.BackoffMultiplier > 0) {
			return fail(where+".backoffMultiplier", "must be positive")
		}
		if len(r.RetryableStatusCodes) == 0 {
			return fail(where+".retryableStatusCodes", "must name a status code")
		}
		retry := RetryPolicy{*r.MaxAttempts, initial, maxBackoff, *r.BackoffMultiplier,
			r.RetryableStatusCodes}
		if i > 0 && !sameRetry(retry, p.Retry) {
			return fail(where, "differs from another method config's: one policy")
		}
		p.Retry = retry
	}
	p.ServiceConfig = append(json.RawMessage(nil), top["serviceConfig"]...)
	return p, nil
}

// ServiceConfigJSON is the service config grpc-go gets for a client that makes at most
// maxAttempts attempts a call: without the retry policy, which the client applies
// itself; with 1, also without waitForReady, so that a call fails at once while no
// server is reachable (as the C++ client's max_attempts 1).
func (p Policy) ServiceConfigJSON(maxAttempts int) string {
	var config map[string]interface{}
	if err := json.Unmarshal(p.ServiceConfig, &config); err != nil {
		panic(err) // ParsePolicy read it.
	}
	methods, _ := config["methodConfig"].([]interface{})
	for _, m := range methods {
		if method, ok := m.(map[string]interface{}); ok {
			delete(method, "retryPolicy")
			if maxAttempts <= 1 {
				delete(method, "waitForReady")
			}
		}
	}
	out, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	return string(out)
}

func exactKeys(obj map[string]json.RawMessage, want ...string) (key, problem string) {
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			return k, "is missing"
		}
	}
	var unknown []string
	for k := range obj {
		known := false
		for _, w := range want {
			known = known || k == w
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		first := unknown[0]
		for _, u := range unknown {
			if u < first {
				first = u
			}
		}
		return first, "is not a known key"
	}
	return "", ""
}

// protoDuration reads the JSON form of google.protobuf.Duration ("0.2s").
func protoDuration(s string) (time.Duration, error) {
	if !strings.HasSuffix(s, "s") {
		return 0, fmt.Errorf("%q: not a duration", s)
	}
	seconds, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

func sameRetry(a, b RetryPolicy) bool {
	if a.MaxAttempts != b.MaxAttempts || a.InitialBackoff != b.InitialBackoff ||
		a.MaxBackoff != b.MaxBackoff || a.BackoffMultiplier != b.BackoffMultiplier ||
		len(a.RetryableCodes) != len(b.RetryableCodes) {
		return false
	}
	for i := range a.RetryableCodes {
		if a.RetryableCodes[i] != b.RetryableCodes[i] {
			return false
		}
	}
	return true
}
