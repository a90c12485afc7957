package ssetest

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
)

// Transport is an http.RoundTripper that answers from memory, without a
// network: the i-th request gets Replies[i % len(Replies)] as a 200
// text/event-stream body. It reads the request body to its end, as a
// server does, and keeps nothing, so benchmarks measure the client alone.
// It is safe for concurrent use.
type Transport struct {
	Replies [][]byte
	n       atomic.Uint64
}

// NewTransport returns a Transport that serves the transcripts in turn.
func NewTransport(transcripts ...string) *Transport {
	t := &Transport{}
	for _, s := range transcripts {
		t.Replies = append(t.Replies, []byte(s))
	}
	return t
}

// Client returns an http.Client on t.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body := t.Replies[(t.n.Add(1)-1)%uint64(len(t.Replies))]
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: -1, Request: r,
	}, nil
}
