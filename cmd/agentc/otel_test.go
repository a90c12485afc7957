package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentc-dev/agentc/internal/ssetest"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// collector is a loopback OTLP/HTTP collector: it decodes each export
// request's protobuf body and keeps its spans with their resource.
type collector struct {
	*httptest.Server
	mu           sync.Mutex
	contentTypes []string
	spans        []collected
}

type collected struct {
	resource map[string]string
	span     *tracepb.Span
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.contentTypes = append(c.contentTypes, r.Header.Get("Content-Type"))
		for _, rs := range req.ResourceSpans {
			res := strAttrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, collected{resource: res, span: s})
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

func strAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.BoolValue)
		}
	}
	return m
}

// agentc serve exports the tracing layers' spans to the OTLP endpoint the
// standard variables name: a chat call's and an MCP tool call's, under a
// resource naming the service, flushed when the command ends. A failed
// tool call's span withholds the error's text (include_errors unset).
func TestServeExportsSpansOverOTLP(t *testing.T) {
	col := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("AGENTC_TEST_OTEL_OPENAI_KEY", "k")
	b, err := os.ReadFile(filepath.Join("..", "..", "providers", "openai", "testdata", "text.sse"))
	require.NoError(t, err)
	upstream := ssetest.New(t, ssetest.Reply{Body: string(b)})

	srv := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type lookupIn struct {
		OrderID string `json:"order_id"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look an order up.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			if in.OrderID != "A1" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no order " + in.OrderID}}}, nil, nil
			}
			return nil, map[string]any{"order_id": in.OrderID, "total": 42.5}, nil
		})
	mcpUp := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(mcpUp.Close)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(fmt.Sprintf(`package gw

models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "%s/v1", api_key_env: "AGENTC_TEST_OTEL_OPENAI_KEY"}
mcp: servers: orders: url: %q
chains: chat: [{use: "tracing", attributes: {team: "support"}}]
chains: tool: [{use: "tracing"}]
`, upstream.URL, mcpUp.URL)), 0o644))
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &rt.LogBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cmdServe(ctx, &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-listen", listen, "-watch", "0", dir})
	}()
	require.Eventually(t, func() bool {
		code, _, err := get("http://" + listen + "/healthz")
		return err == nil && code == 200
	}, 30*time.Second, 10*time.Millisecond, "the listener did not come up")

	resp, err := http.Post("http://"+listen+"/v1/chat/completions", "application/json",
		bytes.NewReader([]byte(`{"model":"primary","messages":[{"role":"user","content":"hi"}]}`)))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + listen + "/mcp", MaxRetries: -1}, nil)
	require.NoError(t, err)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "Z9-secret"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.NoError(t, cs.Close())
	stopServe(t, cancel, done)

	col.mu.Lock()
	defer col.mu.Unlock()
	assert.NotContains(t, stderr.String(), "OpenTelemetry exporter is configured", "no warning with an exporter")
	assert.Contains(t, stderr.String(), "exporting the tracing layers' spans over OTLP/HTTP")
	require.NotEmpty(t, col.contentTypes, "the spans were exported before the command ended")
	for _, ct := range col.contentTypes {
		assert.Equal(t, "application/x-protobuf", ct)
	}
	require.Len(t, col.spans, 3)
	byName := map[string][]collected{}
	for _, c := range col.spans {
		byName[c.span.Name] = append(byName[c.span.Name], c)
		assert.Equal(t, "agentc", c.resource["service.name"])
		assert.Equal(t, "test", c.resource["deployment.environment"])
		assert.Equal(t, "opentelemetry", c.resource["telemetry.sdk.name"])
	}
	require.Len(t, byName["agentc.chat"], 1)
	chat := byName["agentc.chat"][0].span
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, chat.Kind)
	ca := strAttrs(chat.Attributes)
	assert.Equal(t, "primary", ca["agentc.model"])
	assert.Equal(t, "primary", ca["agentc.served"])
	assert.Equal(t, "support", ca["team"])
	assert.Equal(t, "chat", ca["agentc.stage"])
	assert.NotEqual(t, tracepb.Status_STATUS_CODE_ERROR, chat.GetStatus().GetCode())

	tools := byName["agentc.tool"]
	require.Len(t, tools, 2)
	ok, failed := tools[0].span, tools[1].span
	assert.Equal(t, "lookup", strAttrs(ok.Attributes)["agentc.tool"])
	assert.NotEqual(t, tracepb.Status_STATUS_CODE_ERROR, ok.GetStatus().GetCode())
	assert.Equal(t, "lookup", strAttrs(failed.Attributes)["agentc.tool"])
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, failed.GetStatus().GetCode())
	assert.Contains(t, failed.GetStatus().GetMessage(), "text withheld, sha256 ")
	assert.NotContains(t, failed.GetStatus().GetMessage(), "Z9-secret")
	for _, ev := range failed.Events {
		for _, v := range strAttrs(ev.Attributes) {
			assert.NotContains(t, v, "Z9-secret")
		}
	}
}

// The OTEL_* variables configure the exporter; no endpoint and no
// exporter named is none, and what agentc cannot export to is an error
// naming the variable.
func TestTracerProviderFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		provider bool
		ignored  []string
		err      string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, provider: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, provider: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, provider: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin": agentc exports spans over OTLP only`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": agentc exports spans over OTLP/HTTP with protobuf only`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, provider: true},
		// An endpoint the exporter cannot parse would send to localhost.
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, err: `OTEL_EXPORTER_OTLP_ENDPOINT: not an http or https URL with a host`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://collector/v1/traces"},
			err: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not an http or https URL with a host`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"}, err: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not an http`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "localhost"}, err: `OTEL_EXPORTER_OTLP_ENDPOINT: not an http`},
		// Headers the exporter cannot read would be sent without, and its
		// own logger would print the value.
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%zzTOPSECRETVALUE"},
			err: `OTEL_EXPORTER_OTLP_HEADERS: header 1 (authorization) has a value that is not URL-encoded`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=a,TOPSECRETVALUE"},
			err: `OTEL_EXPORTER_OTLP_TRACES_HEADERS: header 2 is not KEY=VALUE`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-team=a%2Cb"}, provider: true},
		// The exporter list is read as the SDK reads it.
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "OTLP"}, provider: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": " None "}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"}, provider: true, ignored: []string{"console"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console,zipkin"}, err: `OTEL_TRACES_EXPORTER="console,zipkin": agentc exports spans over OTLP only`},
	} {
		tp, setup, err := tracerProvider(context.Background(), func(k string) string { return c.env[k] })
		if c.err != "" {
			require.Error(t, err, "%v", c.env)
			assert.Contains(t, err.Error(), c.err)
			assert.NotContains(t, err.Error(), "TOPSECRETVALUE")
			continue
		}
		require.NoError(t, err, "%v", c.env)
		assert.Equal(t, c.provider, tp != nil, "%v", c.env)
		assert.Equal(t, c.ignored, setup.ignored, "%v", c.env)
		if tp != nil {
			require.NoError(t, tp.Shutdown(context.Background()))
		}
	}
}

// OpenTelemetry's own log lines (an exporter's configuration it cannot
// read) go through the scrubbing handler serve's log lines do.
func TestOTelLogsAreScrubbed(t *testing.T) {
	const key = "sk-proj-OTELSECRETKEY0123456789"
	var buf bytes.Buffer
	l := otelLogger(slog.NewTextHandler(&buf, nil))
	l.Error(errors.New("denied "+key), "escape header value", "value", "Bearer "+key)
	l.V(4).Info("an info line the SDK writes at V(4)")
	assert.Contains(t, buf.String(), "escape header value")
	assert.Contains(t, buf.String(), "[redacted sha256 ")
	assert.NotContains(t, buf.String(), key)
	assert.NotContains(t, buf.String(), "V(4)", "the SDK's info and debug lines stay below the log's level")
}

// A header serve cannot read fails the command naming the variable, and
// its value is on no line.
func TestServeRefusesUnreadableOTLPHeaders(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%zzTOPSECRETVALUE")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\n"), 0o644))
	stderr := &rt.LogBuffer{}
	code := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-listen", freeAddr(t), "-watch", "0", dir})
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr.String(), "OTEL_EXPORTER_OTLP_HEADERS")
	assert.NotContains(t, stderr.String(), "TOPSECRETVALUE")
}

// agentc run exports the tracing layers' spans as agentc serve does, to
// the OTLP endpoint the standard variables name, flushed before it exits;
// -trace still prints them.
func TestRunExportsSpansOverOTLP(t *testing.T) {
	col := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "policy"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy", "p.cue"), []byte(`package p

models: primary: {}
chains: chat: [{use: "tracing", attributes: {team: "support"}}]
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s.json"), []byte(`{"models": {"primary": [{"text": "a"}, {"text": "b"}]},
  "steps": [{"chat": {"model": "primary", "messages": [{"role": "user", "content": "hi"}]}}]}`), 0o644))
	for i, flags := range [][]string{nil, {"-trace"}} {
		var stdout, stderr bytes.Buffer
		code := cmdRun(context.Background(), &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir},
			append(flags, filepath.Join(dir, "policy"), filepath.Join(dir, "s.json")))
		require.Equal(t, exitOK, code, stderr.String())
		assert.Contains(t, stdout.String(), `step 0 chat ok model=primary attempts=1 text="a"`)
		if i == 1 {
			assert.Contains(t, stdout.String(), "trace:\nagentc.chat ")
		}
		col.mu.Lock()
		require.Len(t, col.spans, i+1, "the span was exported before the command returned")
		span := col.spans[i]
		col.mu.Unlock()
		assert.Equal(t, "agentc.chat", span.span.Name)
		assert.Equal(t, "support", strAttrs(span.span.Attributes)["team"])
		assert.Equal(t, "agentc", span.resource["service.name"])
	}
}

// A configuration agentc run cannot honour fails it as it fails serve,
// naming the variable, never the header's value.
func TestRunRefusesUnreadableOTLPHeaders(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%zzTOPSECRETVALUE")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\n\nmodels: primary: {}\n"), 0o644))
	s := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(s, []byte(`{"models": {"primary": [{"text": "a"}]}, "steps": [{"chat": {"model": "primary"}}]}`), 0o644))
	var stdout, stderr bytes.Buffer
	code := cmdRun(context.Background(), &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir}, []string{dir, s})
	assert.NotEqual(t, exitOK, code)
	assert.Empty(t, stdout.String(), "nothing ran")
	assert.Contains(t, stderr.String(), "OTEL_EXPORTER_OTLP_HEADERS")
	assert.NotContains(t, stderr.String(), "TOPSECRETVALUE")
}

// An export the collector refuses is logged scrubbed, as every line of
// the log is: the collector's answer may quote the credential it was
// sent.
func TestExportErrorsAreScrubbed(t *testing.T) {
	const token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid credentials: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	t.Cleanup(col.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+token)
	var buf rt.LogBuffer
	tp, flush, err := startTracing(context.Background(), os.Getenv, slog.New(slog.NewTextHandler(&buf, nil)))
	require.NoError(t, err)
	require.NotNil(t, tp)
	_, span := tp.Tracer("test").Start(context.Background(), "s")
	span.End()
	flush()
	assert.Contains(t, buf.String(), "401")
	assert.Contains(t, buf.String(), "[redacted sha256 ")
	assert.NotContains(t, buf.String(), token)
}

// OTEL_PROPAGATORS turns W3C Trace Context off when set without
// tracecontext, as the OpenTelemetry SDKs read it; the propagators agentc
// does not run are named.
func TestPropagatorsFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		v       string
		off     bool
		ignored []string
	}{
		{v: ""},
		{v: "tracecontext"},
		{v: " TraceContext , baggage", ignored: []string{"baggage"}},
		{v: "none", off: true},
		{v: "None", off: true},
		{v: "b3,baggage", off: true, ignored: []string{"b3", "baggage"}},
		{v: "tracecontext,none"},
	} {
		off, ignored := propagators(func(k string) string {
			if k == "OTEL_PROPAGATORS" {
				return c.v
			}
			return ""
		})
		assert.Equal(t, c.off, off, "%q", c.v)
		assert.Equal(t, c.ignored, ignored, "%q", c.v)
	}
}

// agentc test exports the tracing layers' spans of its cases as agentc
// run does, to the OTLP endpoint the standard variables name, flushed
// before it exits: it installed no exporter. A case whose want lists the
// spans records every one itself, whatever the sampler keeps, and its
// spans are not exported. A configuration it cannot honour fails it
// before any case runs, naming the variable.
func TestTestExportsSpansOverOTLP(t *testing.T) {
	col := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p

models: primary: {}
chains: chat: [{use: "tracing", attributes: {team: "support"}}]
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.cue"), []byte(`package p

_scenario: {models: primary: [{text: "a"}], steps: [{chat: {model: "primary", messages: [{role: "user", content: "hi"}]}}]}
tests: "exported": {scenario: _scenario, want: steps: [{outcome: "ok"}]}
tests: "recorded": {scenario: _scenario, want: trace: [{name: "agentc.chat"}]}
`), 0o644))
	var stdout, stderr bytes.Buffer
	code := cmdTest(context.Background(), &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir}, []string{dir})
	require.Equal(t, exitOK, code, stdout.String()+stderr.String())
	col.mu.Lock()
	require.Len(t, col.spans, 1, "the span was exported before the command returned")
	span := col.spans[0]
	col.mu.Unlock()
	assert.Equal(t, "agentc.chat", span.span.Name)
	assert.Equal(t, "support", strAttrs(span.span.Attributes)["team"])
	assert.Equal(t, "agentc", span.resource["service.name"])

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	stdout.Reset()
	stderr.Reset()
	code = cmdTest(context.Background(), &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir}, []string{dir})
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr.String(), "OTEL_EXPORTER_OTLP_PROTOCOL")
	assert.Empty(t, stdout.String(), "no case ran")
}
