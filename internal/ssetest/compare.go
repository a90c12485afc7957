package ssetest

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentc "github.com/agentc-dev/agentc/runtime"
)

// StreamCase is a transcript that a provider's SDK reads alone (Bare) and
// that its client reads into runtime deltas (Client), for the benchmarks
// that tell the client's cost from the SDK's.
type StreamCase struct {
	Name string
	// Bare streams the request with the SDK alone, reading what a caller
	// needs of each chunk (text, tool-call fragments, finish reason,
	// usage), and returns the bytes of text and fragments it read.
	Bare func(context.Context) (int, error)
	// Client streams Request.
	Client  agentc.ModelClient
	Request agentc.ChatRequest
}

// ClientStream streams req through c, reading the same from its deltas as
// a StreamCase's Bare does from the SDK's chunks, and returns the bytes of
// text and tool-call fragments. The last delta must carry the finish
// reason and the usage.
func ClientStream(ctx context.Context, c agentc.ModelClient, req agentc.ChatRequest) (int, error) {
	n := 0
	var last agentc.Delta
	err := c.Stream(ctx, &req, func(d agentc.Delta) bool {
		n += len(d.Text)
		for k := range d.ToolCalls {
			n += len(d.ToolCalls[k].Arguments)
		}
		last = d
		return true
	})
	if err == nil && (last.FinishReason == "" || last.Usage.IsZero()) {
		err = fmt.Errorf("no finish or usage on the last delta")
	}
	return n, err
}

// funcs returns the bare and the client's stream as funcs that fail when
// either does not read what the bare SDK read once.
func (sc *StreamCase) funcs(tb testing.TB) (bare, client func() error) {
	ctx := context.Background()
	want, err := sc.Bare(ctx)
	if err != nil {
		tb.Fatalf("%s: %v", sc.Name, err)
	}
	check := func(n int, err error) error {
		if err == nil && n != want {
			err = fmt.Errorf("%d bytes of content, want %d", n, want)
		}
		return err
	}
	return func() error { return check(sc.Bare(ctx)) },
		func() error { return check(ClientStream(ctx, sc.Client, sc.Request)) }
}

// BenchStreams runs each case's bare and client stream as sub-benchmarks
// NAME/sdk and NAME/client.
func BenchStreams(b *testing.B, cases []StreamCase) {
	for _, sc := range cases {
		bare, client := sc.funcs(b)
		for _, v := range []struct {
			name string
			f    func() error
		}{{"sdk", bare}, {"client", client}} {
			b.Run(sc.Name+"/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := v.f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchAdded runs, for each case, a sub-benchmark that reports what the
// client adds per delta over the bare SDK (AddedPerDelta).
func BenchAdded(b *testing.B, deltas int, cases []StreamCase) {
	for _, sc := range cases {
		bare, client := sc.funcs(b)
		b.Run(sc.Name, func(b *testing.B) { AddedPerDelta(b, deltas, bare, client) })
	}
}

// AssertAllocsPerDelta asserts that each case's client allocates at most
// max per delta beyond what its SDK allocates to read the same stream.
func AssertAllocsPerDelta(t *testing.T, deltas int, max float64, cases []StreamCase) {
	if RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	for _, sc := range cases {
		bare, client := sc.funcs(t)
		require.NoError(t, client())
		added := (AllocsPerStream(client) - AllocsPerStream(bare)) / float64(deltas)
		assert.LessOrEqual(t, added, max, "%s: allocations per delta beyond the SDK's", sc.Name)
	}
}

// AddedPerDelta runs bare (a stream read with the provider's SDK alone) and
// client (the same stream read through a provider client into runtime
// deltas) alternately, and reports what client adds per delta:
// added-ns/delta, the median over the pairs of runs of the difference of
// their CPU times (on Linux the CPU time of the benchmark's thread, so that
// the time a loaded machine makes it wait for a core does not count;
// elsewhere wall time), over deltas, and added-allocs/delta, from
// testing.AllocsPerRun. It also reports the bare stream's own cost per
// delta (sdk-ns/delta, the median). Alternating the two, in turn order,
// and taking medians cancels most of the drift of a shared machine's load,
// which separate benchmarks do not. The garbage collector runs between the
// pairs, not during them, so that neither pays for the other's garbage:
// the collector's cost follows the allocations, which added-allocs/delta
// reports.
func AddedPerDelta(b *testing.B, deltas int, bare, client func() error) {
	b.Helper()
	now, release := threadClock()
	defer release()
	run := func(f func() error) time.Duration {
		start := now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return now() - start
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var bares, diffs []time.Duration
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		var tb, tc time.Duration
		if len(diffs)%2 == 0 {
			tb = run(bare)
			tc = run(client)
		} else {
			tc = run(client)
			tb = run(bare)
		}
		bares, diffs = append(bares, tb), append(diffs, tc-tb)
	}
	b.StopTimer()
	aBare, aClient := AllocsPerStream(bare), AllocsPerStream(client)
	b.ReportMetric(float64(median(bares))/float64(deltas), "sdk-ns/delta")
	b.ReportMetric(float64(median(diffs))/float64(deltas), "added-ns/delta")
	b.ReportMetric((aClient-aBare)/float64(deltas), "added-allocs/delta")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// AllocsPerStream returns the mean allocations of one run of f.
func AllocsPerStream(f func() error) float64 {
	return testing.AllocsPerRun(20, func() { _ = f() })
}
