// Package compaction bounds a chat transcript before a model sees it: the logic behind the
// compaction builtin.
//
// KeepRecent keeps every system message and the most recent messages, and drops the oldest
// others while the transcript is over its token budget. Summarize does the same but replaces
// what it drops with one system message holding a summary written by a caller-supplied
// function (usually a model call).
//
// Importance keeps system messages, the first user message, pinned messages, the recent ones
// and tool calls whose results a later message refers to (by the call's id, or by quoting the
// first line of a result), and drops the least important first: unreferenced tool calls,
// oldest first, then the other messages, oldest first. Compact and SummarizeWith take the same
// Options: a max_messages bound beside the token budget, and keeping the first user turn.
// Every strategy keeps pinned messages (runtime.Message.Metadata "pin": "true").
//
// All keep tool calls and their results together: an assistant message that requests tool
// calls and the tool messages that answer them are kept or dropped as one unit, and a tool
// message whose call is not in the transcript is always dropped (providers reject such
// orphans). A message answering calls of several assistant messages (Anthropic's API merges
// consecutive assistant messages into one turn, so a client may split the calls of a turn over
// two and answer them in one user message) ties them into one unit: no result is kept
// without its call, nor a call without its result. All keep a conversation the user opened
// opening with a user message (Anthropic's API refuses one whose first message after the
// system prompt is the assistant's: "first message must use the "user" role"), and keep the
// cut from putting two assistant messages side by side (system messages aside) that a user
// message stood between (a server whose chat template wants the roles to alternate refuses
// them, and the model reads an answer without its question): when dropping messages would leave an assistant message first, or right
// after another, it is dropped too, or, when it must stay (recent, pinned, a call to a
// side-effecting tool: the last calls of a long run of tool calls after one request), the
// user message nearest before it stays with it, over the budget if need be. Two assistant
// messages the input itself put side by side stay so. All are idempotent: compacting their
// own output again returns it unchanged. All leave their input untouched and return fresh
// slices.
//
// Message is local to this package so that it has no dependency on the runtime; the runtime
// converts its own message type at the boundary.
//
// The compaction builtin (Middleware, stage chat) applies KeepRecent, Summarize or Importance to the call's
// own copy of the transcript before the inner layers run. It pins every assistant message that calls a
// tool the policy declares side_effecting, with its results: a model that no longer saw that a refund
// was made could propose it again, so such a call is kept even over the budget. A message of role
// "developer", which the providers send as a system message, is kept as one. Tokens are counted with the runtime's
// estimate (parts and tool calls included). A call and its results are linked by id: tool
// messages naming the call and messages carrying a tool_result part for it (Anthropic's shape);
// in a transcript whose assistant messages do not list their calls, a tool message is tied to
// the nearest assistant message before it. Kept messages are passed on exactly as they were
// (parts, tool calls). Summaries are written by the model named in `model`, called
// through the chat chain below the compaction layer as a call of its own in the same run
// (runtime.OwnCall): a meter inside compaction charges the summary (and a budget covers it), a
// retry or fallback inside retries or fails it over, a tracing layer inside traces it;
// compaction itself never sees it, nor does a rate_limit outside, which admits it without a
// token (vet warns, order/ratelimit-outside-compaction). Called from Go outside a pipeline,
// Compact asks the model client directly. The summary call is bounded: it asks for at most
// max_tokens (and no more than the messages it replaces: a longer summary is refused), stops
// reading a summary that runs past that, is given up after summary_timeout (30s by default:
// one deadline for the summarizing of a call, however many summary calls it makes, a summary
// that does not fit having the model called again with more messages dropped), and sends no
// more than the summary model's declared context_tokens holds besides the summary, nor than
// the limit of a max_tokens layer inside compaction without a when lets through, and, with
// neither, no more than DefaultSummaryInput (32,000) tokens of text, however long the
// dropped prefix (the earlier summary and the earliest dropped messages that fit; the later
// ones are dropped without being summarized, and the layer logs a warning, "dropped
// messages left out of the summary", with how many, at most once a minute per layer
// (LeftOutWarnEvery; the calls in between at debug level, and the warning says how many it
// did not warn about), and counts them (Middleware.LeftOut): give the summary model a larger
// window to summarize them all). A failed, empty, cut off or timed out summary, or one that
// does not fit the budget
// (ErrSummaryTooLong: a model that runs on writes one longer than what it summarizes), falls back to
// KeepRecent, which drops the same messages without a summary, and is logged as a warning: the
// budget is never exceeded for a summary. A call whose context ends while its summary is
// written (a client of agentc serve that hung up) is no summary failure: the call ends with the
// context's error, nothing is compacted or sent, and the layer logs "summary abandoned" at
// debug level.
//
// Only a summary the layer wrote counts as an earlier summary: it carries the message
// metadata SummaryKey ("compaction_summary": "true"), which a host keeps when it continues
// from the compacted transcript and which a client of agentc serve cannot set. A system
// message that only has the name "compaction_summary" (a client may send one) is a system
// message like any other: kept as it is, never handed to the summary model as an earlier
// summary nor replaced. In the Go API the mark is Message.Summary.
//
// A summary is a system message, but no operator wrote it: the summary model wrote it from what
// users and tools wrote, and an injection a tool result carried can come through it. The layer
// marks it as retrieved text too (runtime.GroundingKey "true", as the grounding block is, beside
// runtime.SummaryKey), so that the detectors inside compaction (security, pii, content_filter)
// read it whatever their `system` setting, as they read the transcript's own messages: security
// not as a document, for the reason given below, and a block names the summary ("the summary of
// earlier messages (message 1): prompt injection detected (...)"). Those outside compaction read the
// call before the summary was written (and a client of agentc serve resends its raw history, so
// no later call would read it either): the layer has each of them that screens text
// (runtime.GroundingScreener: security, content_filter, pii) read the summary before it is
// sent, whatever their `when` (a `when` false for the call does not spare the summary). Security
// reads it as it read the transcript's own messages (runtime.SummaryScreener), not as a
// document: it read the transcript raw, its tool results as documents, and the summary is the
// account of it written for the assistant, which reports in the third person what the user
// asked of the response ("asked the assistant to add some emojis to the response"), words the
// checks for an instruction planted in a document would refuse; an injection the summary model
// repeated or was made to write is found as one in a message is. Content_filter and pii read it
// as a grounding item (ScreenGrounding), which they check as they check a message. One that
// flags it decides by its `grounding` setting: "block" (the default) blocks the call with a
// *runtime.BlockedError of that layer ("the summary compaction wrote: prompt injection detected
// (...)"), "drop" drops the summary, and the layer falls back to KeepRecent. A pii layer
// outside with action "redact" and `grounding` unset flags nothing there: the summary model
// read the transcript it had masked; with `grounding` set it flags personal data there as in
// any grounding item.
//
// When the layer changes the transcript it records a Compacted annotation
// under its name on the response (read it with CompactedOf): the transcript
// the model was sent and how many messages were dropped. A host that
// continues from that transcript pays for a summary once: compaction of its
// own output changes nothing until the transcript grows over the budget again.
// A transcript over the budget of which nothing may be dropped (a system
// prompt and one huge request, or only recent and pinned messages) is sent
// as it is, never emptied, and nothing is recorded: whether the model reads
// it is the model's limit to decide. A transcript of nothing but tool results
// that answer no call in it (and system messages) would be emptied, orphans
// being dropped: the call is refused instead, with a *runtime.CallError of
// status 400 (kind permanent: agentc serve answers 400), its message naming the
// layer ("compaction: the transcript holds no message to send: its 2 tool results
// answer no tool call in it ...").
package compaction
