// Package noeffect is the one rule for "nothing happened": which errors of
// a write prove that it changed nothing, so that a caller may be told
// "nothing happened, no funds moved; retry" (issue 41 defect 2). Every
// other failure of a write is an unknown outcome and goes through the
// caller's fence (transfer settleInsert, withdraw settle), exactly as a
// broken connection does.
//
// The proof is one of:
//
//   - RolledBack: Postgres answered the transaction with an ERROR (severity
//     ERROR, not FATAL or PANIC) of a class that aborts the transaction it
//     was raised in: 22 data exception, 23 integrity constraint, 42 syntax
//     or access rule, P0 PL/pgSQL (RAISE, a refusing trigger), and the two
//     transaction-rollback codes 40001 (serialization_failure) and 40P01
//     (deadlock_detected). Postgres skips the rest of a pipeline after an
//     error, COMMIT included, so the transaction rolled back. An ERROR of
//     these classes raised by COMMIT itself proves the same: COMMIT raises
//     them only from the checks it runs before writing its commit record
//     (deferred constraints and triggers, serializable validation), and a
//     failure after that record is a PANIC ("cannot abort transaction ...,
//     it was already committed"), never an ERROR. So the position of the
//     failing statement does not change the answer for these errors, and
//     for every other error nothing is proven wherever it was raised.
//   - NotSent: pgconn.SafeToRetry — the request never left this process.
//
// Never proof: a FATAL or PANIC (57P01 admin_shutdown, 57P02
// crash_shutdown, 57P03, ... the server ends the session, possibly after
// the COMMIT it was sent had already committed and before its answer was
// read), class 08 (connection), 53 (resources), 57 (operator
// intervention: query_canceled included, which a cancel raises after the
// statement's work may be done), 58 / XX (system, internal), 40003
// (statement_completion_unknown), 25 and every other class, an ERROR
// without a severity, a context's error, io.EOF and any error that is not
// a *pgconn.PgError.
package noeffect

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proven reports whether err proves that the write that failed with it
// changed nothing: RolledBack(err) or the request was never sent.
func Proven(err error) bool {
	return err != nil && (RolledBack(err) || pgconn.SafeToRetry(err))
}

// RolledBack reports whether err is a Postgres ERROR that rolled back the
// transaction it was raised in (see the package comment): severity ERROR
// and SQLSTATE class 22, 23, 42 or P0, or 40001, 40P01.
func RolledBack(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	sev := pe.SeverityUnlocalized // the V field (Postgres 9.6+): never translated
	if sev == "" {
		sev = pe.Severity
	}
	if sev != "ERROR" {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23", "42", "P0": // data exception, integrity constraint, syntax/access rule, PL/pgSQL (RAISE)
		return true
	}
	return pe.Code == "40001" || pe.Code == "40P01" // serialization_failure, deadlock_detected
}
