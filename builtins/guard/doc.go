// Package guard implements the guard builtin (stages chat, tool and turn): a
// CEL predicate that blocks calls. `deny` blocks when it evaluates to true,
// `require` when it evaluates to false; exactly one is set. A block returns a
// *runtime.BlockedError naming the layer and `message` (or a default that
// quotes the predicate).
//
// Phase "before" evaluates the request before the inner layers run. Phase
// "after" runs the call first and evaluates its outcome too (`response` in
// chat, `result` in tool, `output` and `status` in turn): a blocked result is
// discarded. In the chat stage an after-phase guard holds the stream's deltas
// until the response is complete and releases them only if it passes. A chat
// call that failed is returned as is without evaluation, and so is a tool
// call that failed other than permanently (transient, blocked, over budget,
// in doubt, cancelled); a tool call's permanent failure is the tool's
// answer, whose text the model reads as it reads a result (an MCP
// upstream's error result, isError, a tool's own error), and is evaluated
// with that text as `result` (read as a result's text is): a block
// replaces the error, marked runtime.NotRun when the error proved the tool
// did not act and runtime.Ran otherwise, and a read of a field of the text
// fails (closed by default), so an answer marked an error does not pass
// what the guard holds on a tool's answers. A permanent failure a layer
// inside the guard raised in its own words (output_coerce refusing a
// result that does not match its result_schema) is read so too, but it is
// that layer's word, not the tool's answer: when the predicate cannot be
// evaluated on its text (a read of a field of it), the failure is returned
// as it is, which fails the call all the same and says what the layer
// found (the result_schema's diagnostics), where a block would say only
// that the field is missing. A layer's failure that carries the text of
// another error (an idempotent layer inside answering a call made again
// with the tool's failure it stored) is the tool's answer still, and a
// read of a field of it fails closed, as of the tool's own; a turn is
// evaluated with its status (`status`: "ok", or "failed" when it ended with
// another error), its output first, then, as `output` in turn, the text
// each earlier answer of an agent turn wrote beside its tool calls
// (runtime.TurnCall.Earlier; of an agent turn that failed, each answer's),
// which the host shows in the transcript too: any evaluation that blocks
// blocks the turn, and the agent loop then withholds every answer's text
// of the turn (a `require` holds for each of those texts, not only the
// last; `output.final` is true for the output alone, so a `require` meant
// for the final answer only reads `!output.final || ...`), except that a turn that ended final is returned as it
// ended, without evaluation, keeping that first reason: blocked, over
// budget, or in doubt (a side-effecting call of the turn may have run with
// its outcome unknown, or ran with its audit outcome not written), which a
// block must not hide from the person who settles it; so `status` is never
// "blocked", "budget" or "in_doubt" in a guard. In front of a side-effecting
// tool an after-phase guard blocks only once the effect has happened: vet
// warns of one whose predicate does not read `result`
// (guard/after-side-effect). A tool result it blocks is the result of a
// call that ran, so the *runtime.BlockedError is marked runtime.Ran: an
// audit layer outside records "ran", not "denied", and an idempotent layer
// outside stores the block as the call's outcome, so that a duplicate gets
// it without running the tool again.
//
// In the chat stage the predicate reads the messages as sent, then, where a
// turn of them holds texts its messages read apart, again with the content
// of the last message of that turn the turn's texts run together
// (runtime.Predicate.EvalChatTurns): the consecutive user messages, tool
// messages and tool results with the user's text beside them, the
// consecutive assistant messages, and the consecutive system messages that
// Anthropic's API sends as one turn (runtime.SentTurnEnd), as pii, security
// and content_filter read them, and the system messages wherever they sit,
// which that API sends as one system prompt (the last of them holding
// their texts run together). `deny` blocks when either reading holds,
// `require` when either fails, so "wire" in one user message and
// " transfer" in the next, or in a tool result and the user's text after
// it, are "wire transfer" to a deny on it; the texts of two turns (a
// user's and the assistant's answer) are never read as one. The roles,
// names, tool calls and the count of the messages are the same in both
// readings, and the other messages of the turn keep their own content (so
// the texts read are at most twice those sent). The texts of a turn run
// together where the model reads them as adjacent; where an image, a
// thinking block, a tool call or a document stands between two, in one
// message or across two, a line break does, as in a message's own content.
// A message's tool_result parts, each with its result's images, are read
// first, before its content and its other parts, wherever the client put
// them: both providers send them so (Anthropic's API as the first blocks of
// the user turn, OpenAI's as tool messages before the user's), and pii and
// redact read a turn so.
// What the second reading gives the last message of a turn is the whole
// turn's text, under that message's role: a `require` bounding a
// message's size (`messages.all(m, m.content.size() < 4000)`) bounds a
// turn's, a tool result's text counts as the text of the user message
// after it (`m.role == 'user'`), and a count of the messages whose content
// holds a phrase counts a phrase in a turn's earlier messages twice (the
// texts a turn's messages hold apart are the ones to bound or count: its
// whole text is read as a deny reads it). A chat layer's `when` reads both
// ways too, the layer applying when either reading holds.
//
// `result` in the tool stage is the result as the tool chain holds it,
// read as the value the tool's result_schema describes, as output_coerce
// checks it: for a declared tool with a result_schema, the structured
// content of an MCP result that has one, the value raw JSON bytes
// ([]byte, json.RawMessage) hold, and, when the schema refuses a string,
// the value a string result is the JSON text of (most MCP servers, and
// many HTTP tools, answer JSON as text), so `result.status` reads the
// status of `{"status": "failed"}` sent as text. Text that is not JSON,
// or is the JSON text of a string, stays a string. Text (or raw JSON
// bytes) whose object gives a key twice, keys differing only in case
// counting as one, is not read as a value either, so reading a field of it
// fails closed: `{"status": "failed", "status": "ok"}` has no one status,
// its readers' parsers read either. That value is only
// read: the result returned is the tool's, unchanged. A tool without a
// result_schema (or whose schema accepts a string) gives `result` as the
// chain holds it, a string for text: `result` is dyn, so a predicate may read
// it whole (result.contains('failed')), and reading a field of it fails
// (vet warns: cel/untyped-args); decoding it would break such reads. A result_schema the
// guard cannot compile (a remote reference) is an error when the pipeline
// is built.
//
// `on_error` decides what a predicate evaluation error (a missing key, a cost
// limit) does: "closed" (the default) blocks, with the evaluation error as the
// BlockedError's cause; "open" lets the call through and logs a warning
// (vet warns of it: guard/fail-open, or guard/fail-open-side-effect in front
// of a side-effecting tool). A policy violation always blocks.
//
// The predicate is the compiled one of the plan (Layer.Predicates["deny"] or
// ["require"]); a hand-written plan without it is compiled from the config.
package guard
