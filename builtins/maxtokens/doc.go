// Package maxtokens implements the max_tokens builtin (stage chat): it
// estimates the input tokens of the request's transcript
// (runtime.EstimateMessages: about four bytes per token plus a small
// per-message overhead) and refuses a request over `limit` with a
// *runtime.BlockedError before the model runs.
package maxtokens
