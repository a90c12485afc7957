package main

import (
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func encodePlan(c *compiler.Compilation) ([]byte, error) { return plan.Encode(c.Plan) }
