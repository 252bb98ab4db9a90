// Package model is the vocabulary of an internal transfer, free of any
// I/O: the request and its pre-validation in the order of spec 1.5.8
// (validate.go, amount.go), the account types and states (account.go),
// the stable error codes (codes.go), the adapters' contract and answers
// (adapter.go, outcome.go, params.go) and the injectable faults (fault.go).
// The gateway validates requests with it; persist/transfer runs the FSM
// over it; the stand-in sides (package fakespot, package transferfault)
// implement its Adapter without depending on the FSM.
package model
