// Package conformance runs agentc's language-neutral conformance cases: one
// txtar archive per case under testdata/, holding a policy and the expected
// vet diagnostics (rule ids with their lines) and/or a scenario with the
// expected subset of its run output. See README.md for the format.
package conformance
