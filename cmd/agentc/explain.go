package main

import (
	"context"
)

func cmdExplain(ctx context.Context, env *cliEnv, args []string) int {
	return fail(env, "explain is not available in this build")
}
