package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/internal/wire"
)

// sender posts request bodies to the chat completions endpoint as the
// SDK's client does, without its per-request work (building the headers
// from maps, parsing and printing the URL, cloning the request, wrapping
// the client), which cost about 12 µs and 49 allocations a request: the
// URL and the headers are the ones the SDK's client sends, taken once
// from a request it builds at New without sending it.
type sender struct {
	url    string
	header http.Header
	client *http.Client
}

// doerFunc is an option.HTTPClient.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// newSender returns the sender of api, whose requests go through hc. As
// the SDK's client, it refuses to send a request, a redirect included, to
// another origin than the base URL's, so the key goes nowhere else.
func newSender(api *openai.Client, hc *http.Client) (*sender, error) {
	var built *http.Request
	capture := doerFunc(func(r *http.Request) (*http.Response, error) {
		built = r
		return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var raw *http.Response
	if err := api.Post(context.Background(), "chat/completions", []byte("{}"), &raw, option.WithHTTPClient(capture)); err != nil {
		return nil, err
	}
	if built == nil {
		return nil, errors.New("the SDK built no request")
	}
	header := built.Header.Clone()
	header.Del("Content-Length")
	client := *hc
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	client.Transport = originGuard{origin: built.URL, next: next}
	return &sender{url: built.URL.String(), header: header, client: &client}, nil
}

// errOtherOrigin refuses a request to another origin than the base URL's.
var errOtherOrigin = errors.New("request URL origin must match the configured base URL")

// originGuard sends only the requests to origin's scheme, host and port.
type originGuard struct {
	origin *url.URL
	next   http.RoundTripper
}

func (g originGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if !wire.SameOrigin(r.URL, g.origin) || (r.Host != "" && !wire.SameOrigin(&url.URL{Scheme: r.URL.Scheme, Host: r.Host}, r.URL)) {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errOtherOrigin
	}
	return g.next.RoundTrip(r)
}

// maxErrorBody is the most of a failed response's body read for its error
// (an error body is a few hundred bytes; a hostile or broken upstream's
// endless one must not fill the memory).
const maxErrorBody = 1 << 20

// post sends body and returns the response of a status below 400. A
// status of 400 or more is an *openai.Error read from the response's
// "error" member, as the SDK's; the caller's cancellation is ctx's error.
func (s *sender) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// The header is shared by the client's requests: neither net/http's
	// client nor its transport writes a request's header (the client
	// copies it for a redirect).
	req.Header = wire.CarryTrace(ctx, s.header)
	res, err := s.client.Do(req)
	if ctx.Err() != nil {
		if res != nil {
			_ = res.Body.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if res.StatusCode < 400 {
		return res, nil
	}
	contents, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(contents))
	apiErr := &openai.Error{Request: req, Response: res, StatusCode: res.StatusCode}
	if err := readError(apiErr, contents); err != nil {
		return nil, err
	}
	return nil, apiErr
}

// maxErrorText is the most of a plain-text error body kept as the error's
// message (a proxy's HTML page says what it is in its first lines).
const maxErrorText = 512

// readError reads an error body into e. OpenAI's {"error":{...}} is read
// as the SDK reads it. The shapes of other servers that speak the API,
// which the SDK reads nothing of, keep their message: an "error" that is a
// string; vLLM's unwrapped error object ({"object":"error","message":...,
// "type":...,"code":400}), read as OpenAI's; FastAPI's {"detail":...} (its
// text, or the JSON of a detail that is not one); a body that is no JSON
// object, its text cut at maxErrorText bytes.
func readError(e *openai.Error, contents []byte) error {
	if wrapped := gjson.GetBytes(contents, "error"); wrapped.IsObject() {
		return e.UnmarshalJSON([]byte(wrapped.Raw))
	} else if wrapped.Type == gjson.String {
		e.Message = wrapped.Str
		return nil
	}
	if !gjson.ValidBytes(contents) || !gjson.ParseBytes(contents).IsObject() {
		e.Message = plainText(contents)
		return nil
	}
	if gjson.GetBytes(contents, "message").Type == gjson.String {
		return e.UnmarshalJSON(contents)
	}
	switch detail := gjson.GetBytes(contents, "detail"); {
	case detail.Type == gjson.String:
		e.Message = detail.Str
	case detail.Exists() && detail.Type != gjson.Null:
		e.Message = plainText([]byte(detail.Raw))
	}
	return nil
}

// plainText is b as a message: valid UTF-8, trimmed, cut at maxErrorText
// bytes on a character's boundary.
func plainText(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b[:min(len(b), maxErrorText+utf8.UTFMax)]), "\uFFFD"))
	if len(s) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
