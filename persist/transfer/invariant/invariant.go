package invariant

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// This file is the conservation check of spec 7.2 (MON-003), exact to the
// unit even while transfers move. Per asset:
//
//	funding + spot + inFlight + withdrawn == deposits + adjustments
//
//	funding     = Σ balances_tb.available                 (Postgres snapshot P)
//	deposits    = Σ funding_deposits.amount                (P)
//	spot        = Σ SPOT avail+frozen, fee account incl.   (core read C)
//	adjustments = net operator adjustments into SPOT       (C)
//	inFlight    = Σ over moving transfers of amount × (withdrawn − deposited − refunded)
//	withdrawn   = Σ on-chain withdrawals PENDING or COMPLETED (P; invariant_withdrawals.go)
//
// Each flag of a moving transfer is read on the side its operation changes,
// in the same read as that side's total: a FUNDING operation from P (its
// transfer_operations SUCCESS record commits with the balance change), a
// SPOT one from C. A side's total then contains exactly the effects its
// flags count, at whatever instant each side was read, so the equation holds
// without any quiet period. A transfer that is not moving had all its
// effects before C and, if the FSM is right, they cancel (COMMITTED:
// −withdraw +deposit; ROLLED_BACK: −withdraw +refund; FAILED: nothing); if
// they do not (money from nothing, money lost) the difference shows.
//
// Which transfers are moving, exactly: C is taken while this check holds a
// SHARE lock on transfers_tb (no insert, no CAS can commit meanwhile; a
// FUNDING operation goes on unless its Batcher transaction also carries a
// CAS). Under the lock
// it reads the non-terminal transfers (asked of the core) and the highest
// transfer_id W. A transfer terminal under the lock made its last state
// change before C, and its operations before that (a terminal CAS follows
// the SUCCESS of its last operation, and adapters keep first outcomes, so
// no late repeat has an effect): it is settled. Every
// transfer created later has transfer_id > W (its INSERT takes the table
// lock before drawing the id, and the lock waited for every earlier insert)
// and exists only after C: its SPOT flags in C are all false, exactly. The
// moving set read in P is therefore: non-terminal under the lock, or
// transfer_id > W. No clock, no time margin.
//
// The lock stalls transfer writes for one indexed read plus the core read
// (bounded by InvariantLockTimeout and InvariantSpotTimeout). A lock-free
// variant cannot be exact with a per-req_id core read: a transfer created
// between the candidate read and the core read can apply its SPOT withdraw
// before C and was never asked about.
//
// Besides the sum, each moving transfer's flags and state are checked
// against the FSM (anomalies, invariant_moving.go): a pattern no correct
// execution can show at any pair of read instants (a refund without a
// withdraw, a deposit while COMPENSATING, COMMITTED without its FUNDING
// deposit, ...) is a violation even when the sums balance, as they do for
// a transfer both deposited and refunded while it is moving.

// SpotOps says which spot-side operations of a transfer the core applied (SUCCESS recorded).
type SpotOps struct{ Withdrawn, Deposited, Refunded bool }

// SpotSnapshot is one atomic read of the core.
type SpotSnapshot struct {
	Total       map[transfer.AssetID]transfer.Units // sum of all spot balances (available+frozen, all users incl. fee account), asset units
	Adjustments map[transfer.AssetID]transfer.Units // net operator adjustments ever applied to SPOT, asset units
	Ops         map[string]SpotOps                  // for each req_id asked; a missing req_id = no operation applied
}

// SpotReader reads the core atomically: totals and the operations of the
// asked req_ids from one state of the core. CheckInvariant calls it while
// holding a SHARE lock on transfers_tb: it must not write that table, and
// it should honour ctx.
type SpotReader interface {
	SpotSnapshot(ctx context.Context, reqIDs []string) (SpotSnapshot, error)
}

// Limits of one check.
const (
	InvariantLockTimeout   = 500 * time.Millisecond // waiting for the SHARE lock on transfers_tb
	InvariantSpotTimeout   = 2 * time.Second        // the core read, made under the lock
	MaxInvariantCandidates = 100_000                // moving transfers one check accounts for; more is an error
)

// ErrTransfersBusy: the SHARE lock on transfers_tb was not granted within
// InvariantLockTimeout (long write transactions, e.g. Batcher transactions
// waiting out a deadlock); the check did not run. Try again later.
var ErrTransfersBusy = errors.New("transfer: invariant: transfers_tb busy")

// ErrTooManyMoving: more than MaxInvariantCandidates transfers are moving;
// the check cannot account for them one by one.
var ErrTooManyMoving = errors.New("transfer: invariant: too many moving transfers")

// AssetBalance is the equation for one asset. Amounts are asset units.
type AssetBalance struct {
	Asset       transfer.AssetID
	Funding     *big.Int // Σ balances_tb.available
	Spot        *big.Int // SpotSnapshot.Total
	InFlight    *big.Int // Σ moving amount × (withdrawn − deposited − refunded), from the operations applied
	InFlightFSM *big.Int // the spec's Σ amount in SOURCE_DONE, TARGET_PENDING, COMPENSATING (informational)
	Deposits    *big.Int // Σ funding_deposits.amount
	Adjustments *big.Int // SpotSnapshot.Adjustments
	Withdrawn   *big.Int // Σ on-chain withdrawals debited from FUNDING and not refunded (in flight or completed)
	Diff        *big.Int // Funding + Spot + InFlight + Withdrawn − (Deposits + Adjustments); 0 when OK
	OK          bool     // Diff == 0 and no anomaly of this asset
}

// Anomaly is a moving transfer whose applied operations no correct FSM
// execution can show.
type Anomaly struct {
	ReqID   string
	Asset   transfer.AssetID
	From    model.AccountType
	State   transfer.State // in the Postgres snapshot
	Funding SpotOps        // FUNDING operations applied (Postgres snapshot)
	Spot    SpotOps        // SPOT operations applied (core read)
	Reason  string
}

// InvariantReport is one check. Its big.Int values are never changed after
// the report is returned.
type InvariantReport struct {
	At        time.Time      // Postgres clock at the funding snapshot
	LockHeld  time.Duration  // how long transfer writes were stalled
	Moving    int            // transfers accounted one by one
	Assets    []AssetBalance // sorted by asset
	Anomalies []Anomaly
	OK        bool // every asset OK and no anomaly
}

// CheckInvariant checks conservation for assets (nil or empty: every asset
// seen in Postgres or the core). A returned error means no conclusion,
// never a violation.
func CheckInvariant(ctx context.Context, pool *pgxpool.Pool, spot SpotReader, assets []transfer.AssetID) (InvariantReport, error) {
	var snap SpotSnapshot
	start := time.Now()
	asked, mark, err := underTransfersLock(ctx, pool, func(asked []string) error {
		sctx, cancel := context.WithTimeout(ctx, InvariantSpotTimeout)
		defer cancel()
		var err error
		if snap, err = spot.SpotSnapshot(sctx, asked); err != nil {
			return fmt.Errorf("transfer: invariant: spot read: %w", err)
		}
		return nil
	})
	held := time.Since(start)
	if err != nil {
		return InvariantReport{LockHeld: held}, err
	}
	p, err := readFundingSide(ctx, pool, asked, mark)
	if err != nil {
		return InvariantReport{LockHeld: held}, err
	}
	rep := evaluate(assets, snap, asked, mark, p)
	rep.LockHeld = held
	return rep, nil
}

// evaluate puts the core read C (taken under the lock with asked and mark)
// and the Postgres snapshot P together.
func evaluate(assets []transfer.AssetID, snap SpotSnapshot, asked []string, mark int64, p fundingSide) InvariantReport {
	rep := InvariantReport{At: p.at}
	askedSet := make(map[string]bool, len(asked))
	for _, id := range asked {
		askedSet[id] = true
	}
	sums := newSums()
	for _, m := range p.moving {
		if len(assets) > 0 && !slices.Contains(assets, m.asset) {
			continue
		}
		var so SpotOps
		switch {
		case askedSet[m.reqID]:
			so = snap.Ops[m.reqID]
		case m.transferID <= mark: // neither asked nor created after C: it left a terminal state
			rep.Anomalies = append(rep.Anomalies, m.anomaly(so, "non-terminal but terminal under the lock"))
			continue
		} // else created after C: no SPOT operation before C
		rep.Moving++
		if why := m.check(so); why != "" {
			rep.Anomalies = append(rep.Anomalies, m.anomaly(so, why))
		}
		sums.add(sums.inFlight, m.asset, m.inFlight(so))
	}
	for a, v := range snap.Total {
		sums.add(sums.spot, a, big.NewInt(int64(v)))
	}
	for a, v := range snap.Adjustments {
		sums.add(sums.adjust, a, big.NewInt(int64(v)))
	}
	sums.funding, sums.deposits, sums.fsm, sums.withdrawn = p.funding, p.deposits, p.inFlightFSM, p.withdrawn
	rep.Assets, rep.OK = sums.balance(assets, rep.Anomalies)
	if len(rep.Anomalies) > 0 {
		rep.OK = false
	}
	return rep
}

// sums are the per-asset terms, asset units.
type sums struct {
	funding, spot, inFlight, fsm, deposits, adjust, withdrawn map[transfer.AssetID]*big.Int
}

func newSums() *sums {
	return &sums{spot: map[transfer.AssetID]*big.Int{}, inFlight: map[transfer.AssetID]*big.Int{}, adjust: map[transfer.AssetID]*big.Int{}}
}

func (s *sums) add(m map[transfer.AssetID]*big.Int, a transfer.AssetID, v *big.Int) {
	if m[a] == nil {
		m[a] = new(big.Int)
	}
	m[a].Add(m[a], v)
}

// balance evaluates the equation for assets (nil: every asset of any term).
func (s *sums) balance(assets []transfer.AssetID, anomalies []Anomaly) ([]AssetBalance, bool) {
	terms := []map[transfer.AssetID]*big.Int{s.funding, s.spot, s.inFlight, s.fsm, s.deposits, s.adjust, s.withdrawn}
	if len(assets) == 0 {
		for _, m := range terms {
			for a := range m {
				assets = append(assets, a)
			}
		}
	}
	assets = slices.Clone(assets)
	slices.Sort(assets)
	assets = slices.Compact(assets)
	get := func(m map[transfer.AssetID]*big.Int, a transfer.AssetID) *big.Int {
		if v := m[a]; v != nil {
			return new(big.Int).Set(v)
		}
		return new(big.Int)
	}
	out := make([]AssetBalance, 0, len(assets))
	allOK := true
	for _, a := range assets {
		b := AssetBalance{Asset: a, Funding: get(s.funding, a), Spot: get(s.spot, a), InFlight: get(s.inFlight, a),
			InFlightFSM: get(s.fsm, a), Deposits: get(s.deposits, a), Adjustments: get(s.adjust, a), Withdrawn: get(s.withdrawn, a)}
		lhs := new(big.Int).Add(b.Funding, b.Spot)
		lhs.Add(lhs, b.InFlight)
		lhs.Add(lhs, b.Withdrawn)
		rhs := new(big.Int).Add(b.Deposits, b.Adjustments)
		b.Diff = lhs.Sub(lhs, rhs)
		b.OK = b.Diff.Sign() == 0 && !slices.ContainsFunc(anomalies, func(x Anomaly) bool { return x.Asset == a })
		allOK = allOK && b.OK
		out = append(out, b)
	}
	return out, allOK
}
