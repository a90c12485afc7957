package main

import (
	"context"
)

func cmdTest(ctx context.Context, env *cliEnv, args []string) int {
	return fail(env, "test is not available in this build")
}
