// Package grounding renders admitted grounding items into a prompt block: a
// policy's grounding.render template (Go text/template) executed over the
// items, fitted to a token budget by dropping the lowest-scored items first.
//
// The package is shared by the loader, which parses and checks a template at
// vet time (Parse returns an *Error with the byte offset of the problem in
// the template), and the runtime, which renders it (Fit). It imports neither
// CUE nor the runtime.
//
// A template sees Data: `.Query` (the text the items were retrieved for) and
// `.Items`, the items in retrieval order, each with `.ID`, `.Content`,
// `.Source`, `.Score`, `.Metadata` (a map) and `.Index` (its position in the
// retrieval, from 0). Parse checks every field a template reads against these
// types: `{{range .Items}}{{.Contnet}}{{end}}` is an error at vet time, not
// at the first request. Fields under `.Metadata`, and anything read through a
// variable, are not checked.
package grounding
