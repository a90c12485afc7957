package vet

// Suite lists every vet rule, in the order of docs/rules.md.
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
	OwnCallRecursion,
	OwnCallRerouted,
	Duplicate,
	FailOpenSideEffect,
	FailOpen,
	AfterSideEffect,
	Inert,
	ContextWindow,
	UndeclaredTools,
	StoreSetup,
	LocalInReplicas,
	CacheAcrossTenants,
	UserConstraint,
	NeverPaired,
}
