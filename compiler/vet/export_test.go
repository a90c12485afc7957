package vet

// OverlapChecks returns how many times a's Overlap has been evaluated.
func OverlapChecks(a *Analysis) int { return a.overlaps }

// CallerRead is callerRead: the path and byte offset of the first read of
// a caller-written path in a when, of a layer of stage, that the caller can
// make false.
func CallerRead(stage, src string) (path string, offset int, ok bool) {
	r, ok := callerRead(stage, src)
	return r.path, r.offset, ok
}

// AnthropicMaxTokens is the output bound the meter's estimate is read
// with for an anthropic model that declares no max_tokens.
const AnthropicMaxTokens = anthropicMaxTokens
