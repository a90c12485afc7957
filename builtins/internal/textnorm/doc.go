// Package textnorm folds text for the builtins that match words against user input, so that
// invisible format characters, full-width forms, mathematical, circled and squared letters
// and common Cyrillic, Greek and small-capital look-alike letters do not hide a word: security reads the text as Visible makes it (tag
// characters as ASCII, combining marks and other invisible characters dropped) and matches
// its patterns against Normalize, content_filter
// its keywords against Fold, pii and redact their detectors and rules against FoldSeparators
// and, for a text holding escapes, against Unescape's decoding folded. Each keeps, for every
// byte of the result, the offset in the original text of the character it came from, so that
// matches are reported in the original.
package textnorm
