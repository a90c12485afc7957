package serve

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestTheRunOfARequestWithoutOneEndsAfterItsResponse: the run the gateway
// gives a request without X-Agentc-Run is ended on the layers (a meter
// drops its ledger from the store) once the response is sent, not before:
// a store that stalls or answers slowly does not hold the response back by
// the end's round trip (docs/state.md: no call is held longer than the
// store's timeout). The server's close waits for the ends under way.
func TestTheRunOfARequestWithoutOneEndsAfterItsResponse(t *testing.T) {
	g, probe := gatewayWithRunProbe(t)
	ending, release := make(chan string, 2), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // a failed test still lets the server close
	var ended atomic.Int64
	probe.mu.Lock()
	probe.onEnd = func(run string) func() {
		ending <- run
		<-release // the store does not answer
		return func() { ended.Add(1) }
	}
	probe.mu.Unlock()
	client := g.openai(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}

	var resp *http.Response
	c, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
	require.NoError(t, err, "the response is sent while the run's end waits for the store")
	assert.Equal(t, "Hello! How can I help you today?", c.Choices[0].Message.Content)
	run := resp.Header.Get(RunHeader)
	require.True(t, strings.HasPrefix(run, "anon-"))
	assert.Contains(t, <-ending, run, "the run is ended on the layers")

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	require.NoError(t, stream.Err(), "the stream ends while the run's end waits for the store")
	assert.Equal(t, "Hello! How can I help you today?", text.String())
	<-ending
	assert.Zero(t, ended.Load())

	closed := make(chan struct{})
	go func() {
		assert.NoError(t, g.stop())
		close(closed)
	}()
	assert.Never(t, func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}, 100*time.Millisecond, 5*time.Millisecond, "the server's close waits for the runs' ends")
	unblock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not close once the runs' ends were over")
	}
	assert.Equal(t, int64(2), ended.Load(), "both runs were ended before the server closed")
}

// TestTheRunsEndingAfterTheirResponsesAreBounded: each request's run ended
// on a goroutine of its own after the response, so while the store stalled
// (each end taking up to its timeout) the goroutines grew with the request
// rate. Past maxRunEnds under way, a request ends its run itself.
func TestTheRunsEndingAfterTheirResponsesAreBounded(t *testing.T) {
	old := maxRunEnds
	maxRunEnds = 1
	t.Cleanup(func() { maxRunEnds = old })
	g, probe := gatewayWithRunProbe(t)
	ending, release := make(chan string, 2), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	probe.mu.Lock()
	probe.onEnd = func(run string) func() {
		ending <- run
		<-release // the store does not answer
		return func() {}
	}
	probe.mu.Unlock()
	client := g.openai(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}

	_, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err, "the first run's end waits after the response")
	<-ending
	require.Eventually(t, func() bool { return requestsInFlight(g.srv) == 0 }, 10*time.Second, 5*time.Millisecond,
		"the first request is over")

	second := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(ctx, params)
		second <- err
	}()
	<-ending
	assert.Equal(t, 1, len(g.srv.runEnds), "one end under way after its response")
	assert.Equal(t, 1.0, requestsInFlight(g.srv), "the second request ends its run itself, the bound reached")
	unblock()
	require.NoError(t, <-second)
	require.Eventually(t, func() bool { return len(g.srv.runEnds) == 0 }, 10*time.Second, 5*time.Millisecond, "the end under way is over")
}

// requestsInFlight reads agentc_serve_requests_in_flight.
func requestsInFlight(s *Server) float64 {
	var m dto.Metric
	if err := s.metrics.inflight.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// gatewayWithRunProbe returns a gateway of the typical chain answering two
// requests, with a run probe (runProbe) at the end of its tool chain.
func gatewayWithRunProbe(t *testing.T) (*gateway, *runProbe) {
	t.Helper()
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}, {body: transcript(t, "openai", "text.sse")}}, nil,
		func(o *Options) {
			src := o.Source
			o.Source = SourceFunc(func(ctx context.Context) (*Loaded, error) {
				ld, err := src.Load(ctx)
				if err == nil {
					ld.Plan.Chains.Tool = append(ld.Plan.Chains.Tool, plan.Layer{Use: "serve_test_run_probe", Name: "probe"})
				}
				return ld, err
			})
		})
	probes.mu.Lock()
	defer probes.mu.Unlock()
	return g, probes.last
}
