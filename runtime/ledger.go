package runtime

import "math"

// Ledger is what a meter has charged: tokens, cost and calls.
type Ledger struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	USD          float64 `json:"usd"`
	Calls        int64   `json:"calls"`
}

// Tokens returns input plus output tokens, at most the largest int64 (an
// estimate of a call's max_tokens near it must not wrap around to a
// negative count, which a ceiling would admit).
func (l Ledger) Tokens() int64 { return clampedSum(l.InputTokens, l.OutputTokens) }

// clampedSum returns a+b, stopping at the largest or the smallest int64
// instead of wrapping around.
func clampedSum(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// LedgerReader is implemented by metering middlewares: Ledger returns the
// ledger that applies to a run (the run's own, or the global one).
type LedgerReader interface {
	Ledger(runID string) Ledger
}
