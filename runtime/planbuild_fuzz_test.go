package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// FuzzBuildPlan: a plan of an example policy changed in place (a value
// replaced, removed, list elements swapped, as a hand edit or a bad merge
// would) is refused by plan.Decode with an *plan.Error, or builds, or fails
// Build with an error: it never panics. The stores are in memory and the
// models stubs, so that nothing is reached over the network.
func FuzzBuildPlan(f *testing.F) {
	dirs, err := filepath.Glob("../examples/*/policy.cue")
	if err != nil || len(dirs) == 0 {
		f.Fatalf("examples: %v", err)
	}
	dirs = append(dirs, "../examples/service/replicated/policy.cue")
	var bases []any
	for _, file := range dirs {
		c, err := compiler.Compile(context.Background(), []string{filepath.Dir(file)}, compiler.Options{})
		if err != nil || c.Plan == nil {
			f.Fatalf("%s: %v %v", file, err, c.Diagnostics)
		}
		b, err := plan.Encode(c.Plan)
		if err != nil {
			f.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			f.Fatal(err)
		}
		bases = append(bases, doc)
	}
	for i := range bases {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{byte(3 * i), 1, byte(40 + i), 0})
		f.Add(uint8(i), []byte{byte(90 + i), 4, byte(17 * i), 13})
	}
	stub := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { return nil })
	offline := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("offline")
	})}
	f.Fuzz(func(t *testing.T, base uint8, ops []byte) {
		doc := mutatePlan(bases[int(base)%len(bases)], ops)
		b, err := json.Marshal(doc)
		if err != nil {
			return
		}
		p, err := plan.Decode("fuzz.json", b)
		if err != nil {
			var pe *plan.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode: %v (%T) is not a *plan.Error", err, err)
			}
			return
		}
		deps := runtime.Deps{Models: map[string]runtime.ModelClient{}, Backends: map[string]runtime.StoreBackend{},
			HTTPClient: offline, Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		for name := range p.Models {
			deps.Models[name] = stub
		}
		for name := range p.Stores {
			deps.Backends[name] = runtime.NewMemoryStore()
		}
		pl, err := runtime.Build(context.Background(), p, deps)
		if err != nil {
			return
		}
		if err := pl.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
