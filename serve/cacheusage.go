package serve

import (
	"github.com/agentc-dev/agentc/runtime"
)

// CacheUsage says whether the prompt-cache figures of a model call's usage
// reach its client: OpenAI's prompt_tokens_details.cached_tokens (and the
// Responses API's input_tokens_details.cached_tokens), Anthropic's
// cache_read_input_tokens, cache_creation_input_tokens and cache_creation.
//
// The gateway calls a provider with one account's key for every tenant,
// and a provider's prompt cache is shared by the requests of an account
// (OpenAI: an organization; Anthropic: an organization or workspace): a
// request whose prefix another request sent in the last minutes reads it
// from the cache, and the usage says so. Those figures tell one tenant
// whether another sent a given prefix (a system prompt, a document, a
// customer's message that begins as guessed). Withheld, the tokens read from
// or written to the cache are counted as input tokens that were not
// (prompt_tokens and the Anthropic input_tokens keep the whole input), so
// the client's figure of the input is the same whatever other tenants
// sent. The meter, the budgets and the metrics count the figures the
// provider reported.
type CacheUsage string

const (
	// CacheUsageAuto withholds the figures when the policy's keys name
	// more than one tenant, and reports them otherwise.
	CacheUsageAuto CacheUsage = "auto"
	// CacheUsageReport reports the figures as the provider gave them.
	CacheUsageReport CacheUsage = "report"
	// CacheUsageWithhold withholds them.
	CacheUsageWithhold CacheUsage = "withhold"
)

// check refuses a value other than the three (or empty: auto).
func (c CacheUsage) check() error {
	switch c {
	case "", CacheUsageAuto, CacheUsageReport, CacheUsageWithhold:
		return nil
	}
	return optionsErrorf("-cacheusage (Options.CacheUsage) must be %s, %s or %s, got %q", CacheUsageAuto, CacheUsageReport, CacheUsageWithhold, string(c))
}

// withholds reports whether c withholds the figures of a generation whose
// keys are kr.
func (c CacheUsage) withholds(kr *keyring) bool {
	switch c {
	case CacheUsageReport:
		return false
	case CacheUsageWithhold:
		return true
	}
	return kr.tenants() > 1
}

// withholdCacheUsage returns u without its prompt-cache figures: the tokens
// read from and written to the cache are input tokens like the others
// (runtime.Usage.InputTokens already counts them).
func withholdCacheUsage(u runtime.Usage) runtime.Usage {
	u.CachedInputTokens, u.CacheWriteInputTokens, u.CacheWrite1hInputTokens = 0, 0, 0
	return u
}
