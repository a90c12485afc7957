// Package openai is the model client of provider "openai": the OpenAI Chat
// Completions API, and any server that speaks it (vLLM, Ollama, LiteLLM,
// OpenRouter...) through a base URL. It is built on the official SDK,
// github.com/openai/openai-go/v3.
//
// Importing the package registers the provider with the runtime, so that a
// policy's model declared as
//
//	models: primary: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "OPENAI_API_KEY"}
//
// gets its client at runtime.Build. New builds one by hand.
//
// A client streams with stream_options.include_usage, so the last delta
// carries the usage the server reported (cached prompt tokens and reasoning
// tokens included); it turns tool-call chunks into ToolCallDelta fragments
// and reports the finish reason on the last delta (content_filter, not
// stop, after refusal deltas, whose text it passes as text marked
// Delta.Refusal). The SDK's own retries are off: the policy's retry layer
// retries, and a failure comes back as a *runtime.CallError classified
// from the wire (see docs/providers.md). The API key never appears in an
// error.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// DefaultBaseURL is the OpenAI API's endpoint.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Config configures a Client.
type Config struct {
	// Model is the model id sent to the server ("gpt-4.1-mini").
	Model string
	// APIKey is sent as the bearer token ("" sends none, for a local
	// server that needs none).
	APIKey string
	// BaseURL is the server's endpoint, up to and including /v1 (""
	// is DefaultBaseURL).
	BaseURL string
	// MaxTokens bounds the output of a request that sets none (0: the
	// server's default). At the OpenAI API the bound is sent as
	// max_completion_tokens, elsewhere as max_tokens, which every
	// compatible server knows.
	MaxTokens int
	// HTTPClient sends the requests (nil: a client of its own); the client
	// uses a copy that follows no redirect to another origin.
	HTTPClient *http.Client
}

// Client streams chat completions of one model. It is safe for concurrent
// use.
type Client struct {
	cfg      Config
	send     *sender
	sendErr  error // why there is no sender
	call     wire.Call
	official bool
	// own is the HTTP client New made (nil: the host's Config.HTTPClient).
	own *http.Client
}

// DefaultMaxTokens implements runtime.OutputBounder: the bound sent with
// a request that sets none (Config.MaxTokens; 0: none).
func (c *Client) DefaultMaxTokens() int { return max(c.cfg.MaxTokens, 0) }

func init() {
	runtime.RegisterProvider("openai", func(_ context.Context, m runtime.ProviderModel) (runtime.ModelClient, error) {
		return New(Config{Model: m.Model.ID, APIKey: m.APIKey, BaseURL: m.Model.BaseURL, MaxTokens: m.Model.MaxTokens})
	})
}

// New returns a client for cfg. It does not contact the server. It reads no
// environment variable: everything comes from cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no model id")
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	// No redirect to another origin is followed: the request carries the
	// key and the prompt.
	hc, own := wire.SameOriginClient(cfg.HTTPClient), (*http.Client)(nil)
	if cfg.HTTPClient == nil {
		own = hc
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// A base URL the SDK cannot use fails each call, as the SDK's own
	// call fails, not New.
	send, sendErr := newSender(&openai.Client{Options: opts}, hc)
	return &Client{
		cfg:      cfg,
		send:     send,
		sendErr:  sendErr,
		call:     wire.Call{Provider: "openai", Model: cfg.Model, Key: cfg.APIKey},
		official: strings.HasPrefix(base, DefaultBaseURL),
		own:      own,
	}, nil
}

// Stream implements runtime.ModelClient: it sends req and pushes each text
// or tool-call chunk as a delta, the finish reason and the usage on the
// last. A consumer that stops closes the connection. Failures are
// *runtime.CallError (see the package doc); the caller's own cancellation
// returns ctx's error.
func (c *Client) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	body, err := c.body(req)
	if err != nil {
		// A request the model cannot honour (ErrProviderRefused) may be
		// another provider's to serve: a fallback falls over.
		return &runtime.CallError{Kind: runtime.KindPermanent, Status: http.StatusBadRequest, Message: "openai " + c.cfg.Model, Err: err}
	}
	// The request goes out as the SDK's client sends it (its URL, headers,
	// key and error type), with the body the client encoded; the client
	// frames the server-sent events and decodes each chunk into chunk,
	// the few fields a delta needs, which costs a fraction of decoding the
	// SDK's full chunk type.
	if c.sendErr != nil {
		return c.failure(ctx, c.sendErr, 0)
	}
	raw, err := c.send.post(ctx, body)
	if err != nil {
		return c.failure(ctx, err, 0)
	}
	if raw == nil || raw.Body == nil {
		return c.call.Truncated(0)
	}
	runtime.ReportUpstreamRequestID(ctx, raw.Header.Get("x-request-id"))
	if !wire.EventStream(raw.Header) {
		return wire.Accepted(c.call.NotAStream(raw.Header.Get("Content-Type"), wholeUsage(raw.Body)), req, 0)
	}
	// A complete stream's body is released to a drain that owns its
	// closing (wire.Release); closing it here would cut the drain short.
	released := false
	// The events are decoded from the body through a lookahead, which
	// marks the deltas the next one follows at once (runtime.Delta.More).
	upstream := raw.Body
	la := wire.NewLookahead(upstream, yield)
	events := wire.NewEvents(la.Body())
	defer func() {
		if !released {
			_ = upstream.Close()
		}
	}()
	return c.consume(ctx, req, events, func() {
		released = true
		wire.Release(ctx, upstream)
	}, la)
}

// wholeUsage reads body, a whole chat.completion answered in place of a
// stream, and closes it: the usage it reports, zero when none.
func wholeUsage(body io.ReadCloser) runtime.Usage {
	var whole struct {
		Usage chunkUsage `json:"usage"`
	}
	wire.ReadWhole(body, &whole)
	return whole.Usage.usage()
}

// chunk is what the client reads of a chat.completion.chunk.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   *chunkUsage   `json:"usage"`
	// SystemFingerprint is the backend configuration that served the
	// answer (runtime.ReportSystemFingerprint).
	SystemFingerprint string `json:"system_fingerprint"`
	// lastFingerprint is the SystemFingerprint of the chunk before,
	// kept by reset, which the next chunk's reuses when it is the same.
	lastFingerprint string
	// Error is set in an error event ({"error": ...}).
	Error json.RawMessage `json:"error"`
}

// chunkChoice is what the client reads of a chunk's choice.
type chunkChoice struct {
	Index int64 `json:"index"`
	Delta struct {
		Content   string `json:"content"`
		Refusal   string `json:"refusal"`
		ToolCalls []struct {
			Index    int64  `json:"index"`
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
			// Custom is a fragment of a custom tool's call: its name,
			// and a piece of its text.
			Custom *chunkCustom `json:"custom"`
		} `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

// chunkCustom is a fragment of a custom tool's call, as the API streams
// it: {"type": "custom", "custom": {"name": ..., "input": ...}} beside the
// index and id of a tool call.
type chunkCustom struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

// chunkUsage is what the client reads of a chunk's usage.
type chunkUsage struct {
	PromptTokens        wire.Count `json:"prompt_tokens"`
	CompletionTokens    wire.Count `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens wire.Count `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens wire.Count `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage returns u as the runtime counts it.
func (u *chunkUsage) usage() runtime.Usage {
	return runtime.Usage{InputTokens: int64(u.PromptTokens), OutputTokens: int64(u.CompletionTokens),
		CachedInputTokens: int64(u.PromptTokensDetails.CachedTokens), ReasoningTokens: int64(u.CompletionTokensDetails.ReasoningTokens)}
}

// decode decodes data into c, reusing the choices' backing array, as
// encoding/json does. decodeFast decodes a chunk of the usual shape; any
// other goes to segmentio's decoder, several times faster than
// encoding/json, and where that reports any error, encoding/json decodes
// the chunk again, so a malformed chunk fails with its error and a field
// of an unexpected JSON type reads as zero with the rest decoded
// (segmentio's stops at such a field).
func (c *chunk) decode(data []byte) error {
	c.reset()
	if c.decodeFast(data) {
		return nil
	}
	// What a failed read decoded is not the chunk before's fingerprint.
	c.SystemFingerprint = ""
	c.reset()
	if fastjson.Unmarshal(data, c) == nil {
		return nil
	}
	c.SystemFingerprint = ""
	c.reset()
	return json.Unmarshal(data, c)
}

// reset clears c for the next chunk, keeping the choices' backing array.
func (c *chunk) reset() {
	clear(c.Choices[:cap(c.Choices)])
	if c.SystemFingerprint != "" {
		c.lastFingerprint = c.SystemFingerprint
	}
	c.Choices, c.Usage, c.Error, c.SystemFingerprint = c.Choices[:0], nil, nil, ""
}

// consume turns the chunks of events into deltas. As the SDK's own stream
// does, it ends at [DONE], fails at an event with an "error" member, and
// reads a field whose JSON type is not the expected one as zero. A stream
// that ends before the finish reason (at the OpenAI API, before the usage
// or [DONE] that follow it) is truncated. After the last delta of a
// complete stream it calls drain. The deltas go through la, whose held
// delta is passed on before consume returns.
func (c *Client) consume(ctx context.Context, req *runtime.ChatRequest, events *wire.Events, drain func(), la *wire.Lookahead) error {
	var (
		deltas   int
		finish   string
		usage    runtime.Usage
		hasUsage bool
		done     bool // [DONE] arrived
		refused  bool // the model refused (refusal deltas)
		slab     wire.ToolCallSlab
		chunk    chunk
		// fingerprint is the system fingerprint last reported.
		fingerprint string
	)
	// fail passes the held delta on and returns err, or nil when the
	// consumer stopped.
	fail := func(err error) error {
		if !la.Flush() {
			return nil
		}
		return err
	}
	// cut returns the failure err of the stream the upstream accepted,
	// charged the prompt when it failed before any delta (wire.Accepted).
	cut := func(err error) error { return fail(wire.Accepted(err, req, deltas)) }
	for events.Next() {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		data := events.Data()
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			done = true
			break
		}
		if err := chunk.decode(data); err != nil {
			if _, ok := err.(*json.UnmarshalTypeError); !ok {
				return cut(c.failure(ctx, err, deltas))
			}
		}
		if chunk.Error != nil {
			return fail(c.failure(ctx, &ssestream.StreamError{Message: "received error while streaming: " + string(chunk.Error), Event: ssestream.Event{Type: events.Type(), Data: bytes.Clone(data)}}, deltas))
		}
		if fp := chunk.SystemFingerprint; fp != "" && fp != fingerprint {
			// Reported before the first delta it came with goes out.
			fingerprint = fp
			runtime.ReportSystemFingerprint(ctx, fp)
		}
		if u := chunk.Usage; u != nil && (u.PromptTokens != 0 || u.CompletionTokens != 0) {
			usage = u.usage()
			hasUsage = true
		}
		for i := range chunk.Choices {
			ch := &chunk.Choices[i]
			if ch.Index != 0 {
				continue // only the first choice is requested
			}
			if ch.FinishReason != "" {
				finish = finishReason(ch.FinishReason)
			}
			d := runtime.Delta{Text: ch.Delta.Content}
			if d.Text == "" && ch.Delta.Refusal != "" {
				d.Text, d.Refusal, refused = ch.Delta.Refusal, true, true
			}
			if n := len(ch.Delta.ToolCalls); n > 0 {
				d.ToolCalls = slab.Take(n)
				for k := range ch.Delta.ToolCalls {
					tc := &ch.Delta.ToolCalls[k]
					idx := int(tc.Index)
					if idx < 0 {
						idx = 0 // a provider's single call at -1
					}
					d.ToolCalls[k] = runtime.ToolCallDelta{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
					if c := tc.Custom; c != nil {
						d.ToolCalls[k] = runtime.ToolCallDelta{Index: idx, ID: tc.ID, Name: c.Name, Arguments: c.Input, Custom: true}
					}
				}
			}
			if d.Text == "" && d.ToolCalls == nil {
				continue
			}
			deltas++
			if !la.Yield(d) {
				return nil
			}
		}
	}
	if la.Stopped() {
		return nil // the body's read failed as the consumer had stopped
	}
	if err := events.Err(); err != nil {
		return cut(c.failure(ctx, err, deltas))
	}
	// The response is complete once its finish reason arrived. The OpenAI
	// API always ends with the usage (stream_options.include_usage) and
	// [DONE]: there a stream cut after the finish but before both lost the
	// report of what the call billed. Other servers may send neither.
	if finish == "" || c.official && !done && !hasUsage {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return cut(c.call.Truncated(deltas))
	}
	if refused && finish == runtime.FinishStop {
		// A refusal is not an answer: it ends as Anthropic's refusal does.
		finish = runtime.FinishContentFilter
	}
	last := runtime.Delta{FinishReason: finish}
	if hasUsage {
		last.Usage = usage
	}
	if la.Yield(last) {
		la.Flush()
	}
	drain()
	return nil
}

// failure classifies a failed stream.
func (c *Client) failure(ctx context.Context, err error, deltas int) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		// The upstream's id of a failed request is the one its support
		// asks for.
		runtime.ReportUpstreamRequestID(ctx, h.Get("x-request-id"))
		return c.call.HTTP(err, apiErr.StatusCode, h, wire.Body{Type: apiErr.Type, Code: apiErr.Code, Param: apiErr.Param, Message: apiErr.Message})
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
				Param   any    `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(se.Event.Data, &body)
		b := wire.Body{Type: body.Error.Type, Message: body.Error.Message}
		if p, ok := body.Error.Param.(string); ok {
			b.Param = p
		}
		switch code := body.Error.Code.(type) {
		case string:
			b.Code = code
		case float64:
			// An HTTP status (OpenRouter, vLLM), which says more than
			// their types ("BadRequestError").
			if code == math.Trunc(code) && code >= 100 && code < 600 {
				b.Code = strconv.Itoa(int(code))
			}
		}
		return c.call.Event(err, b, deltas)
	}
	return c.call.Transport(ctx, err, deltas)
}

// finishReason maps the server's finish reason onto the runtime's
// vocabulary (OpenAI's own, with the deprecated function_call as tool_calls).
func finishReason(r string) string {
	if r == "function_call" {
		return runtime.FinishToolCalls
	}
	return r
}

// textOf returns a message's text (Content, then its text parts) and its
// other parts. Adjacent texts run together where the model reads them so
// (runtime.Message.RunsOn: plain text parts of a message other than a
// tool message), as OpenAI's API reads content parts, a Claude model
// separate text blocks and a guard's m.content the message: a line break
// joins them where an image, a thinking block or a tool call stood
// between them, and in a tool message, one result.
func textOf(m *runtime.Message) (string, []runtime.ContentPart) {
	if len(m.Parts) == 0 {
		return m.Content, nil
	}
	var b strings.Builder
	b.WriteString(m.Content)
	var rest []runtime.ContentPart
	for j, p := range m.Parts {
		if p.Type == runtime.PartText {
			if b.Len() > 0 && !m.RunsOn(j) {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
			continue
		}
		rest = append(rest, p)
	}
	return b.String(), rest
}

// userParts returns the text, image and document parts of a user message
// with images or documents, in the message's order (Content first): the
// text that labels an image stays next to it. Adjacent texts are one
// part, as textOf joins them.
func userParts(m *runtime.Message) []runtime.ContentPart {
	out := make([]runtime.ContentPart, 0, len(m.Parts)+1)
	var run strings.Builder
	run.WriteString(m.Content)
	flush := func() {
		if run.Len() > 0 {
			out = append(out, runtime.ContentPart{Type: runtime.PartText, Text: run.String()})
			run.Reset()
		}
	}
	for j, p := range m.Parts {
		switch p.Type {
		case runtime.PartText:
			if run.Len() > 0 && !m.RunsOn(j) {
				run.WriteString("\n")
			}
			run.WriteString(p.Text)
		case runtime.PartImage, runtime.PartDocument:
			flush()
			out = append(out, p)
		}
	}
	flush()
	return out
}

// imageURL returns the URL of an image or document part: its data: URL
// spelt as the layers read it (runtime.CanonicalDataURL), its URL, or a
// data: URL of its bytes.
func imageURL(p runtime.ContentPart) string {
	if u, ok := runtime.CanonicalDataURL(p.ImageURL); ok {
		return u
	}
	if p.ImageURL != "" {
		return p.ImageURL
	}
	return "data:" + p.MediaType + ";base64," + wire.Base64(p.Data)
}

// Close closes the idle connections of the HTTP client New made, whose
// transport is the client's own: without it they stay open, each with two
// goroutines, until the transport's idle timeout. A request in flight is
// not interrupted. A Config.HTTPClient is the host's and is left alone.
// Pipeline.Close calls it for the clients Build made.
func (c *Client) Close() error {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
	return nil
}
