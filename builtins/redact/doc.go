// Package redact masks secrets (API keys, tokens, private keys, passwords) in text and in
// JSON-like values: the logic behind the redact builtin, which cleans tool results before
// they enter the model's context.
//
// Each rule is an RE2 expression with an id. A match is replaced by "[REDACTED:<id>]"; when
// the expression has a capture group named "secret", only that group is replaced, so
// "password=hunter2" becomes "password=[REDACTED:password-assignment]" and the surrounding
// structure stays readable; a key word ending a snake_case name is read as one
// ("DB_PASSWORD=...", "SLACK_TOKEN: ...", as environment variables are written), one inside a
// name is not ("password_hint=", "max_tokens="), and nor is the resource type of an Amazon
// Resource Name ("arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf" names a
// secret without holding it). Redacting already redacted text changes
// nothing. The text is also
// read folded, so a secret with zero-width characters, variation selectors or the combining
// grapheme joiner inside, written in full-width or look-alike letters or with another dash,
// spaced by a no-break or other Unicode space ("Bearer\u00a0..."), or written in tag
// characters (U+E0020 to U+E007E: invisible on a screen, read by a model as the ASCII
// characters they stand for), wholly or in part, is masked whole, by the default rules and
// the configured patterns alike; and a text
// holding escapes is also read decoded: percent-encoding ("access_token%3D..."), HTML
// character references ("&#115;k-..."), JSON's \uXXXX and its two-character escapes ("\/" in a
// key, a JSON document quoted in a string: {\"password\":\"...\"}), as a tool result from a
// URL, a web page or a log carries them; the whole escaped span of the secret is masked.
// Escapes escaped again are decoded at each level, three at most: a JSON document quoted in a
// string that is itself in a JSON string ({\\\"password\\\":...}, \\u0073k-...), a URL
// encoded twice ("sk%252D..."). A run of base64 (standard or URL-safe, padded or not, wrapped
// over lines), base32 or hex (also with its bytes separated: "73 6b 2d", "73:6b:2d",
// "\x73\x6b\x2d", or the lines of a hex dump, xxd's or hexdump -C's, masked whole) whose
// decoding is text is read as that text too, and masked whole when it holds a secret: an AWS key or a
// "password=..." written in base64 in a tool result is masked; an image, a hash or a UUID
// decodes to binary and is left alone (docs/detection.md, Encoded values). The body of a
// private key without its BEGIN line (the next page of a paged file) is masked too: lines of
// base64 that run into a private key's END line, and a run of base64 (on one line, or wrapped
// as PEM and OpenSSH wrap it) that decodes as the DER of a private key (a SEQUENCE opening
// with a small version INTEGER: PKCS #1, SEC 1, PKCS #8) or as an OpenSSH private key; the
// body of a certificate or of a public key is left alone, as their PEM blocks are. In a
// JSON-like value the consecutive strings of an array (and the consecutive string values of
// an object, in the order of its keys) are read together, joined by line breaks and run
// together, so a private key sent as its lines, or a key cut inside it over
// two elements, is masked in every element it runs over (and so are those of the arrays and
// objects of a JSON document a text of the transcript holds, in the order written, the text
// then written back so as compact JSON); the object keys
// are redacted too: a key holding a secret ({"sk-live-...":
// 1}) is renamed to its masked form, followed by "#2", "#3"... when two keys mask alike or the
// name is taken, so no value is lost; an integral number is read as its digits, whatever its
// size or spelling (1.2345678901234567e19 as 12345678901234567000), and one a rule
// matches (an account number a configured pattern masks, sent as a JSON number) becomes its
// masked string. The value of a key is also read after its key, as the model reads the
// member, so a secret named by its key ({"password": "hunter22x"}, {"api_key": "..."}) is
// masked in the value, the key kept; so are, one level down, the strings of an object that is
// the value of such a key under a key that holds a value ({"password": {"value": "..."}}; value,
// old, new, an environment's name: not a schema's type or description, nor a token's issuer)
// and the one string of an array ({"password": ["..."]}), the value of an object
// that names it in a member of its own ({"name": "API_KEY", "value": "..."}), and a secret
// begun in a key and ended in its value ({"password=hun": "ter22x"}, read run together). A key
// word and its value written as strings of their own, as a JSON array or object written out in
// a text holds them (["password=", "hunter22x"], ["password", "=hunter22x"], {"password=":
// "hunter22x"}), are read as the assignment the model reads. A JSON object is read as written:
// a key written twice holds two members, both read (raw JSON bytes, json.RawMessage, stay raw
// JSON); a string that is itself a JSON document is read as one.
//
// A Redactor is immutable after New and safe for concurrent use.
//
// The redact builtin (Middleware, stages tool and chat) masks tool results (a copy; bytes are
// read as text, as the agent loop reads them, and other values that are not JSON-like, or
// hold such a value at any depth (a struct in a map), are converted to their JSON form
// first; a result with no JSON form, a NaN, fails the call with a permanent error naming
// the layer rather than going on unchecked; a failed call's error text, which the model reads
// as it reads a result (an MCP tool's isError answer, an HTTP tool quoting the body of its
// 500), is masked too, and the error still tells its kind, its layer and whether the tool
// ran), the transcript a chat call sends to the model (every
// text on the call's own copy: system, user and assistant text, text carried in place of an
// image (an image part whose data: URL holds text goes on as a text part when it is masked,
// or, when a tool returned it, as the image of its result holding the masked text),
// tool results, which a gateway
// client supplies itself, the arguments of earlier tool calls, and the names a message
// carries: its author, its tool calls' names and ids, its results' call ids, an id masked
// alike in a call and its result, two ids whose masks would be one told apart by a
// suffix (_2, _3...); the caller's messages are
// never modified), the tool definitions the call offers (names, descriptions and parameter
// schemas: a client may paste a key into a description or an enum) and the JSON Schema of its
// response format (each schema still valid JSON), the fields of the call no model reads but
// its provider receives (the prompt cache key and the metadata's values masked on the call's
// copy; the end user's id, OpenAI's user and safety_identifier and Anthropic's
// metadata.user_id, and the stop sequences refused with a *runtime.BlockedError naming the
// field when they hold a secret, as a masked id would make every end user whose id masks alike
// one to the provider, and a masked stop sequence would stop the answer elsewhere), the URL
// of an image (or a document) a message holds, which the provider fetches from the host the
// client chose, read as pii reads it (its host left out, as written and percent-decoded; a
// data: URL is read as the text it holds) and refused with a *runtime.BlockedError naming
// the message when it holds a secret ("?key=sk-..."), as a URL masked would locate another
// resource (mask.Transcript.RefuseURLs), and
// streamed model output. Chat
// output is released line by line, each part redacted whole, so that a secret split across
// deltas is still caught; a PEM block is held from its BEGIN line to its END line, and a line
// ending in a run of base64 the next line may go on with with the lines of that run. A line in
// which a match of a rule begins that the text still to come may complete is held with the
// lines after it until the match ends or cannot go on: each rule's program is run, as
// regexp's own matcher runs it (leftmost-first, a match found ending the threads of lower
// priority, the search going on from its end), over the text up to the last line break, in
// its folded and decoded readings too, and the text is released only up to the start of the
// line in which the earliest match left open begins. So "password:" or "Bearer" ending a line
// waits for its value, and a configured pattern matching over line breaks
// ("account number:\s*[0-9]{8}", "(?s)BEGIN.*?END") masks the output exactly as it masks the
// same text whole, wherever the stream cuts it; a rule none of whose matches can hold a line
// break costs nothing here. The hold is bounded: a match left open over more than 64 lines or
// 4 KiB holds the rest of the stream to its end, which then goes out masked whole (the layer
// fails closed: that response loses its streaming, never its masking). Limits: a pattern
// anchored at the start of the text (^ or \A without (?m)) also matches at the start of each
// released part, masking more, never less; text held when the model starts a tool call goes
// out with the call, masked as it stands. See Middleware.WrapChat.
//
// Thinking blocks are signed by the model that wrote them, which refuses one whose text
// changed (Anthropic's API answers 400), and the signature may carry the whole thinking
// encrypted: a thinking block cannot be masked. One sent back whose text holds a secret is
// left out of the call's copy (the API does not read an earlier turn's thinking); when it is the
// last assistant message's and the call asks for thinking (a tool-use turn going on, which
// the API refuses to continue without it), or when its message holds nothing else, the call
// fails instead with a permanent error naming the message and the part, never the secret. A
// redacted_thinking block is encrypted, readable by no one but the model, and goes on as it
// is. Thinking the model streams is held until its blocks end (until the text or a tool call
// after them arrives), then each block goes out whole, its text and signature unchanged, when
// its text holds no secret, so that a client can send it back to continue a tool-use turn; a
// redacted_thinking block goes out as it came. A block whose text holds a secret never leaves
// the layer, and the blocks after it are numbered on as if it had never been. The rest of that
// response is then held to its end: when the model goes on to call tools, which the client
// could not follow up without the block (the API refuses the turn without its thinking), the
// call fails with a permanent error naming the layer and the block, never the secret, before
// anything of the response went out; a response without tool calls goes out whole at its end,
// without the block (the API does not need a finished turn's thinking).
//
// Each text is masked on its own, and the texts a model reads run together are also read so:
// the content and text parts of a message, which a provider sends as separate blocks, and
// those of consecutive messages of one role (user, assistant or system), which Anthropic's API
// merges into one turn, the tool results and the user's text around them, which it sends as
// the blocks of one user turn (the results first), and the system messages apart, which it sends as one system prompt,
// read run together and joined by line breaks, and given the cut readings that find a secret
// the pieces around it glue themselves to (mask.Transcript.AcrossParts, docs/detection.md). A secret cut across two of them ("sk-proj-abc" and "def...",
// "password=" and "hunter2", a private key's BEGIN line and its body) is masked: the
// placeholder takes the place of the secret's part in the first text it starts in, its parts
// in the texts after it are removed, and the rest of every text is kept; text glued to a
// secret across two parts is read, as the model reads it, as the secret's tail. Messages of
// different roles are not read run together by any model (each opens with its role's markers),
// nor are two tool results (each its own block, naming its call): a result is read with the
// user's text beside it, not with another result. A secret a client assembles
// on purpose in an encoding (base64) gets past the layer.
package redact
