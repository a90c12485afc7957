// Package maxtokens implements the max_tokens builtin (stage chat): it
// estimates the input tokens of the request (runtime.EstimateRequest: about
// four bytes per token of its messages, plus a small per-message overhead,
// and of the tools it offers and its response format's schema, which the
// provider reads and bills too) and refuses a request over `limit` with a
// *runtime.BlockedError before the model runs.
package maxtokens
