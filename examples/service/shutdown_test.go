package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitFor fails the test when ch is not closed (or sent on) in time; the
// bound only keeps a broken shutdown from hanging the test.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
		var zero T
		return zero
	}
}

// slowCall is a handler whose call holds until finish is closed, after
// its context was cancelled when cancelled is not nil.
type slowCall struct {
	started, cancelled, finish chan struct{}
	ctxErr                     atomic.Value
	returned                   atomic.Bool
}

func newSlowCall(waitCancel bool) *slowCall {
	c := &slowCall{started: make(chan struct{}), finish: make(chan struct{})}
	if waitCancel {
		c.cancelled = make(chan struct{})
	}
	return c
}

func (c *slowCall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	close(c.started)
	if c.cancelled != nil {
		<-r.Context().Done()
		close(c.cancelled)
	}
	<-c.finish
	c.ctxErr.Store(errString(r.Context().Err()))
	c.returned.Store(true)
	w.WriteHeader(http.StatusOK)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// startServing runs serveUntil on a loopback port with drain, and sends
// one request; it returns the means to stop it and its result.
func startServing(t *testing.T, h http.Handler, drain time.Duration) (cancel func(), done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() { served <- serveUntil(ctx, h, ln, drain) }()
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/admit", "application/json", strings.NewReader(`{"items":[]}`))
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	return cancel, served
}

// TestShutdownWaitsForTheCallsInFlight: the shutdown gave the calls in
// flight 5 s, then the pipeline was closed under a slower one, whose
// stores were gone (an outcome its audit or idempotent layer could no
// longer record left it in doubt). serveUntil returns only once no call
// runs: one that finishes within the drain keeps its context; one past it
// has its context cancelled and is waited for until it returns.
func TestShutdownWaitsForTheCallsInFlight(t *testing.T) {
	t.Run("within the drain", func(t *testing.T) {
		call := newSlowCall(false)
		cancel, done := startServing(t, call, time.Hour)
		waitFor(t, call.started, "the call")
		cancel()
		select {
		case <-done:
			t.Fatal("serveUntil returned while a call was running")
		default:
		}
		close(call.finish)
		require.NoError(t, waitFor(t, done, "serveUntil's return"))
		assert.True(t, call.returned.Load(), "the call returned before serveUntil did")
		assert.Equal(t, "", call.ctxErr.Load(), "a call within the drain is not cancelled")
	})
	t.Run("past the drain", func(t *testing.T) {
		call := newSlowCall(true)
		cancel, done := startServing(t, call, 0)
		waitFor(t, call.started, "the call")
		cancel()
		waitFor(t, call.cancelled, "the call's cancellation after the drain")
		select {
		case <-done:
			t.Fatal("serveUntil returned while a cancelled call was still running")
		default:
		}
		close(call.finish)
		require.NoError(t, waitFor(t, done, "serveUntil's return"))
		assert.True(t, call.returned.Load(), "the cancelled call returned before serveUntil did")
	})
}
