// Package truncate implements the truncate builtin (stage tool): it trims an
// over-long tool result to `max_chars` characters (Unicode code points)
// before the result enters the model's context.
//
// A string result longer than max_chars is cut to its first max_chars
// characters and followed by a marker, "\n[truncated: kept N of M
// characters]", so that the model (and a reader of the transcript) can tell
// that text is missing. Any other result is measured as its JSON text; when
// that is too long the result becomes a string holding the first max_chars
// characters of the JSON text followed by the same marker (the truncated
// JSON is no longer valid JSON, which the marker makes plain). A result
// within the limit is returned as it is; a failed call's error is returned
// as is. The tool's own value is never modified.
package truncate
