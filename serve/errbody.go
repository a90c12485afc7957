package serve

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// errDoc is what an error body says, in either API's format.
type errDoc struct {
	status int
	// kind is the gateway's class of the failure (blocked, budget,
	// permanent...); code is the same, unless an upstream's own code
	// takes its place (OpenAI's format only).
	code, kind string
	layer, msg string
	// typ and param, when set, are the upstream's own, in place of the
	// type the status maps to and of a null param.
	typ, param string
	// reason is why a call in doubt is (runtime.InDoubtError.Reason),
	// "" for the zero reason and for other failures.
	reason string
}

// ownError is the errDoc of a failure of the gateway's own.
func ownError(status int, code, layer, msg string) errDoc {
	return errDoc{status: status, code: code, kind: code, layer: layer, msg: msg}
}

// callError is the errDoc of a call that failed with err, answered with
// status to a client of API a: the gateway's class (errorCode), the layer,
// the message (clientMessage), and what of the upstream's own error a's
// format can hold without misleading its client (upstreamDetail).
func callError(a api, status int, err error) errDoc {
	e := ownError(status, errorCode(err), runtime.LayerOf(err), clientMessage(err))
	if d := (*runtime.InDoubtError)(nil); errors.As(err, &d) {
		e.reason = string(d.Reason)
	}
	e.upstreamDetail(a, err)
	e.msg = relayed(e.msg, maxRelayedMessage)
	e.typ, e.param = relayed(e.typ, maxRelayedField), relayed(e.param, maxRelayedField)
	if e.code != e.kind {
		e.code = relayed(e.code, maxRelayedField)
	}
	return e
}

// maxRelayedMessage is the most of a failed call's message an error body
// relays, and maxRelayedField the most of an upstream's error type, code
// or param, and of a finish reason or stop sequence it wrote: an
// upstream's error body is read up to 1 MiB, and the client has no use for
// more than a few KiB of it (the gateway's log keeps it whole).
const (
	maxRelayedMessage = 4 << 10
	maxRelayedField   = 256
)

// relayed is an upstream's text as a client may read it: without the ids
// of the gateway's account (withoutAccount) nor anything shaped as a
// credential (credential.Redact: a key of OpenAI's or Anthropic's form, a
// provider's hint of one, the other known shapes), and at most limit
// bytes, cut on a character's boundary and marked as cut. The marks are removed before the cut, so that the cut
// cannot leave a part of an id or a key that no longer matches.
func relayed(msg string, limit int) string {
	msg = withoutAccount(msg)
	msg = credential.Redact(msg)
	if len(msg) <= limit {
		return msg
	}
	mark := fmt.Sprintf(" … (cut: the message ran %d bytes)", len(msg))
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + mark
}

// accountIDs are the ids of the gateway's upstream account that an
// upstream's message may hold: OpenAI's organization (org- and 24 letters
// and digits) and project (proj_ and 24), as its rate limit messages name
// them ("Rate limit reached for gpt-4o in organization org-... on tokens
// per min"), Anthropic's workspace (wrkspc_...) and its organization's
// UUID ("the rate limit for your organization (UUID)", "your
// organization's rate limit ... (org: UUID, model: ...)"). Words that open
// as an id does (org-members, org-wide, proj_settings) are not ids.
var accountIDs = regexp.MustCompile(`\b(?:org-[A-Za-z0-9]{24}|proj_[A-Za-z0-9]{24}|wrkspc_[A-Za-z0-9]{6,})\b|(?i:((?:organi[sz]ation|\borg)\W{1,3})[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)`)

// withoutAccount returns an upstream's message without the ids of the
// gateway's account (accountIDs), the rest kept: they are the gateway's,
// and tell a client nothing it can act on.
func withoutAccount(msg string) string {
	// The word before a UUID ("organization", "org") is matched in any
	// case, as accountIDs does.
	if !strings.Contains(msg, "proj_") && !strings.Contains(msg, "wrkspc_") && !strings.Contains(strings.ToLower(msg), "org") {
		return msg
	}
	return accountIDs.ReplaceAllString(msg, "${1}[redacted]")
}

// upstreamDetail carries the upstream's own account of a failed call
// (wire.DetailOf) into e, for a client of API a. A client of the
// upstream's own API gets its details: an OpenAI client, for a request the
// upstream refused (a 400 here), its code, type and param; an Anthropic
// client its error type. Across APIs, the well-known failures are mapped:
// a context too long is OpenAI's context_length_exceeded and Anthropic's
// invalid_request_error "prompt is too long: ...", an overloaded upstream
// Anthropic's overloaded_error (a rate limit is already each API's by its
// status). An upstream that refused the gateway itself (its key, its
// account, its model id) passes nothing on: its details describe the
// gateway's credentials, not the client's request.
func (e *errDoc) upstreamDetail(a api, err error) {
	var ce *runtime.CallError
	if !errors.As(err, &ce) || ce.Layer != "" || refusesTheGateway(ce.Status) || ce.Status == http.StatusNotFound ||
		errors.Is(err, runtime.ErrProviderRefused) {
		return
	}
	d := wire.DetailOf(ce.Err)
	if d == nil {
		return
	}
	same := d.Provider == providerOf(a)
	switch a {
	case apiOpenAI:
		if !invalidUpstream(err) {
			return
		}
		if same {
			e.typ, e.param = d.Type, d.Param
			if d.Code != "" {
				e.code = d.Code
				return
			}
		}
		if d.ContextLength {
			e.code = contextLengthExceeded
		}
	case apiAnthropic:
		switch {
		case same:
			e.typ = d.Type
		case d.ContextLength && invalidUpstream(err):
			if !strings.Contains(e.msg, promptTooLong) {
				e.msg = promptTooLong + ": " + e.msg
			}
		case d.Overloaded:
			e.typ = "overloaded_error"
		}
	}
}

// contextLengthExceeded is OpenAI's code of a request longer than the
// model's context; promptTooLong opens Anthropic's message for one.
const (
	contextLengthExceeded = "context_length_exceeded"
	promptTooLong         = "prompt is too long"
)

// providerOf is the provider whose API a is.
func providerOf(a api) string {
	if a == apiAnthropic {
		return "anthropic"
	}
	return "openai"
}

// body is e as the error document of API a: OpenAI's
// {"error":{"message","type","code","param"}} and Anthropic's
// {"type":"error","error":{"type","message"}}, both with the gateway's
// class (kind, and Anthropic's code), the layer that refused the call
// when there is one, and why a call in doubt is when a reason is given.
func (e errDoc) body(a api) any {
	type openAIError struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
		Kind    string  `json:"kind"`
		Layer   string  `json:"layer,omitempty"`
		Reason  string  `json:"reason,omitempty"`
	}
	type anthropicError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code,omitempty"`
		Kind    string `json:"kind,omitempty"`
		Layer   string `json:"layer,omitempty"`
		Reason  string `json:"reason,omitempty"`
	}
	if a == apiAnthropic {
		typ := e.typ
		if typ == "" {
			typ = anthropicErrorType(e.status)
		}
		return map[string]any{"type": "error", "error": anthropicError{Type: typ, Message: e.msg, Code: e.kind, Kind: e.kind, Layer: e.layer, Reason: e.reason}}
	}
	typ := e.typ
	if typ == "" {
		typ = openAIErrorType(e.status)
	}
	var param *string
	if e.param != "" {
		param = &e.param
	}
	return map[string]any{"error": openAIError{Message: e.msg, Type: typ, Code: e.code, Param: param, Kind: e.kind, Layer: e.layer, Reason: e.reason}}
}
