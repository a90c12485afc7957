package serve

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request is counted in the series of its route, model and status,
// whether its series were held from an earlier request, or looked up by
// their labels past the bound of the series held.
func TestObserveRequestCountsEachSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, func() int64 { return 0 }, &settlements{})
	require.NoError(t, err)
	for range 3 {
		m.observeRequest("chat", "primary", 200, 0.001)
	}
	m.observeRequest("chat", "primary", 429, 0.002)
	m.observeRequest("chat", "backup", 200, 0.003)
	m.observeRequest("messages", "primary", 200, 0.004)
	for i := range maxServedSeries + 10 {
		m.observeRequest("mcp", "tool"+strconv.Itoa(i%(maxServedSeries+5)), 200, 0.005)
	}
	assert.Equal(t, int64(maxServedSeries), m.nServed.Load())
	fams, err := reg.Gather()
	require.NoError(t, err)
	series := map[string]int{}
	counts := map[string]float64{}
	latencies := map[string]uint64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			series[f.GetName()]++
			key := ""
			for _, l := range s.GetLabel() {
				key += "/" + l.GetValue()
			}
			switch f.GetName() {
			case "agentc_serve_requests_total":
				counts[key[1:]] = s.GetCounter().GetValue()
			case "agentc_serve_request_duration_seconds":
				latencies[key[1:]] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	// The labels in their order: code, model, route.
	requests := func(route, model, code string) float64 { return counts[code+"/"+model+"/"+route] }
	assert.Equal(t, 3.0, requests("chat", "primary", "200"))
	assert.Equal(t, 1.0, requests("chat", "primary", "429"))
	assert.Equal(t, 1.0, requests("chat", "backup", "200"))
	assert.Equal(t, 1.0, requests("messages", "primary", "200"))
	assert.Equal(t, 2.0, requests("mcp", "tool1", "200"))
	assert.Equal(t, 1.0, requests("mcp", "tool4100", "200"))
	assert.Equal(t, 1.0, requests("mcp", "tool4099", "200"))
	// A series of latencies per route and model: 3, and the 4,101 tools.
	assert.Equal(t, 3+maxServedSeries+5, series["agentc_serve_request_duration_seconds"])
	assert.Equal(t, uint64(4), latencies["primary/chat"])
}

// TestServersShareAHostsRegistry: a host's registry that serves its own Go
// and process metrics takes the server's metrics beside them; a second
// server on it while the first serves is refused with an error naming the
// registry (not a panic); once the first is closed, its metrics are gone
// from the registry and another server registers its own there. A New
// that fails leaves nothing registered.
func TestServersShareAHostsRegistry(t *testing.T) {
	t.Setenv("AGENTC_TEST_SERVE_METRICS_OPENAI", "sk-test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dir := writePolicy(t, "package gw\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_METRICS_OPENAI\"}\n")
	opts := Options{Source: cueSource(dir), Registry: reg}
	names := func() map[string]bool {
		fams, err := reg.Gather()
		require.NoError(t, err)
		got := map[string]bool{}
		for _, f := range fams {
			got[f.GetName()] = true
		}
		return got
	}

	first, err := New(context.Background(), opts)
	require.NoError(t, err)
	assert.True(t, names()["agentc_serve_reloads_total"])
	assert.True(t, names()["go_goroutines"], "the host's Go collector stays")

	first.metrics.reloads.WithLabelValues("ok").Inc()
	_, err = New(context.Background(), opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.Registry")
	assert.Equal(t, 1.0, reloadsOK(t, reg), "the first server's counters are left as they were")
	assert.True(t, names()["agentc_serve_reloads_total"], "and stay registered")

	require.NoError(t, first.Close())
	assert.False(t, names()["agentc_serve_reloads_total"], "Close removes the server's metrics")
	assert.True(t, names()["go_goroutines"], "the host's Go collector stays")

	second, err := New(context.Background(), opts)
	require.NoError(t, err)
	assert.True(t, names()["agentc_serve_reloads_total"])
	require.NoError(t, second.Close())

	bad := opts
	bad.Source = cueSource(writePolicy(t, "package gw\n\nmodels: primary: {provider: 3}\n"))
	_, err = New(context.Background(), bad)
	require.Error(t, err)
	assert.False(t, names()["agentc_serve_reloads_total"], "a failed New leaves nothing registered")

	// A registry of its own: the server registers the Go and process
	// collectors, and Close removes them with the rest.
	own := prometheus.NewRegistry()
	opts.Registry = own
	third, err := New(context.Background(), opts)
	require.NoError(t, err)
	fams, err := own.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, fams)
	require.NoError(t, third.Close())
	fams, err = own.Gather()
	require.NoError(t, err)
	assert.Empty(t, fams)
}

// reloadsOK returns the value of agentc_serve_reloads_total{result="ok"}
// in reg.
func reloadsOK(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "agentc_serve_reloads_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetValue() == "ok" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatal("no agentc_serve_reloads_total{result=\"ok\"}")
	return 0
}
