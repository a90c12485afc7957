// Package mask rewrites every text of a transcript the model reads with a
// layer's masking function, for the layers that mask what they find instead
// of refusing the call (redact, and pii with action "redact"): the text of
// each message (content and text parts), the text an image part carries in
// place of an image (which goes on as a text part once masked), the tool
// results (tool messages and tool_result parts) and the arguments of the
// tool calls assistant messages carry (their strings, their object keys and
// their integral numbers, still valid JSON). The caller's messages are never
// modified: what changes is a copy. AcrossParts masks what a layer finds
// in the text pieces a model reads run together (a message's content and
// text parts), which each piece on its own does not hold; Elements does so
// for the consecutive strings of an array, and AcrossJSON for those of the
// arrays of a JSON document a text holds. Thinking leaves out the signed
// thinking blocks that hold what a layer masks, which cannot be masked.
// Fields lists the fields of a call no model reads but its provider receives
// (the end user's id, the stop sequences, the prompt cache key, the
// metadata): MaskFields masks those masking leaves their meaning, and
// RefuseFields and BlockFields refuse a call whose fields hold a finding.
// PartURLs lists the URLs of images and documents a provider fetches, and
// RefuseURLs refuses a call whose URL holds a finding: masked, a URL would
// locate another resource.
package mask
