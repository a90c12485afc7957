package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// ProviderModel is what a provider needs to build the client of one declared
// model: its name in the policy, its declaration, and the API key read from
// the environment variable the declaration names ("" when it names none).
type ProviderModel struct {
	// Name is the model's name in the policy (a key of Deps.Models).
	Name string
	// Model is the declaration: Model.ID is the provider's model id,
	// BaseURL the endpoint, MaxTokens the default output bound.
	Model plan.Model
	// APIKey is the value of Model.APIKeyEnv. A provider must never put it
	// in an error or a log line.
	APIKey string
}

// ProviderFactory builds the client of a declared model. It runs during
// Build (ctx is Build's) and must not keep ctx; it should not contact the
// provider. A client that holds resources (an HTTP transport of its own)
// implements io.Closer: Pipeline.Close, and a failed Build, close it.
type ProviderFactory func(ctx context.Context, m ProviderModel) (ModelClient, error)

var (
	providersMu sync.RWMutex
	providers   = map[string]ProviderFactory{}
)

// RegisterProvider makes a model provider (the `provider` of a policy's
// model) available to Build. It panics when name is not a valid identifier
// or is taken, or f is nil: registration happens in init() and such a
// mistake is a programming error. Import
// github.com/agentc-dev/agentc/providers/all for "openai" and "anthropic".
func RegisterProvider(name string, f ProviderFactory) {
	if !idPattern.MatchString(name) || f == nil {
		panic(fmt.Sprintf("runtime.RegisterProvider: invalid provider name %q or nil factory", name))
	}
	providersMu.Lock()
	defer providersMu.Unlock()
	if _, dup := providers[name]; dup {
		panic(fmt.Sprintf("runtime.RegisterProvider: provider %q already registered", name))
	}
	providers[name] = f
}

// Providers returns the registered provider names, sorted.
func Providers() []string {
	providersMu.RLock()
	defer providersMu.RUnlock()
	out := make([]string, 0, len(providers))
	for k := range providers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lookupProvider(name string) (ProviderFactory, bool) {
	providersMu.RLock()
	defer providersMu.RUnlock()
	f, ok := providers[name]
	return f, ok
}

// ProviderModels builds the clients of the plan's models that declare a
// provider, except those named in have (a host's own clients win). A model
// whose provider is not registered, or whose api_key_env variable is unset
// or empty, is an error naming the model (and the variable); the key's value
// is never part of an error. Build calls it; a host that wants to wrap the
// clients calls it itself and passes the result in Deps.Models.
func ProviderModels(ctx context.Context, p *plan.Plan, have map[string]ModelClient) (map[string]ModelClient, error) {
	names := make([]string, 0, len(p.Models))
	for name, m := range p.Models {
		if m.Provider != "" && have[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	// Every model is checked before any client is made, so that one error
	// names every unset variable and unregistered provider at once.
	var errs []error
	models := make([]ProviderModel, 0, len(names))
	factories := make([]ProviderFactory, 0, len(names))
	for _, name := range names {
		m := p.Models[name]
		f, ok := lookupProvider(m.Provider)
		if !ok {
			errs = append(errs, fmt.Errorf("model %q: provider %q is not registered (registered: %v; import github.com/agentc-dev/agentc/providers/all, or supply the model in Deps.Models)",
				name, m.Provider, Providers()))
			continue
		}
		pm := ProviderModel{Name: name, Model: m}
		if m.APIKeyEnv != "" {
			key, set := os.LookupEnv(m.APIKeyEnv)
			if !set || key == "" {
				errs = append(errs, fmt.Errorf("model %q: environment variable %s (its api_key_env) is not set", name, m.APIKeyEnv))
				continue
			}
			pm.APIKey = key
		}
		models = append(models, pm)
		factories = append(factories, f)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make(map[string]ModelClient, len(models))
	for i, pm := range models {
		c, err := factories[i](ctx, pm)
		if err != nil {
			closeModels(out)
			return nil, fmt.Errorf("model %q (provider %s): %w", pm.Name, pm.Model.Provider, err)
		}
		out[pm.Name] = c
	}
	return out, nil
}

// closeModels closes the clients of models that can be closed.
func closeModels(models map[string]ModelClient) {
	for _, c := range models {
		if cl, ok := c.(io.Closer); ok {
			_ = cl.Close()
		}
	}
}

// OutputBounder is implemented by a model client that bounds the output
// of a request that sets no max_tokens: DefaultMaxTokens returns the
// max_tokens it sends then (0: none, the server's own default). A meter
// with on_cross "refuse" estimates such a request's output at it.
type OutputBounder interface {
	DefaultMaxTokens() int
}

// upstreamIDKey carries the UpstreamRequestIDs of a context.
type upstreamIDKey struct{}

// UpstreamRequestIDs notes the ids providers gave the requests of a call.
type UpstreamRequestIDs interface {
	// NoteUpstreamRequestID notes the id of a request a model client sent.
	NoteUpstreamRequestID(id string)
}

// WithUpstreamRequestID returns a context under which a model client that
// reports the id its provider gave a request (ReportUpstreamRequestID)
// hands it to ids. A gateway returns the id to its client.
func WithUpstreamRequestID(ctx context.Context, ids UpstreamRequestIDs) context.Context {
	return context.WithValue(ctx, upstreamIDKey{}, ids)
}

// ServedModels is implemented by an UpstreamRequestIDs that also notes
// the model each request of a call went to (a gateway names it in its
// response).
type ServedModels interface {
	// NoteServedModel notes the plan's name of the model a request went to.
	NoteServedModel(name string)
}

// ownCallNotes stands, in the context of a model call made for an own
// call (OwnCall), for the notes of the caller's: it takes no report.
type ownCallNotes struct{}

// ownCallContext returns the context of a model call made for an own call:
// its model client's reports reach no notes.
func ownCallContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, upstreamIDKey{}, ownCallNotes{})
}

// IsOwnCall reports whether ctx is the context of a model client's request
// made for a layer's own call (OwnCall: a judge's verdict, a summary), not
// for the caller: its reports go nowhere, and a host that records what its
// clients answered for the caller leaves it out.
func IsOwnCall(ctx context.Context) bool {
	_, ok := ctx.Value(upstreamIDKey{}).(ownCallNotes)
	return ok
}

// ReportServedModel hands name, the plan's name of the model a request is
// sent to, to the UpstreamRequestIDs of ctx when it is also ServedModels.
func ReportServedModel(ctx context.Context, name string) {
	if n, ok := ctx.Value(upstreamIDKey{}).(ServedModels); ok {
		n.NoteServedModel(name)
	}
}

// SystemFingerprints is implemented by an UpstreamRequestIDs that also
// notes the system fingerprint a provider gave the answer (OpenAI's
// system_fingerprint: the backend configuration that served it, which
// tells whether seeded answers are comparable).
type SystemFingerprints interface {
	// NoteSystemFingerprint notes the fingerprint of the answer of the
	// request last sent.
	NoteSystemFingerprint(fp string)
}

// ReportSystemFingerprint hands fp, the provider's system fingerprint of
// an answer, to the UpstreamRequestIDs of ctx when it is also
// SystemFingerprints.
func ReportSystemFingerprint(ctx context.Context, fp string) {
	if n, ok := ctx.Value(upstreamIDKey{}).(SystemFingerprints); ok && fp != "" {
		n.NoteSystemFingerprint(fp)
	}
}

// HeldNotes holds what the model clients under one context report (their
// requests' ids and models) until Commit passes it on to the notes of the
// context it was made from, and passes on what they report after. A layer
// that runs several requests for one call and keeps one answer (a hedge's
// racers) gives each request its own HeldNotes and commits the winner's:
// the call's notes then name the request whose answer the caller got, not
// whichever finished its headers last.
type HeldNotes struct {
	mu        sync.Mutex
	parent    UpstreamRequestIDs
	held      []heldNote
	committed bool
}

type heldNote struct {
	kind  noteKind
	value string
}

// noteKind is what a held note reports.
type noteKind uint8

const (
	noteRequestID noteKind = iota
	noteServedModel
	noteFingerprint
)

// HoldUpstreamNotes returns a context whose model clients' reports are held
// by the returned HeldNotes, or ctx and nil when ctx has no notes to hold
// them for. Commit on a nil *HeldNotes does nothing.
func HoldUpstreamNotes(ctx context.Context) (context.Context, *HeldNotes) {
	parent, ok := ctx.Value(upstreamIDKey{}).(UpstreamRequestIDs)
	if !ok {
		return ctx, nil
	}
	h := &HeldNotes{parent: parent}
	return WithUpstreamRequestID(ctx, h), h
}

// NoteUpstreamRequestID implements UpstreamRequestIDs.
func (h *HeldNotes) NoteUpstreamRequestID(id string) { h.note(heldNote{value: id}) }

// NoteServedModel implements ServedModels.
func (h *HeldNotes) NoteServedModel(name string) {
	h.note(heldNote{kind: noteServedModel, value: name})
}

// NoteSystemFingerprint implements SystemFingerprints.
func (h *HeldNotes) NoteSystemFingerprint(fp string) {
	h.note(heldNote{kind: noteFingerprint, value: fp})
}

func (h *HeldNotes) note(n heldNote) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.committed {
		h.pass(n)
		return
	}
	h.held = append(h.held, n)
}

// pass hands n to the parent notes. h.mu is held.
func (h *HeldNotes) pass(n heldNote) {
	switch n.kind {
	case noteRequestID:
		h.parent.NoteUpstreamRequestID(n.value)
	case noteServedModel:
		if s, ok := h.parent.(ServedModels); ok {
			s.NoteServedModel(n.value)
		}
	case noteFingerprint:
		if s, ok := h.parent.(SystemFingerprints); ok {
			s.NoteSystemFingerprint(n.value)
		}
	}
}

// Commit passes what was held on, in order, and from then on every report
// as it comes.
func (h *HeldNotes) Commit() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.committed {
		return
	}
	h.committed = true
	for _, n := range h.held {
		h.pass(n)
	}
	h.held = nil
}

// ReportUpstreamRequestID hands id, the provider's id of the request a
// model client sent, to the UpstreamRequestIDs of ctx, if any.
func ReportUpstreamRequestID(ctx context.Context, id string) {
	if ids, ok := ctx.Value(upstreamIDKey{}).(UpstreamRequestIDs); ok && id != "" {
		ids.NoteUpstreamRequestID(id)
	}
}
