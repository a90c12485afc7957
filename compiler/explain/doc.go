// Package explain describes a policy's chains the way a reader needs them:
// per stage, the onion from the outermost layer to the innermost, each
// layer with its traits, its key settings (for a layer that blocks, what
// decides what it blocks: tool_policy's argument patterns, the kinds pii
// detects, egress's scan_args, content_filter's keywords and patterns,
// security's patterns, defaults and threshold, and in the chat stage
// whether pii, content_filter and security read the system messages), its
// scope, and the ordering
// constraints that hold it in place with their reasons; then the
// consequences of the order (how often a failing call can run under nested
// re-invoking layers, which layers a cache hit skips, how many audit
// records one call leaves). Build computes the Explanation from the
// ordering analysis of compiler/vet; Text, Dot and Mermaid render it.
package explain
