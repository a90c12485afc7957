// Package semanticmemoize implements the semantic_memoize builtin (stages
// chat and tool): reuse of a successful call's result for a near-duplicate
// input, over the vector index port (runtime.VectorIndex).
//
// The input is embedded with the pipeline's runtime.Embedder (Deps.Embedder;
// by default the local runtime.HashEmbedder, which compares spelling, not
// meaning): a chat call's transcript without its system messages (one
// "role: content" line per message, "role (name): content" for one naming
// its author, its content the message's text, text parts included, then its
// images (a digest of each URL); the system messages alone when there is
// nothing else; a conversation with tool calls or results is not embedded:
// see Tool calls in chat), a tool call's canonical
// arguments (JSON, object keys sorted). The index partition is the layer,
// the stage, the scope (the run's tenant and id for scope "run", its tenant
// for "key", nothing for "global") and the tool, or for a chat call the
// SHA-256 of everything in the request but its conversation, which must
// match exactly (memoize.ChatKeyInput of the request with only its system
// messages): the model, the system prompt, the tools offered (names,
// descriptions, schemas, strict), tool_choice, parallel_tool_calls,
// response_format and its schema, temperature, top_p, seed, stop sequences,
// max_tokens and the Anthropic betas; and the conversation's images and
// PDF documents, whole, in their messages: the embedded digest of one is a
// word among the others, which an embedder that reads meaning scores
// alike, so the same question about another screenshot or another PDF
// would get this one's answer. Only the caller's metadata and the
// prompt-cache breakpoints are left out. So a near-duplicate question is
// answered only with an answer made under the same instructions, tools,
// output format and limits: never a truncated answer for a request allowing
// more tokens, free text for one asking for JSON, or an answer that calls a
// tool the request does not offer. The system prompt is matched, not
// embedded: a long one two requests share made two unrelated questions
// score 0.905 with the default embedder. The nearest entry is reused when its
// cosine similarity is at least `threshold` (for a tool call, only when its
// arguments are also equal after normalisation, below); otherwise the call
// runs and, on success, is stored with the layer's `ttl` in the index named
// by `index` (the default store when unset; see
// runtime.BuildContext.VectorIndex).
//
// The rules are memoize's (package builtins/memoize): only successes are
// stored; a hit sets Meta.Cached (meters do not charge it), replays a chat
// response's deltas and reports its stored usage, or returns a tool's stored
// result as decoded JSON (numbers as memoize decodes them); the layer never applies to a side-effecting tool
// nor to one the plan does not declare (it passes such calls through), and
// store or embedder failures fail open (a miss, logged). It never caches a
// tool declared secret_result either (memoize.Cacheable).
//
// Tool calls: the similarity only finds candidates. A tool call's arguments
// carry identifiers (a customer, an order) that a near-duplicate must not
// swap, so a tool entry is stored with the digest of its normalised
// arguments (NormalizedArgsDigest: every string trimmed, white space
// collapsed, case folded; object keys, numbers and booleans exact), and a
// candidate among the nearest entries above the threshold is reused only
// when its digest equals the call's. "Alice.Smith " and "alice.smith" reuse
// each other's result; "alice.smith" and "bob.smith" never do, whatever the
// score. Arguments that do not encode as JSON bypass the layer.
//
// Digest key: with settings.digest_key_env (runtime.BuildContext.Digester)
// what an entry holds of a call is keyed (HMAC-SHA256 under the key): a
// tool entry's digest of the normalised arguments ("hmac-sha256:HEX"), the
// entry's id (the digest of the embedded text) and a chat entry's
// partition (the digest of the request's exact part), so that a reader of
// the index cannot test guessed arguments or prompts against them. Entries
// written without the key, or under another one, are not read: each call
// misses once, runs and is cached again (a cache miss runs nothing that
// was not going to run); the old entries stay until their ttl.
//
// Tool calls in chat: the similarity of two transcripts is no identity of
// what they ask, and a chat answer that calls a tool makes whoever reads it
// run the call. So a chat-chain semantic_memoize reuses only plain answers
// to plain conversations: an answer that calls a tool (any tool, read-only
// ones too: the call the model proposed for "transfer 100 EUR" would run
// again for "transfer 900 EUR", a balance read for account A would be read
// for a request about account B) is relayed but never stored, and an entry
// holding one is a miss; and a conversation that holds a tool call or a
// tool result (an assistant message's calls, a tool message, a user
// message's tool_result part) is neither looked up nor stored, as its
// answer reports on the result ("Done: 100 EUR sent.", "Your balance is
// 500"), and a near-duplicate conversation holds another result, which
// differs in a digit the similarity barely sees. Those calls reach the
// model. So in an agent loop (RunAgent, or a gateway's client running the
// calls) only the first turn can be a hit, and only with an answer that
// calls no tool: every later turn holds the calls and results of the
// earlier ones. The layer serves questions the model answers without
// tools. agentc vet
// warns of a chat-chain cache in a policy with side-effecting tools
// (order/chat-cache-side-effect) unless its when keeps it off the requests
// offering them (when: "size(request.tools) == 0").
//
// Chat calls keep near-duplicate matching: reusing a near-duplicate answer
// is a product decision: a transcript that differs in one digit ("refund
// order 1234" and "refund order 1235") can score above a low threshold.
// Keep read-only, answer-like calls behind it.
package semanticmemoize
