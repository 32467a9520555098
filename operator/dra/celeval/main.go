// Command migplan-cel evaluates DRA device selectors with Kubernetes' own CEL environment
// (k8s.io/dynamic-resource-allocation/cel, the code kube-scheduler allocates with), so
// migplan sees a selector exactly as the scheduler will: the same language features
// (optional types, quantities, semantic versions, ...), the same estimated and runtime cost
// limits, the same attribute and capacity rules.
//
// It reads one JSON request per line on stdin and writes one JSON response per line on
// stdout, in order. A request is either
//
//	{"op": "version"}
//	{"op": "match", "selectors": ["..."], "devices": [DEVICE, ...], "timeoutMs": 2000}
//
// where DEVICE is a ResourceSlice device as the API has it:
//
//	{"driver": "gpu.nvidia.com", "allowMultipleAllocations": false,
//	 "attributes": {"gpu.nvidia.com/profile": {"string": "1g.10gb"}},
//	 "capacity": {"gpu.nvidia.com/memory": {"value": "10Gi"}}}
//
// A match answers, per device, whether every selector selects it (as a request's selectors
// combine), or the first selector's compile error for all of them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/lru"
)

// compiledEntries bounds the compile cache: a selector is at most
// CELSelectorExpressionMaxLength (10 KiB) of text, and bench/cel.py measured about 0.6 MiB
// per compiled selector of that length. Claims repeat a few selectors.
const compiledEntries = 128

// maxLine bounds one request: devices of a pass plus their selectors fit well inside it.
const maxLine = 64 << 20

type device struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

type request struct {
	Op        string   `json:"op"`
	Selectors []string `json:"selectors"`
	Devices   []device `json:"devices"`
	TimeoutMs int64    `json:"timeoutMs"`
}

type outcome struct {
	Selected bool   `json:"selected"`
	Error    string `json:"error,omitempty"`
	// Cost is the runtime cost CEL counted, summed over the selectors evaluated.
	Cost uint64 `json:"cost"`
}

type response struct {
	Error        string            `json:"error,omitempty"`
	CompileError string            `json:"compileError,omitempty"`
	Expression   string            `json:"expression,omitempty"`
	Results      []outcome         `json:"results,omitempty"`
	Versions     map[string]string `json:"versions,omitempty"`
	TimedOut     bool              `json:"timedOut,omitempty"`
}

type evaluator struct {
	compiler interface {
		CompileCELExpression(string, dracel.Options) dracel.CompilationResult
	}
	compiled *lru.Cache
}

// compile returns the compiled selector, or the reason the API server would refuse it:
// too long, not valid CEL, or an estimated cost over the limit.
func (e *evaluator) compile(expression string) (dracel.CompilationResult, error) {
	if cached, ok := e.compiled.Get(expression); ok {
		return cached.(dracel.CompilationResult), nil
	}
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		return dracel.CompilationResult{}, fmt.Errorf(
			"longer than %d characters", resourceapi.CELSelectorExpressionMaxLength)
	}
	result := e.compiler.CompileCELExpression(expression, dracel.Options{})
	if result.Error != nil {
		return result, errors.New(result.Error.Detail)
	}
	if result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return result, fmt.Errorf(
			"estimated cost %d is over the limit %d", result.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
	}
	e.compiled.Add(expression, result)
	return result, nil
}

func (e *evaluator) match(req request) response {
	programs := make([]dracel.CompilationResult, 0, len(req.Selectors))
	for _, expression := range req.Selectors {
		program, err := e.compile(expression)
		if err != nil {
			return response{CompileError: err.Error(), Expression: expression}
		}
		programs = append(programs, program)
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results := make([]outcome, len(req.Devices))
	for i, d := range req.Devices {
		results[i] = matchOne(ctx, programs, d)
		if ctx.Err() != nil {
			return response{TimedOut: true, Error: fmt.Sprintf("time budget of %s spent", timeout)}
		}
	}
	return response{Results: results}
}

func matchOne(ctx context.Context, programs []dracel.CompilationResult, d device) outcome {
	input := dracel.Device{
		Driver:                   d.Driver,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
	}
	var cost uint64
	for _, program := range programs {
		selected, details, err := program.DeviceMatches(ctx, input)
		if details != nil && details.ActualCost() != nil {
			cost += *details.ActualCost()
		}
		if err != nil {
			return outcome{Error: err.Error(), Cost: cost}
		}
		if !selected {
			return outcome{Cost: cost}
		}
	}
	return outcome{Selected: true, Cost: cost}
}

func versions() map[string]string {
	found := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return found
	}
	found["go"] = info.GoVersion
	for _, dep := range info.Deps {
		switch dep.Path {
		case "k8s.io/dynamic-resource-allocation", "github.com/google/cel-go", "k8s.io/api":
			found[dep.Path] = dep.Version
		}
	}
	return found
}

// softLimit makes the collector work harder before the helper grows past it (the operator's
// container limit covers the helper too); GOMEMLIMIT in the environment takes precedence.
const softLimit = 192 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softLimit)
	}
	e := &evaluator{
		compiler: dracel.GetCompiler(dracel.Features{}),
		compiled: lru.New(compiledEntries),
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), maxLine)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var resp response
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			resp = response{Error: "not a request: " + err.Error()}
		} else {
			switch req.Op {
			case "version":
				resp = response{Versions: versions()}
			case "match":
				resp = e.match(req)
			default:
				resp = response{Error: fmt.Sprintf("unknown op %q", req.Op)}
			}
		}
		if err := out.Encode(resp); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "migplan-cel:", err)
		os.Exit(1)
	}
}
