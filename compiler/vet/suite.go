package vet

// Suite lists every vet rule, in the order of DESIGN.md section 4.
var Suite = []*Rule{
	Cycle,
	CompactionBeforeMeter,
	AuditTrail,
	RetrySideEffect,
	MemoizeSideEffect,
	NestedRetry,
	RateLimitOutsideRetry,
	CoerceOutsideRetry,
	GuardInsideCache,
	TracingOutermost,
	Duplicate,
	FailOpenSideEffect,
	UserConstraint,
}
