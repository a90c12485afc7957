// Package memoize implements the memoize builtin (stages chat and tool): an
// exact-match cache of successful calls in a key-value store.
//
// Key: the stage, the layer's name, the scope (the run's tenant and id for
// scope "run", its tenant for "key", nothing for "global": only "global"
// serves one tenant's entry to another), the model or tool name and the
// canonical input (a tool's arguments as JSON with object keys sorted, by
// their digest, runtime.ToolCall.ArgsDigest; for a chat call, ChatKeyInput:
// the request as JSON, so every part of it that
// changes what the answer says or its shape is in the key: the messages,
// system prompt included, the model, the tools offered (names, descriptions,
// schemas, strict), tool_choice, parallel_tool_calls, response_format and
// its schema, temperature, top_p, seed, stop sequences, max_tokens and the
// Anthropic betas; left out are the caller's metadata and the prompt-cache
// breakpoints, a cost hint a client may move without changing the answer;
// the ids of the conversation's tool calls are keyed as the places of
// their calls, "1", "2"... in the order they first appear, so that which
// result answers which call is kept but the ids, the provider's or those a
// replay drew, are not: the turn after a replayed answer hits as the turn
// after the recorded one did),
// hashed with SHA-256, or with settings.digest_key_env with HMAC-SHA256
// under the key (and a tool's arguments' digest keyed too), so that a
// reader of a shared store cannot test a guessed prompt or argument
// against the keys. Entries written without the key, or under another
// one, are not read: each call misses once, runs and is cached again (a
// cache runs nothing that was not going to run), and the old entries stay
// until their ttl. A request without tools is keyed on the tools the
// pipeline offers it (the policy's declared tools). Sampling is keyed, not
// refused: a request with a temperature above 0 is cached too, and a hit
// replays the one answer drawn for it. The value is
// written to the store named by `store` (the default store when unset; see
// runtime.BuildContext.KV) with the layer's `ttl`. A tool call whose
// arguments do not encode (a NaN or infinite number) has no key and
// bypasses the cache.
//
// Only successes are stored: an error, a stream the consumer abandoned, a
// chat response that is not a finished answer, or a value that does not
// encode as JSON is never cached. A finished answer ended with stop,
// tool_calls or length, or without a finish reason: not a paused turn
// (pause_turn), not a response the provider's filter cut (content_filter),
// not a refusal (the model's refusal text, whatever its finish reason),
// and not an end the runtime has no word for; the next identical request
// asks the model again. An answer cut at max_tokens (length) is stored:
// the key holds max_tokens, so the same request would be cut the same
// way, and the replay reports finish reason length. Tool results are stored
// as JSON, so a hit returns the JSON-decoded value (objects as
// map[string]any, numbers as runtime.DecodeArgs decodes them: float64, an
// integer only int64 holds exactly as int64, any other as its json.Number,
// never a neighbour), not the tool's own Go value.
//
// Side effects: memoize never applies to a side-effecting tool. agentc vet
// refuses such a policy (order/memoize-side-effect); at run time the layer
// also passes a call through untouched, and logs a warning once per tool,
// when the tool is declared side_effecting or is not declared in the plan at
// all (its effects are unknown).
//
// Tool calls in chat answers: a model's answer that calls a tool makes
// whoever reads it (the agent loop, a gateway's client) run the call, so a
// replayed answer runs the calls it holds again. A chat-chain memoize
// stores and replays an answer only when each of its tool calls is a call
// of a tool the policy declares and does not mark side_effecting: an
// answer calling a side-effecting tool, or one the policy does not declare
// (whose effects are unknown), is relayed but never stored, so the same
// request asks the model again (a payment asked for twice is made twice
// only if the model proposes it twice, never from the cache, and never
// another run's with scope key or global). An entry stored before a tool
// became side-effecting, or by another policy sharing the store, is a miss.
// With single_flight, concurrent identical requests whose answer is not
// kept do not share it: those that waited for it each ask the model, at
// once (not one after the other), and their answers are not stored. A replayed call of a
// read-only tool gets an id of its own (the stored id's prefix, "call_" or
// "toolu_", then 24 random letters and digits, drawn from the pipeline's
// source of randomness, runtime.Deps.Random), never the id of the call
// that ran when the answer was recorded, which a transcript, a checkpoint
// or a client would take the replayed call for; the next turn, which holds
// the new ids, is keyed as the one after the recorded answer (see Key), so
// a run repeating another is answered from the cache turn after turn, up
// to the first answer calling a side-effecting tool. agentc vet warns of a
// chat-chain cache in a policy with side-effecting tools
// (order/chat-cache-side-effect) unless its when keeps it off the requests
// offering them (when: "size(request.tools) == 0").
//
// Secrets: memoize never caches a tool declared secret_result either: the
// cache would hold the secret outside its run and serve it to other runs.
// Such calls pass through untouched (a warning is logged once per tool).
//
// A hit does not run the inner layers. It sets Meta.Cached, which meters
// read to leave the hit uncharged (builtins/meter; a meter outside a hedge
// or retry outside memoize still charges the model calls made before the
// hit). A chat hit replays the
// stored text as the same sequence of deltas, reports the stored usage
// (prompt-cache reads and writes included), finish reason, stop sequence and
// served model on the call (ChatResponse.Usage, FinishReason, StopSequence,
// Model) and restores the stored annotations (no upstream request id: none
// was sent); a tool hit returns the stored result with
// ToolResult.Cached set.
//
// Store failures fail open: a read error is a miss and a write error leaves
// the result uncached; both are logged.
//
// Without single_flight, two identical calls that miss at the same time both
// run. With single_flight the entries are lease records of the store's
// runtime.Leaser (a Lua script in Redis, a statement in PostgreSQL, a
// KVLeaser over other key-value stores), and a miss claims its key before it
// runs: concurrent identical calls in one process wait for one leader and
// share its outcome, an error included; calls in other processes that share the store find the
// claim held and wait (polling with backoff, 2 to 200 ms) for the published
// result. The leader renews its claim every third of lease_ttl while the
// call runs. A leader that fails releases the claim without caching the
// error, and one waiter in another process runs the call in its place; a leader whose process
// dies stops renewing, and a waiter takes the claim over and runs the call
// once lease_ttl has passed, so no waiter waits longer than that for a dead
// leader. A leader whose claim could not be renewed (no renewal confirmed
// in time, or one that found it taken over) runs on, since a cache fails
// open and stopping it would not spare the run another process may then
// make; its result is cached only while its claim still holds. A hit is one Acquire (one round trip), a miss an Acquire and a
// Publish. A store that cannot be reached is logged and the call runs
// without a claim.
package memoize
