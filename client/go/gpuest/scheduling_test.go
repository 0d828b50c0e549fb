package gpuest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/protobuf/proto"
)

const gib = 1 << 30

// Size sets what `gpuest pod-patch` sets, for every scheduler, from the same estimate.
func TestSizeIsThePodPatchsRequest(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	for _, name := range []string{"cnn.json", "transformer.json"} {
		estimate, err := c.Estimate(within(t, 30*time.Second), exampleRequest(t, name, "a100-40gb"))
		if err != nil {
			t.Fatal(err)
		}
		for _, scheduler := range []Scheduler{HAMi, Volcano, KAI, Alibaba} {
			size, err := Size(estimate, scheduler)
			if err != nil {
				t.Fatal(err)
			}
			r := cli(t, "--target="+s.target, "pod-patch", "--scheduler="+string(scheduler),
				"--gpu=a100-40gb", example(t, name))
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", r.commandLine, r.code, r.stderr)
			}
			var patch []struct{ Op, Path, Value string }
			if err := json.Unmarshal(r.stdout, &patch); err != nil {
				t.Fatalf("%s: %v: %s", r.commandLine, err, r.stdout)
			}
			key := strings.ReplaceAll(size.Key, "/", "~1")
			wantPath := "/spec/containers/0/resources/limits/" + key
			if size.Annotation {
				wantPath = "/metadata/annotations/" + key
			}
			values := map[string]string{}
			for _, op := range patch {
				values[op.Path] = op.Value
			}
			if v, ok := values[wantPath]; !ok || v != size.Value() {
				t.Errorf("%s %s: the patch sets %s to %q; Size says %s %s", name, scheduler, wantPath, v,
					size.Value(), size.Unit)
			}
			// The same estimate behind both.
			if got := values["/metadata/annotations/gpuest.io~1requirement-bytes"]; got !=
				fmtUint(estimate.GetRecommendation().GetMemoryBytes()) {
				t.Errorf("%s: the CLI's patch sizes %s bytes, the Go estimate %d", name, got,
					estimate.GetRecommendation().GetMemoryBytes())
			}
		}
	}
	// Rounded up, always; 0 bytes and unknown schedulers refused.
	r := &gpuestv1.EstimateResponse{Recommendation: &gpuestv1.Recommendation{MemoryBytes: gib + 1}}
	if m, _ := Size(r, HAMi); m.Amount != 1025 || m.Unit != "MiB" || !m.Enforced {
		t.Errorf("1 GiB + 1 byte for HAMi: %+v", m)
	}
	if m, _ := Size(r, Alibaba); m.Amount != 2 || m.Unit != "GiB" || m.Enforced {
		t.Errorf("1 GiB + 1 byte for gpushare: %+v", m)
	}
	if _, err := Size(&gpuestv1.EstimateResponse{}, HAMi); err == nil {
		t.Error("0 bytes sized")
	}
	if _, err := Size(nil, HAMi); err == nil {
		t.Error("no answer sized")
	}
	if _, err := Size(r, "yarn"); err == nil || !strings.Contains(err.Error(), "'yarn' is not one of") {
		t.Errorf("unknown scheduler: %v", err)
	}
}

func fmtUint(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Filter asks CheckPlacement per GPU with the node's figures, the candidate given by
// one estimate per GPU model for the whole cycle.
func TestFilterJudgesEachGPUWithOneEstimatePerModel(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	job, err := NewPodJob("ns/train", exampleRequest(t, "cnn.json", ""), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	estimate, err := c.Estimate(ctx, exampleRequest(t, "cnn.json", "a100-40gb"))
	if err != nil {
		t.Fatal(err)
	}
	need := estimate.GetRecommendation().GetMemoryBytes()

	// 40 nodes judged at once, as kube-scheduler's Filter runs: one Estimate.
	free := []uint64{40 * gib, need + gib/2, need / 2}
	results := make([]FilterResult, 40)
	errs := make([]error, 40)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			gpus := []GPUState{{Index: 0, Model: "a100-40gb", TotalBytes: 40 * gib, FreeBytes: free[i%3]}}
			results[i], errs[i] = Filter(ctx, c, job, gpus)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if job.EstimateCalls() != 1 {
		t.Errorf("%d Estimate calls for 40 nodes of one GPU model, want 1", job.EstimateCalls())
	}
	empty, tight, full := results[0], results[1], results[2]
	if !empty.Fits || !tight.Fits || full.Fits {
		t.Fatalf("fits: empty %v, tight %v, full %v; want true, true, false", empty.Fits, tight.Fits, full.Fits)
	}
	if got := empty.Checks[0].GetCandidateBytes(); got != need {
		t.Errorf("the candidate's bytes %d, the estimate's %d", got, need)
	}
	if !strings.Contains(full.Reason, "gpuest: no GPU of the node takes the pod; GPU 0: ") ||
		!strings.Contains(full.Reason, strings.Join(full.Checks[0].GetReasons(), " ")) {
		t.Errorf("the reason of a full node: %q", full.Reason)
	}
	// The same question asked directly gives the same answer.
	direct, err := c.CheckPlacement(ctx, &gpuestv1.CheckPlacementRequest{
		Gpu: &gpuestv1.PlacementGpu{Gpu: &gpuestv1.PlacementGpu_NodeReported{NodeReported: &gpuestv1.NodeReportedGpu{
			TotalBytes: 40 * gib, FreeBytes: need / 2, Model: "a100-40gb"}}},
		Candidate: EstimatedJob("ns/train", estimate),
	})
	if err != nil {
		t.Fatal(err)
	}
	direct.ServerLatencyUs, full.Checks[0].ServerLatencyUs = 0, 0
	if !proto.Equal(direct, full.Checks[0]) {
		t.Errorf("Filter's check %v, asked directly %v", full.Checks[0], direct)
	}

	// Score: packing (the fuller GPU after placing scores higher), 0 for no fit.
	if se, st := ScoreNode(empty), ScoreNode(tight); !(50 <= se && se < st && st <= MaxScore) {
		t.Errorf("scores: empty GPU %d, tight GPU %d; want 50 <= empty < tight <= 100", se, st)
	}
	if sf := ScoreNode(full); sf != 0 {
		t.Errorf("score of a node that does not fit: %d", sf)
	}

	// Another GPU model: a second estimate; two GPUs needed, one full: no fit, said so.
	job2, _ := NewPodJob("ns/train", exampleRequest(t, "cnn.json", ""), 2)
	two := []GPUState{
		{Index: 0, Model: "h100-80gb", TotalBytes: 80 * gib, FreeBytes: 80 * gib},
		{Index: 1, Model: "a100-40gb", TotalBytes: 40 * gib, FreeBytes: need / 2},
	}
	r, err := Filter(ctx, c, job2, two)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fits || job2.EstimateCalls() != 2 || !strings.Contains(r.Reason, "asks for 2 GPUs") ||
		!strings.Contains(r.Reason, "1 of the node's 2 do") {
		t.Errorf("two GPUs needed, one fits: %+v (%d estimates)", r, job2.EstimateCalls())
	}
	two[1].FreeBytes = 40 * gib
	if r, err := Filter(ctx, c, job2, two); err != nil || !r.Fits || job2.EstimateCalls() != 2 {
		t.Errorf("two GPUs needed, both fit: %+v %v (%d estimates)", r, err, job2.EstimateCalls())
	}

	// A description that names its GPU does not go on another; no GPUs: no opinion.
	pinned, _ := NewPodJob("ns/pinned", exampleRequest(t, "cnn.json", "h100-80gb"), 1)
	if r, err := Filter(ctx, c, pinned, []GPUState{{Model: "a100-40gb", TotalBytes: 40 * gib, FreeBytes: 40 * gib}}); err != nil ||
		r.Fits || !strings.Contains(r.Reason, "names GPU 'h100-80gb', not 'a100-40gb'") {
		t.Errorf("pinned to h100 on an a100 node: %+v %v", r, err)
	}
	if r, err := Filter(ctx, c, pinned, nil); err != nil || !r.Fits {
		t.Errorf("a node without GPUs: %+v %v", r, err)
	}
	// The catalog's GPU, empty, when the node reports no memory.
	if r, err := Filter(ctx, c, job, []GPUState{{Model: "a100-40gb"}}); err != nil || !r.Fits ||
		r.Checks[0].GetGpu() != "a100-40gb" {
		t.Errorf("catalog GPU: %+v %v", r, err)
	}
	// Bad node figures: the server's reason, naming the field.
	if _, err := Filter(ctx, c, job, []GPUState{{Model: "a100-40gb", TotalBytes: gib, FreeBytes: 2 * gib}}); err == nil ||
		!strings.Contains(err.Error(), "free_bytes") {
		t.Errorf("free above total: %v", err)
	}
	if _, err := Filter(ctx, c, nil, nil); err == nil {
		t.Error("Filter without a PodJob")
	}
	if _, err := NewPodJob("ns/x", &gpuestv1.EstimateRequest{}, 1); err == nil {
		t.Error("a PodJob without a description")
	}
}

// RankGpus' answer scored: fitting GPUs 50..100, the tightest highest; others 0.
func TestScoreRanking(t *testing.T) {
	s := sharedServer(t)
	c := newClient(t, Options{Targets: []string{s.target}})
	r, err := c.RankGpus(within(t, 30*time.Second), &gpuestv1.RankGpusRequest{Job: &gpuestv1.PlacementJob{
		Job: &gpuestv1.PlacementJob_Description{Description: exampleRequest(t, "cnn.json", "")}}})
	if err != nil {
		t.Fatal(err)
	}
	// Fitting GPUs score 50..100, the fuller (less headroom for their size) the higher.
	fitting := 0
	for _, g := range r.GetGpus() {
		score := ScoreRanking(g)
		if !g.GetFits() {
			if score != 0 {
				t.Errorf("%s does not fit but scores %d", g.GetGpu(), score)
			}
			continue
		}
		fitting++
		if score < 50 || score > MaxScore {
			t.Errorf("%s fits and scores %d", g.GetGpu(), score)
		}
		share := float64(g.GetHeadroomBytes()) / float64(g.GetCapacityBytes())
		for _, h := range r.GetGpus() {
			hShare := float64(h.GetHeadroomBytes()) / float64(h.GetCapacityBytes())
			if h.GetFits() && hShare < share && ScoreRanking(h) < score {
				t.Errorf("%s (headroom %.2f of it) scores %d, below %s (%.2f) at %d",
					h.GetGpu(), hShare, ScoreRanking(h), g.GetGpu(), share, score)
			}
		}
	}
	if fitting == 0 {
		t.Errorf("no GPU fits: %v", r)
	}
	if ScoreRanking(nil) != 0 || ScorePlacement(nil) != 0 {
		t.Error("no answer scores")
	}
	bad := &gpuestv1.CheckPlacementResponse{Fits: true, CapacityBytes: 40 * gib, HeadroomBytes: gib,
		Verdict: gpuestv1.ContentionVerdict_CONTENTION_VERDICT_BAD, WorstPredictedSpeed: 0.425}
	if got := ScorePlacement(bad); got != 25 {
		t.Errorf("a fit beside a bad pairing at half of 0.85: %d, want 25", got)
	}
	if got := ScorePlacement(&gpuestv1.CheckPlacementResponse{Fits: true, CapacityBytes: 40 * gib,
		HeadroomBytes: 0, Verdict: gpuestv1.ContentionVerdict_CONTENTION_VERDICT_ALONE}); got != MaxScore {
		t.Errorf("a fit that fills the GPU exactly: %d", got)
	}
}

// The example program walks one pod and one node through PreFilter, Filter, Score and
// Size; its exit code says fits (0), does not fit (1), refused (2), no opinion (3).
func TestExampleProgram(t *testing.T) {
	s := sharedServer(t)
	program := filepath.Join(env["GPUEST_GO_BIN"], "gpuest-go-example")
	run := func(args ...string) (int, string) {
		out, err := exec.Command(program, append([]string{"-target=" + s.target}, args...)...).CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", program, err)
		}
		return code, string(out)
	}
	c := newClient(t, Options{Targets: []string{s.target}})
	estimate, err := c.Estimate(within(t, 30*time.Second), exampleRequest(t, "cnn.json", "a100-40gb"))
	if err != nil {
		t.Fatal(err)
	}
	size, _ := Size(estimate, HAMi)
	code, out := run("-gpu=a100-40gb", "-total-mib=40960", "-free-mib=40960", example(t, "cnn.json"))
	if code != 0 || !strings.Contains(out, "filter: fits=true score=") ||
		!strings.Contains(out, "size: resources.limits nvidia.com/gpumem = "+size.Value()+" (MiB, enforced=true)") ||
		!strings.Contains(out, "; 1 Estimate call(s)") {
		t.Errorf("an empty GPU: exit %d\n%s", code, out)
	}
	if code, out := run("-gpu=a100-40gb", "-total-mib=40960", "-free-mib=100", example(t, "cnn.json")); code != 1 ||
		!strings.Contains(out, "filter: fits=false score=0/100") {
		t.Errorf("a full GPU: exit %d\n%s", code, out)
	}
	if code, out := run("-gpu=nope", example(t, "cnn.json")); code != 2 ||
		!strings.Contains(out, "no opinion: gpuest refused the pod's request") || !strings.Contains(out, "unknown GPU 'nope'") {
		t.Errorf("an unknown GPU: exit %d\n%s", code, out)
	}
	down := exec.Command(program, "-target=127.0.0.1:"+fmt.Sprint(freePort(t)), "-deadline=200ms", example(t, "cnn.json"))
	if out, err := down.CombinedOutput(); down.ProcessState.ExitCode() != 3 ||
		!strings.Contains(string(out), "no opinion: gpuest could not answer") {
		t.Errorf("gpuest down: %v\n%s", err, out)
	}
}
