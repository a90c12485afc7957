// Package all registers the model providers agentc ships, for a policy's
// `provider` field: "openai" (github.com/agentc-dev/agentc/providers/openai)
// and "anthropic" (github.com/agentc-dev/agentc/providers/anthropic). Import
// it for its effect; agentc.Load does.
package all

import (
	_ "github.com/agentc-dev/agentc/providers/anthropic" // provider "anthropic"
	_ "github.com/agentc-dev/agentc/providers/openai"    // provider "openai"
)
