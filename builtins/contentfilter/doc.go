// Package contentfilter blocks text that contains banned keywords or matches banned regular
// expressions: the logic behind the content_filter builtin.
//
// Keywords are matched case-insensitively on word boundaries ("ass" does not match "class");
// a multi-word keyword matches across any run of whitespace and punctuation between its
// words (a keyword that itself contains symbols, such as "c++", across whitespace only, the
// no-break and other Unicode spaces included).
// Letters, digits and underscores are word characters, in any script. Keywords and the text
// are compared in a folded form, read as the security builtin reads text (textnorm.Fold), so
// that a keyword cannot be hidden: the characters a reader does not see are dropped
// (zero-width spaces, soft hyphens and other format characters, combining marks such as a
// U+0301 acute written between two letters, the combining grapheme joiner, variation
// selectors), tag characters (U+E0020 to U+E007E) count as the ASCII characters they stand
// for, as a model reads them, the Hangul fillers that show as a space as a space, and
// full-width forms and common Cyrillic and Greek look-alike letters as their ASCII
// counterparts. A letter with its diacritic written as one character is kept as it is
// ("café" is not "cafe"). A Match still reports offsets in the text as given, the combining
// marks on its last letter included. Patterns are RE2 regular
// expressions applied to the text as it is (write "(?i)" for case-insensitivity).
//
// A Filter is immutable after New and safe for concurrent use.
//
// The content_filter builtin (Middleware, stages chat and turn) blocks, with a
// *runtime.BlockedError naming the layer, the message and the rule, a chat call whose
// transcript matches, and a turn whose input or output matches, or the text
// an earlier answer of an agent turn wrote beside its tool calls
// (runtime.TurnCall.Earlier: the host shows it in the transcript as it
// shows the output; the agent loop then withholds every answer's text of
// the turn), or the text of any answer of an agent turn that failed other
// than final, or the output a host's turn body returned with such a failure
// (a turn blocked, over budget or in doubt is returned as is). Every text of the transcript
// the model reads is checked, wherever it sits: user and assistant text, text carried in
// place of an image (an image part whose data: URL holds text), tool results, the arguments
// (each number in plain decimal form, the number the tool chain runs however the call
// spells it: 4.111111111111111e15 as 4111111111111111, 1e-7 as 0.0000001) and the names and
// ids of earlier tool calls, the call ids of tool results, a message's
// author (name), the text parts of a message run together as well as joined by line breaks,
// the texts of consecutive messages of one role, which a provider sends as one turn
// (Anthropic's API merges them), read together so too (a keyword cut across two user
// messages, "drop" and " table", is found and the block names both: "messages 0 to 1 (one
// turn)"); a tool result is read so with the tool results and the user messages next to it,
// which that API sends as tool_result blocks of one user message, the user's text after
// them), with the cut readings of a turn's pieces (a word cut among three pieces or more,
// the pieces around it glued to its ends: docs/detection.md), and, unless `system: false`,
// the system messages (those apart read as the one system prompt Anthropic's API sends them
// as, too: "system messages 0 to 2 (one system prompt)"), the definitions of
// the tools offered and the schema of the response format. Each text
// found clean, and the model's own output through the layer (as the assistant's turn alone:
// sent back as another message, it is checked), is recorded for the run, so an
// agent loop's history is not checked again at every step; a call without a run id is a
// fresh run and its whole transcript is checked. The text of the chat output is not checked:
// that would hold the stream back (use a guard with phase "after" or a judge for output). The
// tool calls the model makes are: their fragments are held until the stream ends (the text
// passes at once, except, in a call that asks for thinking, what follows a call:
// runtime.HoldToolCalls), and a call whose arguments match blocks the response before any of
// its tool calls reaches the caller.
package contentfilter
