// Package maxtokens implements the max_tokens builtin (stage chat): it
// estimates the input tokens of the request (runtime.EstimateRequest: its
// messages counted by runtime.EstimateTokens, never below what OpenAI's
// tokenizers make of common text, plus a small per-message overhead,
// and of the tools it offers and its response format's schema, which the
// provider reads and bills too) and refuses a request over `limit` with a
// *runtime.BlockedError before the model runs.
package maxtokens
