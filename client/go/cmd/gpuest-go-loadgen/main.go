// gpuest-go-loadgen: the Go client's closed-loop load against a gpuest-server, the
// counterpart of the C++ client's bench/loadgen.cc (gpuest-loadgen) with the same
// flags and the same output lines, so that bench/go_client_vs_cpp.py runs both against
// one server and compares them. Each of -concurrency goroutines keeps one call
// outstanding for -duration; it prints throughput, latency percentiles, errors, the
// client's allocations per call (Go's heap allocations over the measured span, every
// goroutine of the process counted) and its CPU time per call.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuest/gpuest/client/go/gpuest"
	"github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	target := flag.String("target", "127.0.0.1:50051", "server address(es), comma-separated")
	rpc := flag.String("rpc", "estimate", "estimate or check_placement")
	concurrency := flag.Int("concurrency", 1, "calls kept outstanding at once")
	duration := flag.Duration("duration", 10*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", time.Second, "unmeasured load before measuring")
	deadline := flag.Duration("deadline", time.Second, "deadline of each call")
	request := flag.String("request", "examples/cnn.json",
		"estimate: a ModelDescription (or EstimateRequest) in JSON; check_placement: a CheckPlacementRequest in JSON")
	gpu := flag.String("gpu", "", "estimate: target GPU model of each request")
	cpuProfile := flag.String("cpuprofile", "", "write the measured span's CPU profile here (go tool pprof)")
	flag.Parse()
	if *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "-concurrency must be at least 1")
		os.Exit(2)
	}
	text, err := os.ReadFile(*request)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	client, err := gpuest.NewClient(gpuest.Options{Targets: strings.Split(*target, ","),
		DefaultDeadline: *deadline})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()

	var call func(context.Context) error
	switch *rpc {
	case "estimate":
		req, err := gpuest.ParseRequest(text)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", *request, err)
			os.Exit(2)
		}
		if *gpu != "" {
			req.Gpu = *gpu
		}
		call = func(ctx context.Context) error { _, err := client.Estimate(ctx, req); return err }
	case "check_placement":
		req := &gpuestv1.CheckPlacementRequest{}
		if err := protojson.Unmarshal(text, req); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", *request, err)
			os.Exit(2)
		}
		call = func(ctx context.Context) error { _, err := client.CheckPlacement(ctx, req); return err }
	default:
		fmt.Fprintf(os.Stderr, "-rpc: '%s' is not estimate or check_placement\n", *rpc)
		os.Exit(2)
	}
	if err := call(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "first call failed:", err)
		os.Exit(3)
	}

	measureFrom := time.Now().Add(*warmup)
	until := measureFrom.Add(*duration)
	var mu sync.Mutex
	var latencies []float64
	errors := 0
	firstError := ""
	var wg sync.WaitGroup
	for i := 0; i < *concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]float64, 0, 1<<16)
			var failed []error
			for {
				start := time.Now()
				if !start.Before(until) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), *deadline)
				err := call(ctx)
				cancel()
				end := time.Now()
				if start.Before(measureFrom) || end.After(until) {
					continue
				}
				if err != nil {
					failed = append(failed, err)
				} else {
					mine = append(mine, float64(end.Sub(start))/float64(time.Microsecond))
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			if errors == 0 && len(failed) > 0 {
				firstError = failed[0].Error()
			}
			errors += len(failed)
			mu.Unlock()
		}()
	}
	// Allocations and CPU time over the measured span, sampled beside the loops.
	time.Sleep(time.Until(measureFrom))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpuBefore := cpuTime()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "-cpuprofile:", err)
			os.Exit(2)
		}
		defer f.Close()
	}
	time.Sleep(time.Until(until))
	pprof.StopCPUProfile()
	runtime.ReadMemStats(&after)
	cpu := cpuTime() - cpuBefore
	wg.Wait()

	sort.Float64s(latencies)
	calls := len(latencies)
	fmt.Printf("target=%s concurrency=%d duration=%.1fs rpc=%s request=%s client=go\n",
		client.Target(), *concurrency, duration.Seconds(), *rpc, *request)
	fmt.Printf("grpc: calls=%d throughput=%.0f/s p50=%.0fus p99=%.0fus p999=%.0fus errors=%d\n",
		calls, float64(calls)/duration.Seconds(), quantile(latencies, 0.50),
		quantile(latencies, 0.99), quantile(latencies, 0.999), errors)
	if errors > 0 {
		fmt.Println("first error:", firstError)
	}
	if calls > 0 {
		fmt.Printf("allocations per call: %.1f (%.0f bytes)\n",
			float64(after.Mallocs-before.Mallocs)/float64(calls),
			float64(after.TotalAlloc-before.TotalAlloc)/float64(calls))
		fmt.Printf("client CPU per gRPC call: %.0fus (this load generator's own share of the cores)\n",
			float64(cpu.Microseconds())/float64(calls))
	}
	if errors > 0 {
		os.Exit(1)
	}
}

// quantile is common/quantile.h's QuantileOfSorted: the nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := math.Ceil(math.Max(0, math.Min(1, q)) * float64(len(sorted)))
	index := 0
	if rank > 1 {
		index = int(rank) - 1
	}
	if index > len(sorted)-1 {
		index = len(sorted) - 1
	}
	return sorted[index]
}

// cpuTime is this process's CPU time (user and system, every thread) so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
