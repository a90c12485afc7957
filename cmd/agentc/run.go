package main

import (
	"context"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	return fail(env, "run is not available in this build")
}
