package runtime

// Ledger is what a meter has charged: tokens, cost and calls.
type Ledger struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	USD          float64 `json:"usd"`
	Calls        int64   `json:"calls"`
}

// Tokens returns input plus output tokens.
func (l Ledger) Tokens() int64 { return l.InputTokens + l.OutputTokens }

// LedgerReader is implemented by metering middlewares: Ledger returns the
// ledger that applies to a run (the run's own, or the global one).
type LedgerReader interface {
	Ledger(runID string) Ledger
}
