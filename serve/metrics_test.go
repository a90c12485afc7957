package serve

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request is counted in the series of its route, model and status,
// whether its series were held from an earlier request, or looked up by
// their labels past the bound of the series held.
func TestObserveRequestCountsEachSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, func() int64 { return 0 })
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
