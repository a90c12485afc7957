// Package compiler turns a policy into a plan. It runs a fixed table of
// named stages (load the policy, compile its CEL predicates, check the
// ordering rules, lower to the plan), stopping after the first stage that
// reports errors, like OPA's compiler. Warnings never stop it.
//
// The compiler sees middleware kinds only through the dsl catalog: the
// builtins' metadata from the embedded schemas plus the custom middlewares
// registered with the runtime.
package compiler
