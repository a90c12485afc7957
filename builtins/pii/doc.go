// Package pii detects and redacts personal data in text and in JSON-like values: email
// addresses (internationalized ones included), phone numbers, US social security numbers,
// payment card numbers (12 to 19 digits that pass the Luhn check and start like a card with
// one of that network's lengths, a Visa card's 13, 16 or 19,
// written in groups joined by spaces, dashes, dots, slashes, colons or tabs, one kind
// repeated alike throughout, spaces and tabs up to four at a time (joined by tabs, colons or
// several spaces, as a table's columns are, only after a word naming a card: "card", "visa",
// "cc", "number"..., a group alone being read as a number alone is), or by a line break where
// the groups wrap over lines: "4111 1111\n1111 1111", the line ending in spaces or in the
// separator and the next indented or not, "4111-1111-\n  1111-1111"; groups of any length from
// three digits whose digits make a card on one line, "4111 11111111 1111", as two text blocks
// run together give it, beside numbers of one or two digits, or, starting with four digits,
// beside one other number before and one after, "room 101 4111 11111111 1111 123"; single spaces, dashes and dots mixed, as a number copied out of a form's
// fields is, or single spaces and gaps of two to four spaces, as a number typed with a slip
// is, when the groups are laid out as a card is printed: "4111 1111-1111 1111",
// "4111  1111 1111 1111"), IBANs (ISO 13616, compact or printed in groups of four:
// a country code of the SWIFT IBAN Registry, that country's length and the mod-97 check), and
// IPv4 (with an optional CIDR prefix length) and IPv6 addresses. Every kind is detected unless
// Config.Kinds names some.
//
// Phone numbers follow libphonenumber's rules (github.com/nyaruka/phonenumbers): a number in
// international form ("+" or a region's international call prefix) is recognised whatever its
// country; a number written nationally is recognised when it is valid for one of the
// configured regions (Config.Regions, DefaultRegions when empty), or, for any region, when a
// phone word ("phone", "tel", "mobile", "fax", "call"..., and their counterparts in other
// languages: "telefone", "Handy", "电话", "телефон"...) stands just before it or right
// after it. An unformatted run of 8 to 15 digits is a phone number only after such a word.
// Groups may be separated by spaces and one other kind of separator ("+55 11 98456-5666"),
// and a dash or a slash may have spaces around it ("0176 / 12345678"); a line break or two
// to four spaces may join two groups of a number that has a separator of its own ("(415)\n
// 555-2671", "+44 20\n7946 0958"), and a line may end in a dash or a dot between two groups
// ("415-555-\n2671"). The groups of a social security number may be joined by a dash, a
// space, a dot or a slash, or by a dash with a space either side ("123 - 45 - 6789"); after a
// word naming one ("SSN", "social security"), also by a slash with a space either side or a
// dash or a slash with a space on one side ("123 / 45 / 6789", "123 -45 -6789").
// Extensions ("x123", "ext. 12") belong to the number.
//
// The detectors are hand-written scanners rather than broad regular expressions so that they
// can refuse the usual false positives: a number glued to letters or to a dotted version, dates
// and times, order ids, plain digit runs without the formatting a phone number carries, and
// 16-digit numbers that fail the Luhn check. A card number may still stand between a slash
// after a letter and a slash or a dot before one, as in a URL's path
// ("/u/4111-1111-1111-1111/a.png", "/cards/4111111111111111.png"); a slash or a dot next to
// a digit ("2024/4111...", "4111111111111111.25"), and a dash next to a letter (an id), join it to a
// longer token. A run of digits alone after a slash, where a path holds numeric ids, is read
// as a card only at 16 digits (15 for American Express) and of a network other than Maestro's
// ranges that take any length (50, 56 to 69), which take every id starting with a 6
// (docs/detection.md measures the ids read as cards before and after), and so is a run of
// digits alone joined by a colon to a number, an offset or a counter as often
// ("orders:3:612345678901").
//
// The text is read folded so that an item cannot be hidden by the way its characters are
// written: zero-width and other invisible characters are skipped, full-width digits and
// signs, the decimal digits of every script and look-alike letters read as ASCII, a
// combining mark on a digit and the replacement character U+FFFD (a lone surrogate of a JSON
// string decodes to it, and a byte that is no UTF-8 reaches the model as it) are skipped, no-break
// and other Unicode spaces as spaces, dashes as hyphens, an underscore between two digits as
// a hyphen, and tag characters (U+E0020 to U+E007E: invisible on a screen, read by a model as
// the ASCII characters they stand for) as those characters: a card number grouped by no-break
// spaces, "١٢٣-٤٥-٦٧٨٩", an address with a zero-width space before its "@" and an item
// written in tag characters, wholly or in part, are found, and masked with the characters
// that spell them. A text holding escapes is read decoded too
// (percent-encoding, HTML character references, JSON's \uXXXX): "jane%40example.com" and
// "jane&#64;example.com" are found, the escapes masked with the value; escapes escaped again
// are decoded at each level, three at most ("jane%2540example.com", "jane&amp;#64;...", a JSON
// document quoted in a JSON string). A run of base64 (standard or URL-safe, padded or not,
// wrapped over lines), base32 or hex (also with its bytes separated: "34 31 31 31",
// "\x34\x31", or the lines of a hex dump, xxd's or hexdump -C's) whose decoding is text is
// read as that text too: a card number or an address written in base64 is found as the whole
// run; an image, a hash or a UUID decodes to binary and is left alone (docs/detection.md,
// Encoded values). Offsets are always those of the text as given.
//
// Redact's placeholders hold the words of their kinds ("[REDACTED:phone]",
// "[REDACTED:card]"), which, as any text before it, a number's reading counts: a number that
// follows one closely may be masked as a phone number or a card where the text as given
// would not have it read so. It masks more, never less.
//
// A Scanner is immutable after New and safe for concurrent use.
//
// The pii builtin (Middleware, stages chat and tool) uses a Scanner built once from `kinds`
// ("ip" selects IPv4 and IPv6). In the chat stage every text of the transcript the model
// reads is scanned, wherever it sits: user and assistant text, text carried in place of an
// image (an image part whose data: URL holds text; redacted, it goes on as a text part, or,
// when a tool returned it, as the image of its result holding the redacted text), tool
// results, the arguments (numbers included) and the names and ids of earlier tool calls, the
// call ids of tool results, a message's author (name, which an OpenAI model reads), and,
// unless `system: false`, the system messages, the definitions of the tools offered and the
// schema of the response format. So are, whatever `system` says, the fields of the call no
// model reads but its provider receives (or a host's model client is handed): the end user's
// id (OpenAI's user, Anthropic's metadata.user_id), the safety identifier, the stop
// sequences, the prompt cache key and the metadata's other values. With "block" any of them
// holding personal data blocks the call, naming the field; with "redact" the prompt cache key
// and the metadata's values are masked on the call's copy, and the end user's id, the safety
// identifier and a stop sequence holding personal data block the call with a
// *runtime.BlockedError naming the field (a masked id would make every end user whose id masks
// alike one to the provider's abuse monitoring, a masked stop sequence would stop the answer
// at another text). So is the URL of an image (or of a document) a message holds, which the
// provider fetches, from the host the client chose (which then receives it too): its host
// left out (the address fetched from, no data of the client's), read as written and as that
// host reads it (its percent escapes decoded, a "+" of its query as a space), and, unless
// `system: false`, in the system messages too; of a data: URL, which the provider receives
// as written, its media type and parameters are read so ("data:text/plain;name=..."), and
// its data as the text it holds (above), not again as a URL. A URL holding personal data blocks the call with either
// action, with a *runtime.BlockedError naming the message ("message 0 image URL contains
// personal data (card)"): masked, it would locate another resource, which the provider would
// fetch (with "redact" the refusal says so: send the data itself, or a URL that holds none).
// The encrypted data a client sends back (a redacted_thinking block's data, a reasoning
// item's encrypted_content) and a thinking block's signature are opaque: the provider that
// made them validates them, and pii does not read them. The text parts of a message, and those of consecutive
// messages of one role (Anthropic's API merges them into one turn) and of the tool results and
// user messages around them (which it sends as one user turn, the results first; two results,
// each its own block, are not read together), are read run together
// as well as joined by line breaks (a model reads separate text blocks run together): with
// "block" an item cut across two of them blocks the call, with "redact" it is masked; so is
// one the cut readings of those pieces find (the pieces around it glued to its ends, "order
// 12", "4111 1111 ", "1111 1111", "7 done"), and one cut across system messages apart, which
// Anthropic's API sends as one system prompt (docs/detection.md). The
// consecutive strings of an array (in arguments, and in the arguments of the tool calls sent
// back or made by the model) are read together, joined by line breaks (a list of lines) and
// run together: a card wrapped after a group or cut inside one over two elements is found, and
// so is a card posted as its groups in fields of their own under keys that name its parts
// ({"cc1": "4111", "cc2": "1111", ...}; not an invoice's codes, {"invoice": "2224", "line":
// "5568", ...}); numbers are read each on its own, so groups posted as JSON numbers
// ({"cc1": 4111, "cc2": 1111, ...}) are not read together and pass (docs/detection.md,
// Splits). A JSON object is read as written (a key written twice holds two members, both read),
// and a string that is itself a JSON document is read as one; with "redact" the arguments of
// a tool call are also read as "block" reads them, their keys and strings one a line, and what
// that reading finds is masked. A thinking block sent back is signed and
// cannot be masked: with "block" one holding personal data blocks the call, with "redact" it
// is left out of the call's copy, or the call fails with a permanent error naming the message
// and the part when the turn going on cannot do without it (as redact does with a secret).
// In the tool stage the result is read too, as the redact builtin reads it (its text, its
// structured content, bytes, raw JSON as written, and the printable stretches of an image's
// or a blob's data: a card in a PNG's text chunk): with "redact" it reaches the layers
// outside and the model masked, with "block" a result holding personal data fails the call
// with a *runtime.BlockedError naming the tool and the kinds, marked as a call that ran; with
// either action the text of a failed call's error is masked.
// With `action: "block"` a match in the transcript (chat) or in any argument (tool; object
// keys included) blocks the call with a *runtime.BlockedError that names the kinds and the
// message's index or the argument's JSON Pointer, never the data; each text found clean, and
// the model's own text through the layer (as the assistant's turn alone: sent back as another
// message, it is scanned), is recorded for the run, so an agent loop's
// history is not scanned again at every step (a call without a run id is a fresh run). With
// `action: "redact"` the inner layers see a redacted copy: every message of the transcript
// (the caller keeps the raw transcript and resends it; an item cut across two text parts of a
// message, or of the messages of one turn, a tool result and the user's text after it among them, is masked too), the tool definitions and the response
// format (their schemas still valid JSON), or the arguments. Arguments a Go host
// passes in other shapes than decoded JSON (a struct, a []map[string]any, a map of numbers)
// are read as their JSON form, which is what the tool is sent; arguments with none (a NaN)
// cannot be checked and block the call, with either action. The model's streamed
// text is scanned too (`output`, on by default), released by whole lines (a line ending in
// digit groups or a phone number's area code, its digits written as escapes too ("&#53;"), is held with the next, so a card or a phone
// number wrapped over lines or cut anywhere by the stream is found as in a whole text, and
// so is a line in which an IBAN's groups begin that the next line may go on with; each line
// is read after the end of the lines released before it, where a phone word, an SSN's label
// or a word naming a card may stand, kept as far back as the detectors read however many
// invisible characters they skip there (up to 16 KiB); a line ending in a run of base64 the next line may go on with
// is held with the lines of that run, and the lines before such a run are held with it when
// an item may run on from them into it): with "block" a line
// holding personal data ends the call with a *runtime.BlockedError and is never released,
// with "redact" it is released redacted (a model that echoes a card number does not get it
// to the caller). The tool calls it makes are output too: their fragments are held until the
// stream ends (runtime.HoldToolCalls), then with "block" a call whose arguments hold personal
// data ends the call with a *runtime.BlockedError naming the tool and the argument's JSON
// Pointer, and with "redact" the calls are released with their values masked (still valid
// JSON). The model's streamed thinking is held until its blocks end, then a block goes out
// whole, its text and signature unchanged, when it holds no personal data (a client sends it
// back to continue a tool-use turn); a signed block cannot be masked, so one that holds
// personal data never leaves the layer, with either action, and when the model goes on to call
// tools, which the client could not follow up without the block, the call fails with a
// permanent error naming the layer and the block before anything of the response went out. An
// object key holding personal data
// ({"4111111111111111": "x"}) is renamed to its placeholder, followed by "#2", "#3"... when
// two keys mask alike or the name is taken, so no value is lost. The caller's messages and
// maps are never modified.
//
// A tool call that is proposed but not run here (agentc serve relays a model's call to the
// client that runs it; runtime.ToolAdmitter) is refused when its arguments hold personal data,
// with either action: "redact" cannot reach a tool the client runs, and the arguments relayed
// are never rewritten, so the call is not relayed at all. For the same reason agentc serve
// refuses, naming the layer, a call the model made whose arguments a chat-stage layer with
// "redact" masked, and its tool chain reads the call as the model made it.
package pii
