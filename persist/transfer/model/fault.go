package model

// Fault is an injectable adapter misbehaviour.
type Fault uint8

const (
	FaultNone                Fault = iota
	FaultExplicitFail              // refuse with EXPLICIT_FAIL(INJECTED); sticky for that req_id and op
	FaultTimeoutAfterEffect        // perform the operation, then report TIMEOUT
	FaultTimeoutBeforeEffect       // report TIMEOUT without performing it
	FaultNetworkError              // report NETWORK_ERROR without performing it
	FaultPending                   // report PENDING without performing it
	FaultUnknown                   // report UNKNOWN without performing it
	FaultCrashBefore               // crash before the operation (transferfault.Faulty.Crash: the process dies; a crash test)
	FaultCrashAfter                // perform the operation, then crash (Faulty.Crash)
)

// CodeInjected is the code of an injected explicit failure.
const CodeInjected Code = "INJECTED"
