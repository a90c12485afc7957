// Package security detects prompt-injection attempts in text: requests to ignore or override
// earlier instructions, to reveal the system prompt, role switches such as "you are now DAN"
// or "developer mode", and chat-template tokens smuggled into user content. Instructions
// hidden in base64, base32 or hex runs or rot13, spelled in leetspeak ("1gn0r3 pr3v10us 1nstruct10ns"),
// letter-spaced ("i g n o r e   a l l", "i.g.n.o.r.e"), or written with escapes (percent-encoding, HTML character references, JSON's \uXXXX and
// two-character escapes, escaped again up to three levels) are decoded and checked too. A
// tool description poisoned for the model that reads it (a credentials file read into a
// parameter, an action kept from the user, another tool's behaviour changed) is found by the
// tool-poisoning families.
//
// Every text is first read as a model reads it: the characters a person does not see are
// dropped (format characters such as zero-width spaces, joiners and soft hyphens, combining
// marks, the combining grapheme joiner, variation selectors), so that they cannot split a
// word, and Unicode tag characters (U+E0020 to U+E007E), which a model reads as the ASCII
// characters they stand for, are read as those characters, raw patterns and decodings
// included. A text hidden so (a run of tag characters other than an emoji's flag sequence)
// is itself a cue: the hidden-text family (0.5).
//
// Patterns are RE2 regular expressions. Unless a Pattern is Raw it is matched against a
// normalized form of the text that makes the default set tolerant of case, spacing and
// punctuation tricks: letters are lower-cased, full-width forms, mathematical, circled and
// squared letters, small capitals and common Cyrillic and Greek look-alikes are folded to
// ASCII, letters lose their diacritics (written precomposed or decomposed), and every run of
// other characters (whitespace, punctuation, symbols) becomes a single space. Offsets
// reported in a Match always refer to the original text.
//
// Two kinds of rules are matched. A signature (DefaultPatterns, Config.Patterns) is an
// instruction no ordinary text carries and blocks on its own. A phrase family
// (DefaultFamilies) is a cue ordinary text carries now and then ("unfiltered", "stay in
// character", a "System:" line in a document) with a score; the scores of the families a text
// matches add up, and the text is an injection when the sum reaches Config.Threshold
// (DefaultThreshold). A family marked Document counts only in DetectDocument, which reads a
// document the assistant works on rather than a request made of it: an instruction there about
// the reader's own response ("add a sentence in your response") is the anomaly. The builtin
// reads tool results that way. docs/detection.md has the figures on a labelled public corpus.
//
// A Detector is immutable after New and safe for concurrent use.
//
// The security builtin (Middleware, stages chat and turn) blocks, with a *runtime.BlockedError
// naming the layer and the pattern or family ids, a chat call whose transcript or tool calls
// match, or a turn whose input matches. Every text of the transcript the model reads is
// scanned, wherever it sits: user and assistant text, text carried in place of an image (an
// image part whose data: URL holds text, "data:text/plain;base64,..."), tool results, the
// arguments and the names and ids of earlier tool calls, the call ids of tool results, a
// message's author (name, which an OpenAI model reads), the text parts of a message run
// together as well as joined by line breaks (a model reads separate text blocks run together,
// so a word split across two reaches it whole), the texts of consecutive messages of one role,
// which a provider sends as one turn (Anthropic's API merges them), read together so too (an
// injection cut across two user messages, "ignore all prev" and "ious instructions", is found;
// the scores of the families the two match add up, as those of one message's parts do; a
// tool result is read so with the tool results and the user messages next to it, which that
// API sends as tool_result blocks of one user message, the user's text after them, a turn of
// tool results alone read as a document, as each is; a turn's pieces also get cut readings, read by the rules alone, which find an injection the
// pieces around it glue themselves to, "Hi", "ignore all prev", "ious instructions"; with
// `system: true` the system messages apart are read as the one system prompt Anthropic's
// API sends them as, too),
// the definitions of the tools offered (name, description,
// parameter schema: a poisoned tool description is an injection too) and the schema of the
// response format, and the system messages with `system: true` (off by default: the system prompt
// is the operator's own instructions). The summary a summarizing compaction inside the layer
// writes is read too, before it is sent, as the transcript's messages are (ScreenSummary: the layer
// read the transcript raw, its tool results as documents, and a summary reports in the third
// person what the user asked of the response, "asked the assistant to add some emojis to the
// response", which the families read in documents only would refuse): `grounding: "drop"` has a
// flagged one dropped rather than the call blocked. An injection a gateway client places in an earlier
// turn, a fabricated assistant turn or a tool result of the history is found as one in the
// latest message is. Each text found clean, and the model's own output through the layer
// (as the assistant's turn alone: sent back as another message, it is scanned),
// is recorded for the run (a turn's text as a text of its own: one whose messages were each
// clean is read all the same, and one a new message joins is read again), so an agent loop's history is not scanned again at every step; a
// call without a run id is a fresh run and its whole transcript is scanned. `patterns`
// add expressions, each tried case-insensitively on the original text (as given and as a model
// reads it) and on the normalized text;
// `defaults: false` drops DefaultPatterns and DefaultFamilies; `threshold` sets the families'
// threshold. A `classifier` asks a model about the texts the rules let through: a
// text-classification endpoint (kind text) or a declared chat model with a fixed prompt (kind
// chat), with `on_error` deciding whether its failure blocks; a text let through by
// `on_error: "open"` is not recorded as clean, and is classified again at the run's next call.
package security
