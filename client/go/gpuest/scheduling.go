package gpuest

// What a scheduler plugin calls, one function per question, with no Kubernetes
// dependency (client/go/README.md shows a kube-scheduler plugin's PreFilter, Filter
// and Score calling them):
//
//	Filter          may this pod go on this node's GPUs? (CheckPlacement per GPU)
//	ScoreNode       0..100 for a node Filter passed (ScorePlacement, ScoreRanking)
//	Size            the memory to request in the pod patch
//
// A PodJob estimates the pod's job once per GPU model for the whole cycle, however
// many nodes Filter judges, and hands CheckPlacement the figures (EstimatedJob), so the
// server does not estimate again per node.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	gpuestv1 "github.com/gpuest/gpuest/client/go/gpuestv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MaxScore is kube-scheduler's framework.MaxNodeScore.
const MaxScore = 100

// ParseRequest reads a job as the CLI's `estimate FILE` reads a JSON file and the
// admission webhook reads the gpuest.io/description annotation: a ModelDescription or
// an EstimateRequest, in protobuf's JSON form. The error names the field.
func ParseRequest(text []byte) (*gpuestv1.EstimateRequest, error) {
	model := &gpuestv1.ModelDescription{}
	modelErr := protojson.Unmarshal(text, model)
	if modelErr == nil {
		return &gpuestv1.EstimateRequest{Input: &gpuestv1.EstimateRequest_Model{Model: model}}, nil
	}
	req := &gpuestv1.EstimateRequest{}
	if err := protojson.Unmarshal(text, req); err != nil {
		// The complaint about the form the text meant, so that it names the bad field.
		if strings.Contains(modelErr.Error(), "unknown field") {
			return nil, fmt.Errorf("not an EstimateRequest in JSON: %v", err)
		}
		return nil, fmt.Errorf("not a ModelDescription (nor an EstimateRequest) in JSON: %v", modelErr)
	}
	return req, nil
}

// PodJob is one pod's job for one scheduling cycle. Its Estimate runs at most once per
// GPU model, whichever of the concurrent Filter calls asks first; the others wait for
// that answer. Make one in PreFilter and keep it in the cycle state.
type PodJob struct {
	// For the server's reasons ("pod ns/name").
	Name    string
	Request *gpuestv1.EstimateRequest
	// GPUs the pod asks for, each to take one rank (the nvidia.com/gpu count; 0 counts as 1).
	GPUsNeeded int

	mu        sync.Mutex
	estimates map[string]*estimateOnce
	calls     int
}

type estimateOnce struct {
	done     chan struct{}
	response *gpuestv1.EstimateResponse
	err      error
}

// NewPodJob checks the request (a description or features must be given).
func NewPodJob(name string, req *gpuestv1.EstimateRequest, gpusNeeded int) (*PodJob, error) {
	if req == nil || req.GetInput() == nil {
		return nil, fmt.Errorf("gpuest: pod %s: the request has no model description or features", name)
	}
	if gpusNeeded < 0 {
		return nil, fmt.Errorf("gpuest: pod %s: GPUsNeeded: must be 0 or more, got %d", name, gpusNeeded)
	}
	return &PodJob{Name: name, Request: req, GPUsNeeded: gpusNeeded,
		estimates: map[string]*estimateOnce{}}, nil
}

// Estimate is the job's estimate on gpuModel (a catalog id, alias or nvidia-smi name),
// asked of the server once per model for this PodJob; callers that came while it ran
// get its answer. A failed call is not kept: a caller after it asks again.
func (j *PodJob) Estimate(ctx context.Context, c *Client, gpuModel string) (*gpuestv1.EstimateResponse, error) {
	j.mu.Lock()
	if e, ok := j.estimates[gpuModel]; ok {
		j.mu.Unlock()
		select {
		case <-e.done:
			return e.response, e.err
		case <-ctx.Done():
			code := codes.DeadlineExceeded
			if ctx.Err() == context.Canceled {
				code = codes.Canceled
			}
			return nil, &Error{Method: "Estimate", Code: code,
				Message: "waiting for this pod's estimate on " + gpuModel + ": " + ctx.Err().Error()}
		}
	}
	e := &estimateOnce{done: make(chan struct{})}
	j.estimates[gpuModel] = e
	j.calls++
	j.mu.Unlock()

	req := proto.Clone(j.Request).(*gpuestv1.EstimateRequest)
	req.Gpu = gpuModel
	e.response, e.err = c.Estimate(ctx, req)
	if e.err != nil {
		j.mu.Lock()
		delete(j.estimates, gpuModel)
		j.mu.Unlock()
	}
	close(e.done)
	return e.response, e.err
}

// EstimateCalls is how many Estimate calls this PodJob made (for a plugin's metrics).
func (j *PodJob) EstimateCalls() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.calls
}

// EstimatedJob is the candidate a CheckPlacement takes from an Estimate answer: its
// recommended memory and its utilization class (GRACT), so the server does not
// estimate again.
func EstimatedJob(name string, r *gpuestv1.EstimateResponse) *gpuestv1.PlacementJob {
	figures := &gpuestv1.EstimatedJob{PeakBytes: r.GetRecommendation().GetMemoryBytes()}
	for _, result := range r.GetResults() {
		for _, u := range result.GetUtilization() {
			if figures.Utilization == nil && u.GetMetric() == gpuestv1.UtilizationMetric_UTILIZATION_METRIC_GRACT {
				figures.Utilization = u
			}
		}
	}
	return &gpuestv1.PlacementJob{Name: name, Job: &gpuestv1.PlacementJob_Estimate{Estimate: figures}}
}

// GPUState is one GPU of a node as the node reports it.
type GPUState struct {
	Index int    // For the reasons.
	Model string // Catalog id, alias or nvidia-smi name ("NVIDIA A100-SXM4-40GB").
	// The node's figures. TotalBytes 0: the catalog's memory of Model, and the GPU is
	// taken as empty (FreeBytes unused).
	TotalBytes, FreeBytes uint64
	// The jobs running on it, as the node measures them, for the contention verdict;
	// their memory is already out of FreeBytes.
	Running []*gpuestv1.MeasuredJob
}

// FilterResult is Filter's answer for one node.
type FilterResult struct {
	Fits bool
	// Why not, per GPU, in words for the pod's event; empty when it fits.
	Reason string
	// CheckPlacement's answer per GPU in the node's order; nil where a GPU was not
	// asked (its model is not the one the description names). ScoreNode reads them.
	Checks []*gpuestv1.CheckPlacementResponse
}

// Filter answers whether the pod's job may go on a node with these GPUs: each GPU is
// judged by CheckPlacement with the node's total and free memory and its running jobs,
// the candidate given by the job's estimate on that GPU's model (PodJob: once per
// model per cycle). The node fits when at least GPUsNeeded of its GPUs do. A node
// without GPUs fits (gpuest has no opinion on it). An error is a call that failed:
// FailOpen says what to do with it.
func Filter(ctx context.Context, c *Client, job *PodJob, gpus []GPUState) (FilterResult, error) {
	if job == nil {
		return FilterResult{}, fmt.Errorf("gpuest: Filter: no PodJob (NewPodJob in PreFilter)")
	}
	result := FilterResult{Fits: true, Checks: make([]*gpuestv1.CheckPlacementResponse, len(gpus))}
	if len(gpus) == 0 {
		return result, nil
	}
	needed := job.GPUsNeeded
	if needed < 1 {
		needed = 1
	}
	named := job.Request.GetGpu()
	var misses []string
	fitting := 0
	for i, g := range gpus {
		if named != "" && !strings.EqualFold(named, g.Model) {
			misses = append(misses, fmt.Sprintf("GPU %d: the description names GPU '%s', not '%s'",
				g.Index, named, g.Model))
			continue
		}
		estimate, err := job.Estimate(ctx, c, g.Model)
		if err != nil {
			return FilterResult{}, err
		}
		req := &gpuestv1.CheckPlacementRequest{Candidate: EstimatedJob(job.Name, estimate)}
		if g.TotalBytes == 0 {
			req.Gpu = &gpuestv1.PlacementGpu{Gpu: &gpuestv1.PlacementGpu_CatalogId{CatalogId: g.Model}}
		} else {
			req.Gpu = &gpuestv1.PlacementGpu{Gpu: &gpuestv1.PlacementGpu_NodeReported{
				NodeReported: &gpuestv1.NodeReportedGpu{TotalBytes: g.TotalBytes,
					FreeBytes: g.FreeBytes, Model: g.Model}}}
		}
		for k, m := range g.Running {
			req.Existing = append(req.Existing, &gpuestv1.PlacementJob{
				Name: fmt.Sprintf("running %d", k+1), Job: &gpuestv1.PlacementJob_Measured{Measured: m}})
		}
		check, err := c.CheckPlacement(ctx, req)
		if err != nil {
			return FilterResult{}, err
		}
		result.Checks[i] = check
		if check.GetFits() {
			fitting++
		} else {
			misses = append(misses, fmt.Sprintf("GPU %d: %s", g.Index, strings.Join(check.GetReasons(), " ")))
		}
	}
	if fitting >= needed {
		return result, nil
	}
	result.Fits = false
	if needed == 1 {
		result.Reason = "gpuest: no GPU of the node takes the pod; " + strings.Join(misses, "; ")
	} else {
		result.Reason = fmt.Sprintf("gpuest: the pod asks for %d GPUs, each to take one rank; "+
			"%d of the node's %d do; %s", needed, fitting, len(gpus), strings.Join(misses, "; "))
	}
	return result, nil
}

// ScorePlacement is 0..MaxScore for one CheckPlacement answer, by the rule of the
// scheduler extender's priorities (integrations/kubernetes/kube_extender.h) on
// kube-scheduler's scale: 50..100 for a fit with acceptable contention, the fuller the
// GPU after placing the higher (packing); 10..40 for a fit with a bad contention
// verdict, by the worst predicted speed; 0 for no fit (or no answer).
func ScorePlacement(r *gpuestv1.CheckPlacementResponse) int64 {
	if r == nil || !r.GetFits() {
		return 0
	}
	if r.GetVerdict() == gpuestv1.ContentionVerdict_CONTENTION_VERDICT_BAD {
		speed := clamp01(r.GetWorstPredictedSpeed() / 0.85)
		return 10 + int64(math.Round(30*speed))
	}
	return 50 + int64(math.Round(50*fullness(r.GetHeadroomBytes(), r.GetCapacityBytes())))
}

// ScoreRanking is 0..MaxScore for one GPU model of a RankGpus answer: 50..100 for a
// fit, the tighter the higher (no contention is known there); 0 for no fit.
func ScoreRanking(g *gpuestv1.GpuRanking) int64 {
	if g == nil || !g.GetFits() {
		return 0
	}
	return 50 + int64(math.Round(50*fullness(g.GetHeadroomBytes(), g.GetCapacityBytes())))
}

// ScoreNode is a node's score from Filter's answer: its best GPU's ScorePlacement.
func ScoreNode(r FilterResult) int64 {
	var best int64
	for _, check := range r.Checks {
		if s := ScorePlacement(check); s > best {
			best = s
		}
	}
	return best
}

// fullness is how full the GPU is after placing: 1 - headroom / capacity, in 0..1.
func fullness(headroom int64, capacity uint64) float64 {
	if capacity == 0 {
		return 1
	}
	return clamp01(1 - float64(headroom)/float64(capacity))
}

func clamp01(x float64) float64 {
	return math.Max(0, math.Min(1, x))
}

// Scheduler is a GPU-sharing scheduler, by the memory request it reads from a pod.
type Scheduler string

// The schedulers Size knows, as the CLI's pod-patch --scheduler names them.
const (
	HAMi    Scheduler = "hami"    // resources.limits nvidia.com/gpumem, MiB (enforced by HAMi-core)
	Volcano Scheduler = "volcano" // resources.limits volcano.sh/gpu-memory, MiB
	KAI     Scheduler = "kai"     // annotation gpu-memory, MiB
	Alibaba Scheduler = "alibaba" // resources.limits aliyun.com/gpu-mem, GiB
)

// MemoryRequest is what the pod patch sets (integrations/kubernetes/pod_patch.h).
type MemoryRequest struct {
	Key        string // "nvidia.com/gpumem", "gpu-memory", ...
	Annotation bool   // A pod annotation (KAI) rather than a container limit.
	Amount     uint64 // In Unit, rounded up.
	Unit       string // "MiB" or "GiB".
	// Whether the scheduler's stack enforces the figure on the job (HAMi); the others
	// only count it when placing, and the job must cap itself (the recommendation's Cap).
	Enforced bool
}

// Value is the amount as the patch writes it (a string, as Kubernetes quantities and
// annotations are).
func (m MemoryRequest) Value() string { return fmt.Sprint(m.Amount) }

// Size is the memory request for the pod patch from the pod's Estimate answer: the
// recommendation in the scheduler's unit, always rounded up (a request a byte short of
// it is how a job gets killed), as `gpuest pod-patch` and the admission webhook set it.
func Size(r *gpuestv1.EstimateResponse, s Scheduler) (MemoryRequest, error) {
	bytes := r.GetRecommendation().GetMemoryBytes()
	if bytes == 0 {
		return MemoryRequest{}, fmt.Errorf("gpuest: Size: the recommended memory is 0 bytes: nothing to request")
	}
	const mib, gib = 1 << 20, 1 << 30
	m := MemoryRequest{Amount: ceilDiv(bytes, mib), Unit: "MiB"}
	switch s {
	case HAMi:
		m.Key, m.Enforced = "nvidia.com/gpumem", true
	case Volcano:
		m.Key = "volcano.sh/gpu-memory"
	case KAI:
		m.Key, m.Annotation = "gpu-memory", true
	case Alibaba:
		m.Key, m.Amount, m.Unit = "aliyun.com/gpu-mem", ceilDiv(bytes, gib), "GiB"
	default:
		return MemoryRequest{}, fmt.Errorf("gpuest: Size: scheduler '%s' is not one of hami, volcano, kai, alibaba", s)
	}
	return m, nil
}

func ceilDiv(n, unit uint64) uint64 {
	q := n / unit
	if n%unit != 0 {
		q++
	}
	return q
}
