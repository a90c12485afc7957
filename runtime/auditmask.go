package runtime

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
)

// auditSink resolves the audit sink named store and wraps it so that every
// record written through it has the secrets of its run masked.
func (pl *Pipeline) auditSink(ctx context.Context, store string) (AuditSink, error) {
	s, err := resolvePort(ctx, pl, "audit sink", store, pl.deps.AuditSinks, pl.deps.Audit, pl.deps.Audit != nil)
	if err != nil {
		return nil, err
	}
	return maskingSink{AuditSink: s, pl: pl}, nil
}

// maskingSink is an AuditSink that masks the secrets of a record's run (the
// results of its secret_result tools, as a checkpoint looks for them) in
// every field of the record that holds free text before the record reaches
// the sink: the arguments (as SecretMasker does), and within the error
// message, the error type, the tool name and the idempotency key, each
// occurrence of a secret is replaced by "[SECRET]". A tool error that
// echoes a token, or a turn input that quotes one, so never reaches the
// trail in clear.
type maskingSink struct {
	AuditSink
	pl *Pipeline
}

// Eviction implements Evictor for the sink it masks.
func (m maskingSink) Eviction() (string, bool) {
	if e, ok := m.AuditSink.(Evictor); ok {
		return e.Eviction()
	}
	return "", false
}

// Append implements AuditSink.
func (m maskingSink) Append(ctx context.Context, r AuditRecord) error {
	return m.AuditSink.Append(ctx, m.pl.maskRecord(r))
}

// maskRecord returns r with the secrets of its run masked.
func (pl *Pipeline) maskRecord(r AuditRecord) AuditRecord {
	taint := pl.runTaint(r.RunID)
	if len(taint) == 0 {
		return r
	}
	r.ErrorMessage = maskText(r.ErrorMessage, taint)
	r.ErrorType = maskText(r.ErrorType, taint)
	r.Tool = maskText(r.Tool, taint)
	r.IdempotencyKey = maskText(r.IdempotencyKey, taint)
	r.Args = pl.maskSecrets(r.RunID, r.Args)
	return r
}

// runTaint returns the secret strings of run runID, longest first.
func (pl *Pipeline) runTaint(runID string) []string {
	taint, _ := readRunState(pl, runID, (*RunState).secrets)
	slices.SortFunc(taint, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return taint
}

// secrets returns the secret strings of the run, in no order. The caller
// holds s.mu.
func (s *RunState) secrets() []string {
	return slices.Collect(maps.Keys(s.taint))
}

// maskText returns s with each occurrence of a secret string (taint, longest
// first) replaced by secretMark.
func maskText(s string, taint []string) string {
	if s == "" {
		return s
	}
	for _, t := range taint {
		s = strings.ReplaceAll(s, t, secretMark)
	}
	return s
}

// SecretText returns a function that masks the secrets of a run (the
// results of its secret_result tools) in a text a layer writes out of the
// run (a log line's error message or input): each occurrence is replaced by
// "[SECRET]". A text of a run that holds no secret is returned as it is.
func (b *BuildContext) SecretText() func(runID, s string) string {
	return func(runID, s string) string { return maskText(s, b.p.runTaint(runID)) }
}

// SecretValue returns a function that masks the secrets of a run in a
// value a layer writes out of the run (a log line's messages): when the run
// holds a secret, v is returned as its JSON form with each string, number
// and object key holding one replaced by "[SECRET]" (a value without a JSON
// form is withheld whole); else v as it is.
func (b *BuildContext) SecretValue() func(runID string, v any) any {
	return func(runID string, v any) any {
		taint := b.p.runTaint(runID)
		if len(taint) == 0 {
			return v
		}
		jv, err := exactJSONValue(v)
		if err != nil {
			return secretMark + " (the value has no JSON form; withheld)"
		}
		return maskTaint(jv, taint)
	}
}
