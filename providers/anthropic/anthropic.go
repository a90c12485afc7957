// Package anthropic is the model client of provider "anthropic": the
// Anthropic Messages API, built on the official SDK,
// github.com/anthropics/anthropic-sdk-go/v2.
//
// Importing the package registers the provider with the runtime, so that a
// policy's model declared as
//
//	models: claude: {provider: "anthropic", model: "claude-sonnet-4-5", api_key_env: "ANTHROPIC_API_KEY"}
//
// gets its client at runtime.Build. New builds one by hand.
//
// The SDK sends the key as a bearer token. A client streams the message: text and tool_use blocks become deltas
// (tool input arrives as ToolCallDelta fragments, indexed by the order of
// the tool_use blocks; thinking and redacted_thinking blocks as
// ThinkingDelta fragments, indexed by the order of the thinking blocks), the input usage of message_start rides on the first
// delta, and the last delta carries the finish reason (end_turn and
// stop_sequence: stop, max_tokens: length, tool_use: tool_calls, refusal:
// content_filter, pause_turn kept as FinishPauseTurn) and the output usage
// of message_delta. A refusal's explanation (message_delta's stop_details)
// arrives as text marked runtime.Delta.Refusal before the last delta. A
// stream that fails after message_start carries on its error
// (runtime.CallError.Usage) the input it announced that no delta carried,
// and the output of a message_delta: the API bills them. System messages
// become the request's system blocks; tool results become tool_result
// blocks of a user message. The SDK's own retries are off: the policy's
// retry layer retries, and a failure comes back as a *runtime.CallError
// classified from the wire (see docs/providers.md). The API key never
// appears in an error.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	fastjson "github.com/segmentio/encoding/json"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// DefaultBaseURL is the Anthropic API's endpoint.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultMaxTokens bounds the output of a request when neither the request
// nor the Config sets a bound (the API requires one).
const DefaultMaxTokens = 4096

// Config configures a Client.
type Config struct {
	// Model is the model id sent to the API ("claude-sonnet-4-5").
	Model string
	// APIKey is the API key, sent by the SDK as a bearer token ("" sends
	// none, for a proxy that adds it).
	APIKey string
	// BaseURL is the endpoint ("" is DefaultBaseURL).
	BaseURL string
	// MaxTokens bounds the output of a request that sets none (0:
	// DefaultMaxTokens).
	MaxTokens int
	// HTTPClient sends the requests (nil: a client of its own); the client
	// uses a copy that follows no redirect to another origin.
	HTTPClient *http.Client
}

// Client streams messages of one model. It is safe for concurrent use.
type Client struct {
	cfg  Config
	msgs anthropic.MessageService
	call wire.Call
	// own is the HTTP client New made (nil: the host's Config.HTTPClient).
	own *http.Client
}

// DefaultMaxTokens implements runtime.OutputBounder: the max_tokens sent
// with a request that sets none (Config.MaxTokens, else DefaultMaxTokens).
func (c *Client) DefaultMaxTokens() int { return c.cfg.MaxTokens }

func init() {
	runtime.RegisterProvider("anthropic", func(_ context.Context, m runtime.ProviderModel) (runtime.ModelClient, error) {
		return New(Config{Model: m.Model.ID, APIKey: m.APIKey, BaseURL: m.Model.BaseURL, MaxTokens: m.Model.MaxTokens})
	})
}

// New returns a client for cfg. It does not contact the API. It reads no
// environment variable: everything comes from cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: no model id")
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
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
		option.WithMiddleware(capErrorBody, carryTrace),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Client{cfg: cfg, msgs: anthropic.NewMessageService(opts...),
		call: wire.Call{Provider: "anthropic", Model: cfg.Model, Key: cfg.APIKey}, own: own}, nil
}

// Stream implements runtime.ModelClient: it sends req and pushes each text
// or tool-input chunk as a delta, the finish reason and the output usage on
// the last. A consumer that stops closes the connection. Failures are
// *runtime.CallError (see the package doc); the caller's own cancellation
// returns ctx's error.
func (c *Client) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	body, err := c.body(req)
	if err != nil {
		// A request the model cannot honour (ErrProviderRefused) may be
		// another provider's to serve: a fallback falls over.
		return &runtime.CallError{Kind: runtime.KindPermanent, Status: http.StatusBadRequest, Message: "anthropic " + c.cfg.Model, Err: err}
	}
	// The SDK sends the request (the body the client encoded, in place of
	// its parameters' own encoding) and frames the events (pings and error
	// events included); the events are decoded into event, the few fields
	// a delta needs, which costs a fraction of decoding the SDK's union.
	// The model and max_tokens are set beside the body too: the SDK's span
	// reads them from the parameters (gen_ai.request.model,
	// gen_ai.request.max_tokens), not from the body sent.
	params := anthropic.MessageNewParams{Model: anthropic.Model(c.cfg.Model), MaxTokens: int64(c.maxTokens(req))}
	param.SetJSON(body, &params)
	var raw *http.Response
	sdk := c.msgs.NewStreaming(ctx, params, requestOptions(req, &raw)...)
	defer sdk.Close()
	if err := sdk.Err(); err != nil {
		return c.failure(ctx, err, 0)
	}
	if raw == nil {
		return c.call.Truncated(0)
	}
	runtime.ReportUpstreamRequestID(ctx, raw.Header.Get("request-id"))
	if !wire.EventStream(raw.Header) {
		return wire.Accepted(c.call.NotAStream(raw.Header.Get("Content-Type"), wholeUsage(raw.Body)), req, 0)
	}
	// The events are decoded from the body through a lookahead, which
	// marks the deltas the next one follows at once (runtime.Delta.More),
	// unless the SDK traces the body's events (it decodes such a body
	// itself).
	var la *wire.Lookahead
	// A complete stream's body is released to a drain that owns its
	// closing (wire.Release): the closes deferred here, the SDK's, then
	// leave it alone.
	var upstream *releasable
	// span is the SDK's span of a traced call (the request was sent inside
	// it, and carryTrace leaves that request on the response), which
	// follows the events as the client decodes them, not as the SDK would:
	// the client gives it the model that answered. The caller's span is
	// not the SDK's: where the SDK made none (no provider registered), a
	// body the host's HTTP client wraps may look traced all the same.
	span := trace.SpanFromContext(context.Background())
	if _, traced := raw.Body.(interface{ Unwrap() io.ReadCloser }); traced || raw.Body == nil {
		if traced && raw.Request != nil {
			if s := trace.SpanFromContext(raw.Request.Context()); !s.SpanContext().Equal(trace.SpanContextFromContext(ctx)) {
				span = s
			}
		}
		la = wire.NewLookahead(nil, yield)
	} else {
		upstream = &releasable{ReadCloser: raw.Body}
		la = wire.NewLookahead(upstream, yield)
		raw.Body = la.Body()
	}
	// The SDK's decoder bounds no event: an upstream's endless one would
	// be held whole until the upstream stops.
	if raw.Body != nil {
		raw.Body = limitEvents(raw.Body)
	}
	stream := ssestream.NewStream[event](ssestream.NewDecoder(raw), nil)
	defer stream.Close()
	return c.consume(ctx, req, stream, la, span, func() {
		if upstream != nil {
			upstream.released = true
			wire.Release(ctx, upstream.ReadCloser)
		}
	})
}

// limitEvents returns body bounded by wire.LimitEvents. The body of a call
// the SDK traces keeps its tracing: the SDK's decoder reads the bounded
// body it unwraps, and the span follows the decoded events.
func limitEvents(body io.ReadCloser) io.ReadCloser {
	if tb, ok := body.(tracedBody); ok {
		return tracedLimit{ReadCloser: body, traced: tb}
	}
	return wire.LimitEvents(body)
}

// tracedBody is the SDK's body of a traced call, as its ssestream
// decoder sees it.
type tracedBody interface {
	Unwrap() io.ReadCloser
	TraceEvents(ssestream.Decoder) ssestream.Decoder
}

// tracedLimit is a traced body whose unwrapped body is bounded.
type tracedLimit struct {
	io.ReadCloser
	traced tracedBody
}

func (t tracedLimit) Unwrap() io.ReadCloser { return wire.LimitEvents(t.traced.Unwrap()) }

func (t tracedLimit) TraceEvents(d ssestream.Decoder) ssestream.Decoder {
	return t.traced.TraceEvents(d)
}

// releasable is a response's body that, once released to a drain, is not
// closed by its reader's Close.
type releasable struct {
	io.ReadCloser
	released bool
}

func (r *releasable) Close() error {
	if r.released {
		return nil
	}
	return r.ReadCloser.Close()
}

// usage is what the client reads of a usage object.
type usage struct {
	InputTokens              wire.Count `json:"input_tokens"`
	OutputTokens             wire.Count `json:"output_tokens"`
	CacheReadInputTokens     wire.Count `json:"cache_read_input_tokens"`
	CacheCreationInputTokens wire.Count `json:"cache_creation_input_tokens"`
	// CacheCreation splits the cache writes by the entries' time to live.
	CacheCreation struct {
		Ephemeral1hInputTokens wire.Count `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokensDetails struct {
		ThinkingTokens wire.Count `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// input returns the input counts of u: Anthropic's input_tokens leaves
// out the tokens read from the prompt cache and those written to it, which
// Usage.InputTokens counts. The sum saturates at math.MaxInt64: absurd
// counts stay the largest count instead of wrapping negative.
func (u *usage) input() runtime.Usage {
	read, written := int64(u.CacheReadInputTokens), int64(u.CacheCreationInputTokens)
	return runtime.Usage{InputTokens: runtime.SaturatingAdd(runtime.SaturatingAdd(int64(u.InputTokens), read), written),
		CachedInputTokens: read, CacheWriteInputTokens: written,
		CacheWrite1hInputTokens: min(int64(u.CacheCreation.Ephemeral1hInputTokens), written)}
}

// event is what the client reads of a stream event.
type event struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Model string `json:"model"`
		Usage usage  `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Text string `json:"text"`
		// Thinking and Signature open a thinking block (usually empty,
		// the text following in deltas); Data is a redacted_thinking
		// block's.
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
		// Input is a tool_use block's input at its start: {} from
		// Anthropic's API, the input following in deltas; an
		// Anthropic-compatible server may give it whole there.
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type         string `json:"type"`
		Text         string `json:"text"`
		Thinking     string `json:"thinking"`
		Signature    string `json:"signature"`
		PartialJSON  string `json:"partial_json"`
		StopReason   string `json:"stop_reason"`
		StopSequence string `json:"stop_sequence"`
		// StopDetails explain a refusal: its policy category and a
		// human-readable explanation (null when the category has none).
		StopDetails struct {
			Type        string `json:"type"`
			Category    string `json:"category"`
			Explanation string `json:"explanation"`
		} `json:"stop_details"`
	} `json:"delta"`
	Usage usage `json:"usage"`
}

// UnmarshalJSON decodes data, leaving zero the fields whose JSON type is
// not theirs, as the SDK's own decoding does. segmentio's decoder, several
// times faster, decodes an event; where it reports any error, encoding/json
// decodes the event again, as it stops at a field of an unexpected type
// where encoding/json goes on with the rest.
func (e *event) UnmarshalJSON(data []byte) error {
	type plain event
	if fastjson.Unmarshal(data, (*plain)(e)) == nil {
		return nil
	}
	*e = event{}
	err := json.Unmarshal(data, (*plain)(e))
	if _, ok := err.(*json.UnmarshalTypeError); ok {
		return nil
	}
	return err
}

// consume turns the events of stream into deltas. The stream ends at
// message_stop, as the API ends it: what a server sends after it (events,
// or nothing, the response held open) is not the message's, and after the
// last delta of a complete stream consume calls drain. The deltas go
// through la, whose held delta is passed on before consume returns. span,
// the SDK's span of the call (or one that records nothing), gets the model
// of message_start (gen_ai.response.model).
func (c *Client) consume(ctx context.Context, req *runtime.ChatRequest, stream *ssestream.Stream[event], la *wire.Lookahead, span trace.Span, drain func()) error {
	var (
		deltas  int
		input   runtime.Usage // from message_start, sent on the first delta
		sent    runtime.Usage // the input usage already sent
		output  runtime.Usage // from message_delta (cumulative)
		finish  string
		stopSeq string
		stopped bool
		refusal bool // a refusal's explanation went out
		// tools maps content block indexes to tool-call indexes, and
		// thinking to thinking-block indexes; ntools and nthinking count
		// the blocks begun. A map, so that a delta finds its block in
		// constant time however many an upstream begins before it.
		tools             map[int64]int
		thinking          map[int64]int
		ntools, nthinking int
		slab              wire.ToolCallSlab
		// startInput holds, by block index, the input a tool_use block
		// gave at its start, other than {}, until a delta of its input
		// replaces it or the block stops, which sends it (or the stream
		// ends, for a block never stopped): the SDKs keep a start's
		// input no delta followed, as a text block's text.
		startInput map[int64]string
	)
	emit := func(d runtime.Delta) bool {
		if deltas == 0 {
			d.Usage.InputTokens, d.Usage.CachedInputTokens = input.InputTokens, input.CachedInputTokens
			d.Usage.CacheWriteInputTokens, d.Usage.CacheWrite1hInputTokens = input.CacheWriteInputTokens, input.CacheWrite1hInputTokens
			sent = input
		}
		deltas++
		return la.Yield(d)
	}
	// fail passes the held delta on and returns err, or nil when the
	// consumer stopped.
	fail := func(err error) error {
		if !la.Flush() {
			return nil
		}
		return err
	}
	// billed returns err, a failure of the stream, carrying what the
	// stream announced and no delta carried (runtime.CallError.Usage):
	// the input of message_start when no delta went out, and the output
	// of a message_delta. The provider bills them though the call failed.
	reported := false // a message_delta reported the output
	billed := func(err error) error {
		var ce *runtime.CallError
		if errors.As(err, &ce) {
			ce.Usage = input.Sub(sent)
			if reported {
				ce.Usage.OutputTokens, ce.Usage.ReasoningTokens = output.OutputTokens, output.ReasoningTokens
			}
		}
		return err
	}
	// started sends the input the start of tool_use block gave, if it
	// is still held.
	started := func(block int64) bool {
		in, ok := startInput[block]
		if !ok {
			return true
		}
		delete(startInput, block)
		tc := slab.Take(1)
		tc[0] = runtime.ToolCallDelta{Index: tools[block], Arguments: in}
		return emit(runtime.Delta{ToolCalls: tc})
	}
	think := func(block int64, td runtime.ThinkingDelta) bool {
		i, ok := thinking[block]
		if !ok {
			return true // a delta of a block that never started
		}
		td.Index = i
		return emit(runtime.Delta{Thinking: &td})
	}
	for stream.Next() {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			if m := ev.Message.Model; m != "" && span.IsRecording() {
				span.SetAttributes(attribute.String("gen_ai.response.model", m))
			}
			u := &ev.Message.Usage
			input = u.input()
			output.OutputTokens = int64(u.OutputTokens)
		case "content_block_start":
			cb := &ev.ContentBlock
			switch cb.Type {
			case "tool_use":
				if tools == nil {
					tools = map[int64]int{}
				}
				if _, again := tools[ev.Index]; !again {
					// A block begun twice: its deltas go to the first.
					tools[ev.Index] = ntools
				}
				ntools++
				tc := slab.Take(1)
				tc[0] = runtime.ToolCallDelta{Index: ntools - 1, ID: cb.ID, Name: cb.Name}
				if !emit(runtime.Delta{ToolCalls: tc}) {
					return nil
				}
				if in := bytes.TrimSpace(cb.Input); len(in) > 0 && !emptyInput(in) {
					if startInput == nil {
						startInput = map[int64]string{}
					}
					startInput[ev.Index] = string(in)
				}
			case "text":
				if cb.Text != "" && !emit(runtime.Delta{Text: cb.Text}) {
					return nil
				}
			case "thinking", "redacted_thinking":
				// Every thinking block gets a delta when it starts, so
				// that an empty one keeps its place.
				if thinking == nil {
					thinking = map[int64]int{}
				}
				// A block begun twice: its deltas go to the last.
				thinking[ev.Index] = nthinking
				nthinking++
				td := runtime.ThinkingDelta{Text: cb.Thinking, Signature: cb.Signature}
				if cb.Type == "redacted_thinking" {
					td = runtime.ThinkingDelta{Redacted: true, Signature: cb.Data}
				}
				if !think(ev.Index, td) {
					return nil
				}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" && !emit(runtime.Delta{Text: ev.Delta.Text}) {
					return nil
				}
			case "thinking_delta":
				if ev.Delta.Thinking != "" && !think(ev.Index, runtime.ThinkingDelta{Text: ev.Delta.Thinking}) {
					return nil
				}
			case "signature_delta":
				if ev.Delta.Signature != "" && !think(ev.Index, runtime.ThinkingDelta{Signature: ev.Delta.Signature}) {
					return nil
				}
			case "input_json_delta":
				if ev.Delta.PartialJSON != "" {
					delete(startInput, ev.Index)
				}
				if i, ok := tools[ev.Index]; ok && ev.Delta.PartialJSON != "" {
					tc := slab.Take(1)
					tc[0] = runtime.ToolCallDelta{Index: i, Arguments: ev.Delta.PartialJSON}
					if !emit(runtime.Delta{ToolCalls: tc}) {
						return nil
					}
				}
			}
		case "message_delta":
			if r := ev.Delta.StopReason; r != "" {
				finish = finishReason(r)
				if r == "stop_sequence" {
					stopSeq = ev.Delta.StopSequence
				}
			}
			// A refusal's explanation is what the model declined with:
			// it goes on as refusal text (an OpenAI model's refusal is
			// its text), after what the model wrote before it stopped.
			if sd := &ev.Delta.StopDetails; (ev.Delta.StopReason == "refusal" || sd.Type == "refusal") && sd.Explanation != "" && !refusal {
				refusal = true
				if !emit(runtime.Delta{Text: sd.Explanation, Refusal: true}) {
					return nil
				}
			}
			u := &ev.Usage
			reported = true
			output.OutputTokens = int64(u.OutputTokens)
			output.ReasoningTokens = int64(u.OutputTokensDetails.ThinkingTokens)
			if in := u.input(); in.InputTokens > input.InputTokens {
				input = runtime.Usage{InputTokens: in.InputTokens, CachedInputTokens: max(in.CachedInputTokens, input.CachedInputTokens),
					CacheWriteInputTokens:   max(in.CacheWriteInputTokens, input.CacheWriteInputTokens),
					CacheWrite1hInputTokens: max(in.CacheWrite1hInputTokens, input.CacheWrite1hInputTokens)}
			}
		case "content_block_stop":
			if !started(ev.Index) {
				return nil
			}
		case "message_stop":
			stopped = true
		}
		if stopped {
			break
		}
	}
	if la.Stopped() {
		return nil // the body's read failed as the consumer had stopped
	}
	// The inputs of blocks never stopped (the message ended, or the
	// stream was cut, after their starts) arrived all the same.
	for _, block := range slices.Sorted(maps.Keys(startInput)) {
		if !started(block) {
			return nil
		}
	}
	if err := stream.Err(); err != nil {
		failed := billed(c.failure(ctx, err, deltas))
		if !streamEvent(err) {
			// Cut, or unreadable: the prompt was read and billed
			// (wire.Accepted).
			failed = wire.Accepted(failed, req, deltas)
		}
		return fail(failed)
	}
	// The response is complete once message_stop arrived after the
	// message_delta that gives its stop reason and output count: without
	// that delta, the stream has lost how the answer ended and what it
	// billed.
	if !stopped || finish == "" {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(wire.Accepted(billed(c.call.Truncated(deltas)), req, deltas))
	}
	last := runtime.Delta{FinishReason: finish, StopSequence: stopSeq, Usage: input.Sub(sent)}
	last.Usage.OutputTokens, last.Usage.ReasoningTokens = output.OutputTokens, output.ReasoningTokens
	deltas++
	if la.Yield(last) {
		la.Flush()
	}
	drain()
	return nil
}

// failure classifies a failed stream: an error response by its status, an
// error event of the stream (the response's status is then 200) by its
// type.
func (c *Client) failure(ctx context.Context, err error, deltas int) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode >= 400 {
			var h http.Header
			if apiErr.Response != nil {
				h = apiErr.Response.Header
			}
			// The upstream's id of a failed request is the one its
			// support asks for.
			runtime.ReportUpstreamRequestID(ctx, h.Get("request-id"))
			return c.call.HTTP(err, apiErr.StatusCode, h, wire.Body{Type: string(apiErr.Type()), Message: apiErr.Message})
		}
		return c.call.Event(err, wire.Body{Type: string(apiErr.Type()), Message: apiErr.Message}, deltas)
	}
	if streamEvent(err) {
		return c.call.Event(err, wire.Body{Message: strings.TrimPrefix(err.Error(), "received error while streaming: ")}, deltas)
	}
	return c.call.Transport(ctx, err, deltas)
}

// streamEvent reports whether err, the failure of a stream the upstream
// answered, is an error event of the stream (the SDK's error of its type,
// or its own "received error while streaming").
func streamEvent(err error) bool {
	var apiErr *anthropic.Error
	return errors.As(err, &apiErr) || strings.HasPrefix(err.Error(), "received error while streaming")
}

// wholeUsage reads body, a whole message answered in place of a stream,
// and closes it: the usage it reports, zero when none.
func wholeUsage(body io.ReadCloser) runtime.Usage {
	var whole struct {
		Usage usage `json:"usage"`
	}
	wire.ReadWhole(body, &whole)
	u := whole.Usage.input()
	u.OutputTokens = int64(whole.Usage.OutputTokens)
	u.ReasoningTokens = int64(whole.Usage.OutputTokensDetails.ThinkingTokens)
	return u
}

// FinishPauseTurn is the finish reason of a turn the API paused
// (Anthropic's pause_turn: a long turn of its server tools): the answer is
// not finished, and stop would pass it for a whole one. It is the
// runtime's runtime.FinishPauseTurn.
const FinishPauseTurn = runtime.FinishPauseTurn

// finishReason maps Anthropic's stop reason onto the runtime's vocabulary;
// one it has no word for is kept as it is.
func finishReason(r string) string {
	switch r {
	case "pause_turn":
		return runtime.FinishPauseTurn
	case "end_turn", "stop_sequence":
		return runtime.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return runtime.FinishLength
	case "tool_use":
		return runtime.FinishToolCalls
	case "refusal":
		return runtime.FinishContentFilter
	}
	return r
}

// requestOptions returns the SDK options of a request for req: its betas as
// the anthropic-beta header, and the raw response kept in raw.
func requestOptions(req *runtime.ChatRequest, raw **http.Response) []option.RequestOption {
	opts := []option.RequestOption{option.WithResponseInto(raw)}
	if len(req.Betas) > 0 {
		opts = append(opts, option.WithHeader("anthropic-beta", strings.Join(req.Betas, ",")))
	}
	return opts
}

// maxErrorBody is the most of a failed response's body the SDK reads for
// its error (an error body is a few hundred bytes; a hostile or broken
// upstream's endless one must not fill the memory).
const maxErrorBody = 1 << 20

// capErrorBody is an SDK middleware that cuts the body of a response of
// status 400 or more at maxErrorBody: the SDK reads such a body whole.
func capErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.StatusCode >= 400 && res.Body != nil {
		res.Body = limitedBody{Reader: io.LimitReader(res.Body, maxErrorBody), Closer: res.Body}
	}
	return res, err
}

// carryTrace is an SDK middleware that has the request carry the trace of
// the call (wire.CarryTrace): the SDK sends the trace context only through
// the propagator registered with OpenTelemetry, which none may be. The
// request is the SDK's copy for this attempt, in the context of the SDK's
// span of the call, and it is left on the response: a host's HTTP
// instrumentation sends a copy in a span of its own, which the response
// would carry, and Stream gives the SDK's span the model that answered.
func carryTrace(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	req.Header = wire.CarryTrace(req.Context(), req.Header)
	res, err := next(req)
	if res != nil {
		res.Request = req
	}
	return res, err
}

// capBody is an SDK middleware that fails the read of a successful
// response's body past wire.MaxResponseBytes (wire.ErrResponseTooLarge),
// for a request whose answer the SDK reads whole.
func capBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.StatusCode < 400 && res.Body != nil {
		res.Body = wire.LimitResponse(res.Body)
	}
	return res, err
}

// limitedBody reads from Reader and closes Closer.
type limitedBody struct {
	io.Reader
	io.Closer
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

// emptyInput reports whether a tool_use block's input at its start is
// empty: {} (Anthropic's API, the input following in deltas) or null.
func emptyInput(in []byte) bool {
	if string(in) == "null" {
		return true
	}
	if in[0] != '{' || in[len(in)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(in[1:len(in)-1])) == 0
}
