// Package serve is the policy-governed gateway behind `agentc serve`: an
// HTTP server that runs every model call through a plan's chat chain and
// every tool call through its tool chain.
//
// It speaks the OpenAI chat completions and the Anthropic messages wire
// formats, fronts the upstream MCP servers a policy declares with one MCP
// endpoint (streamable HTTP), admits callers by the policy's virtual API
// keys (each mapped to a tenant that scopes runs, budgets and rate limits),
// reloads the policy on demand or when its files change (the new pipeline
// replaces the old one only if it loads, vets and builds cleanly), and
// exposes /healthz, /readyz and Prometheus /metrics.
//
// The package does not link CUE: a Source loads the plan, so a host can
// serve a compiled plan.json, and the agentc command compiles policies.
package serve
