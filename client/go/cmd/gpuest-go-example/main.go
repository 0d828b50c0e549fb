// gpuest-go-example: what a scheduler plugin does for one pod and one node, from the
// command line. It reads a job (a ModelDescription or EstimateRequest in JSON, as
// `gpuest estimate FILE` does), then, as PreFilter, Filter, Score and the pod patch
// would: estimates it once for the node's GPU model, asks whether it fits a GPU with
// the given total and free memory, scores the node and sizes the pod's memory request.
//
//	gpuest-go-example -target 127.0.0.1:50051 -gpu a100-40gb -free-mib 30000 examples/cnn.json
//
// Exit codes: 0 fits, 1 does not fit, 2 bad input, 3 gpuest had no opinion (it could
// not answer: the scheduler would place the pod as if gpuest were not there).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpuest/gpuest/client/go/gpuest"
)

func main() {
	target := flag.String("target", gpuest.DefaultTarget, "server address(es), comma-separated")
	gpu := flag.String("gpu", "a100-40gb", "the node's GPU model (catalog id, alias or nvidia-smi name)")
	totalMiB := flag.Uint64("total-mib", 0, "the GPU's total memory as the node reports it; 0: the catalog's, GPU empty")
	freeMiB := flag.Uint64("free-mib", 0, "the GPU's free memory as the node reports it (with -total-mib)")
	scheduler := flag.String("scheduler", "hami", "whose memory request to size: hami, volcano, kai, alibaba")
	deadline := flag.Duration("deadline", time.Second, "deadline of each call")
	caFile := flag.String("tls-ca", "", "PEM CA of the server's certificate: talk TLS")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gpuest-go-example [flags] FILE\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	text, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fail(2, err)
	}
	req, err := gpuest.ParseRequest(text)
	if err != nil {
		fail(2, fmt.Errorf("%s: %v", flag.Arg(0), err))
	}
	client, err := gpuest.NewClient(gpuest.Options{
		Targets: strings.Split(*target, ","), TLS: gpuest.TLSOptions{CAFile: *caFile}})
	if err != nil {
		fail(2, err)
	}
	defer client.Close()

	// PreFilter: the pod's job, estimated at most once per GPU model this cycle.
	job, err := gpuest.NewPodJob("example-pod", req, 1)
	if err != nil {
		fail(2, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	// Filter: this node's one GPU.
	node := []gpuest.GPUState{{Model: *gpu, TotalBytes: *totalMiB << 20, FreeBytes: *freeMiB << 20}}
	result, err := gpuest.Filter(ctx, client, job, node)
	if no := gpuest.FailOpen(err); no != nil {
		fmt.Println(no.Reason)
		if no.RequestRefused {
			os.Exit(2)
		}
		os.Exit(3)
	}
	estimate, err := job.Estimate(ctx, client, *gpu) // Answered from the PodJob: no call.
	if err != nil {
		fail(3, err)
	}
	fmt.Printf("estimate on %s: reserve %d bytes (estimator %s); %d Estimate call(s)\n", *gpu,
		estimate.GetRecommendation().GetMemoryBytes(), estimate.GetRecommendation().GetEstimatorId(),
		job.EstimateCalls())
	// Score: the node's best GPU.
	fmt.Printf("filter: fits=%v score=%d/%d\n", result.Fits, gpuest.ScoreNode(result), gpuest.MaxScore)
	if !result.Fits {
		fmt.Println(result.Reason)
	}
	// The pod patch's memory request.
	size, err := gpuest.Size(estimate, gpuest.Scheduler(*scheduler))
	if err != nil {
		fail(2, err)
	}
	where := "resources.limits"
	if size.Annotation {
		where = "annotation"
	}
	fmt.Printf("size: %s %s = %s (%s, enforced=%v)\n", where, size.Key, size.Value(), size.Unit, size.Enforced)
	if !result.Fits {
		os.Exit(1)
	}
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "gpuest-go-example:", err)
	os.Exit(code)
}
