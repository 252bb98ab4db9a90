package core

// User-to-user transfers (spec 003) in the sequenced core. Every step is one
// command, applied once, in order, so the spec's consistency machinery
// (retry schedulers, locks, duplicate delivery) has nothing to do here:
//
//	KindP2PCreateUser  a handle for a numeric user, with an audited initial credit
//	KindP2PTransfer    PENDING: the amount is held (frozen) at once, executeAt = now + hold
//	KindP2PCancel      PENDING -> CANCELLED before executeAt: the hold is released
//	KindP2PTick        every PENDING transfer with executeAt <= now, in (executeAt, id)
//	                   order: COMPLETED (hold debited, recipient credited, one step), or
//	                   DEBIT_FAILED when either account is FROZEN or DISABLED (hold released)
//	KindP2PForget      every finished transfer with doneAt <= the command's cutoff leaves the
//	                   core (its history is the sink's p2p_transfers from then on)
//
// Cancel and execution race only through the sequence: whichever command
// comes first decides, and a cancel at or after executeAt is refused
// (CANCEL_WINDOW_EXPIRED) even if no tick has executed the transfer yet, so
// both answers always agree. DEBIT_PROCESSING and CREDIT_PROCESSING are part
// of the API's enum but never observed: debit and credit are one step.

// P2PStatus is a transfer's state (the spec's TransferStatus). Values are
// part of the snapshot and event formats: append only.
type P2PStatus uint8

const (
	P2PPending          P2PStatus = 1
	P2PDebitProcessing  P2PStatus = 2 // never entered (debit and credit are atomic)
	P2PCreditProcessing P2PStatus = 3 // never entered
	P2PCompleted        P2PStatus = 4
	P2PDebitFailed      P2PStatus = 5
	P2PCancelled        P2PStatus = 6
)

var p2pStatusNames = [...]string{"", "PENDING", "DEBIT_PROCESSING", "CREDIT_PROCESSING", "COMPLETED",
	"DEBIT_FAILED", "CANCELLED"}

func (s P2PStatus) String() string { return enumName(p2pStatusNames[:], uint8(s)) }

// Named limits of the transfer service.
const (
	// P2PUserBase is the first id of the reserved range the core allocates
	// user ids from when a create-user command names none. No other command
	// allocates there on purpose; an account that exists at the next id
	// anyway (a deposit to it) is skipped, never shared.
	P2PUserBase UserID = 1 << 40
	// MaxP2PUsers bounds the users with a handle.
	MaxP2PUsers = 1_000_000
	// MaxP2PHandleLen and MinP2PHandleLen bound a handle (^[a-zA-Z0-9_-]{3,50}$).
	MinP2PHandleLen = 3
	MaxP2PHandleLen = 50
	// MaxP2PPending bounds the PENDING transfers of all users together.
	MaxP2PPending = 1_000_000
	// MaxP2PPendingPerUser bounds the PENDING transfers one sender has.
	MaxP2PPendingPerUser = 1_000
	// MaxP2PTransfers bounds the transfers the core retains: PENDING ones
	// and finished ones not yet forgotten (KindP2PForget). Past it a new
	// transfer is refused with TOO_MANY_TRANSFERS (~100 bytes each: 10M is
	// ~1 GB). With a retention running, finished transfers leave after it,
	// so only MaxP2PPending plus a retention's worth of traffic counts.
	MaxP2PTransfers = 10_000_000
	// MaxP2PExecPerTick bounds the transfers one tick executes, so one
	// command's work (and its events) stays bounded; the rest wait for the
	// next tick, still in order.
	MaxP2PExecPerTick = 20_000
	// MaxP2PHold bounds a transfer's hold window (a day).
	MaxP2PHold = 24 * 3600 * 1_000_000_000
)

// The limits the code reads; variables only so tests reach them with a few transfers.
var (
	p2pPendingLimit  = MaxP2PPending
	p2pPerUserLimit  = int32(MaxP2PPendingPerUser)
	p2pExecPerTick   = MaxP2PExecPerTick
	p2pTransferLimit = MaxP2PTransfers
)

// P2PCancelAdmin, in a KindP2PCancel's Flags, lets the caller cancel a
// transfer it did not send (an operator).
const P2PCancelAdmin uint8 = 1

// P2PUser is a user of the transfer service: a handle bound to a numeric id.
type P2PUser struct {
	ID        UserID
	Handle    string  // ^[a-zA-Z0-9_-]{3,50}$, unique
	Asset     AssetID // the asset of the initial credit
	Initial   Units   // the initial credit (an adjustment), >= 0
	CreatedAt int64   // unix ns (the command's time)
	Seq       Seq     // the create command's seq

	forgot    uint64 // the user's transfers (as sender or recipient) the core forgot
	forgotMax uint64 // the largest id among them (0 = none)
}

// P2PTransfer is one transfer. Owned by the processor; queries return copies.
type P2PTransfer struct {
	ID        uint64 // 1, 2, ...: the spec's transferId
	From, To  UserID
	Asset     AssetID
	Amount    Units // > 0; held in From's frozen balance while PENDING
	Status    P2PStatus
	Reason    Code  // DEBIT_FAILED: why (ACCOUNT_FROZEN, ACCOUNT_DISABLED); else OK
	CreatedAt int64 // unix ns
	ExecuteAt int64 // unix ns: CreatedAt + hold; a cancel must come before it
	DoneAt    int64 // unix ns when it left PENDING (completedAt / cancelledAt / failed), 0 while PENDING
	ReqID     Key   // the client's requestId (zero = none); unique per sender while retained
	heapIdx   int32 // position in the pending heap while PENDING, else -1
}

// p2pReq identifies a client requestId: unique per sender.
type p2pReq struct {
	from UserID
	key  Key
}

// p2pHist is a user's retained transfers (as sender or recipient), ids
// ascending. A transfer forgotten anywhere but at the front stays as a
// tombstone (its id no longer in the store) until half the list is
// tombstones; ids above the user's forgotMax are never tombstones.
type p2pHist struct {
	ids  []uint64
	tomb int
}

// p2pState is the transfer service's part of the processor state.
type p2pState struct {
	users    []P2PUser        // creation order (canonical order for snapshots)
	byHandle map[string]int32 // handle -> index in users
	byID     map[UserID]int32 // user id -> index in users
	nextID   UserID           // next id to try in the reserved range (>= P2PUserBase)

	transfers  p2pStore            // the retained transfers, by id
	reqs       map[p2pReq]uint64   // requestId -> transfer id (retained ones)
	pending    p2pHeap             // PENDING transfers by (executeAt, id)
	pendingPer map[UserID]int32    // PENDING transfers per sender (absent = 0)
	byUser     map[UserID]*p2pHist // derived: the retained transfers per user
	done       []uint64            // derived: retained finished transfers from doneHead on, by (DoneAt, finish order)
	doneHead   int
}

func (s *p2pState) init() {
	if s.byHandle == nil {
		s.byHandle = map[string]int32{}
		s.byID = map[UserID]int32{}
		s.reqs = map[p2pReq]uint64{}
		s.pendingPer = map[UserID]int32{}
		s.byUser = map[UserID]*p2pHist{}
		s.nextID = P2PUserBase
	}
}

// link adds retained transfer t to both users' histories.
func (s *p2pState) link(t *P2PTransfer) {
	for _, u := range [2]UserID{t.From, t.To} {
		h := s.byUser[u]
		if h == nil {
			h = &p2pHist{}
			s.byUser[u] = h
		}
		h.ids = append(h.ids, t.ID)
	}
}

// ValidP2PHandle reports whether h matches ^[a-zA-Z0-9_-]{3,50}$.
func ValidP2PHandle(h string) bool {
	if len(h) < MinP2PHandleLen || len(h) > MaxP2PHandleLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// P2PUserByHandle returns the user with handle h.
func (p *Processor) P2PUserByHandle(h string) (P2PUser, bool) {
	if i, ok := p.p2p.byHandle[h]; ok {
		return p.p2p.users[i], true
	}
	return P2PUser{}, false
}

// P2PUserByID returns the transfer-service user with id u.
func (p *Processor) P2PUserByID(u UserID) (P2PUser, bool) {
	if i, ok := p.p2p.byID[u]; ok {
		return p.p2p.users[i], true
	}
	return P2PUser{}, false
}

// P2PTransferByID returns transfer id, if the core retains it.
func (p *Processor) P2PTransferByID(id uint64) (P2PTransfer, bool) {
	if t := p.p2p.transfers.get(id); t != nil {
		return *t, true
	}
	return P2PTransfer{}, false
}

// P2PHistory appends up to limit transfers of user (as sender or
// recipient), newest first, skipping the newest skip, and returns how many
// the user has in all (forgotten ones included) and whether the core could
// answer: false when the page reaches a transfer the core forgot (the
// caller reads that page from the sink's p2p_transfers), dst then unchanged.
func (p *Processor) P2PHistory(u UserID, skip, limit int, dst []P2PTransfer) ([]P2PTransfer, int, bool) {
	var forgot, forgotMax uint64
	if i, ok := p.p2p.byID[u]; ok {
		forgot, forgotMax = p.p2p.users[i].forgot, p.p2p.users[i].forgotMax
	}
	var ids []uint64
	tomb := 0
	if h := p.p2p.byUser[u]; h != nil {
		ids, tomb = h.ids, h.tomb
	}
	total := len(ids) - tomb + int(forgot)
	if forgot > 0 {
		// the newest k of the user's transfers are the ids above forgotMax, all retained
		k := len(ids) - lowerBoundU64(ids, forgotMax+1)
		if skip+limit > k && skip < total {
			return dst, total, false
		}
	}
	for i := len(ids) - 1 - skip; i >= 0 && limit > 0; i-- {
		dst = append(dst, *p.p2p.transfers.at(ids[i]))
		limit--
	}
	return dst, total, true
}

// P2PEachRetained calls f with the transfers of user the core retains,
// newest first, until f returns false, and returns how many the core forgot.
func (p *Processor) P2PEachRetained(u UserID, f func(t *P2PTransfer) bool) (forgotten uint64) {
	if i, ok := p.p2p.byID[u]; ok {
		forgotten = p.p2p.users[i].forgot
	}
	if h := p.p2p.byUser[u]; h != nil {
		for i := len(h.ids) - 1; i >= 0; i-- {
			if t := p.p2p.transfers.get(h.ids[i]); t != nil && !f(t) {
				break
			}
		}
	}
	return forgotten
}

func lowerBoundU64(a []uint64, v uint64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// P2PStats is a summary of the transfer service's state, for metrics.
type P2PStats struct {
	Users      int
	Transfers  int    // retained by the core
	Made       uint64 // ever made (the last id)
	Finished   int    // retained and no longer PENDING (what a forget may drop)
	Pending    int
	OldestDue  int64 // the smallest executeAt among PENDING transfers (0 = none)
	OldestMade int64 // createdAt of that transfer
}

// P2PStats summarizes the transfer service.
func (p *Processor) P2PStats() P2PStats {
	s := P2PStats{Users: len(p.p2p.users), Transfers: p.p2p.transfers.len(), Made: p.p2p.transfers.last,
		Finished: len(p.p2p.done) - p.p2p.doneHead, Pending: len(p.p2p.pending)}
	if len(p.p2p.pending) > 0 {
		t := p.p2p.transfers.at(p.p2p.pending[0])
		s.OldestDue, s.OldestMade = t.ExecuteAt, t.CreatedAt
	}
	return s
}

// P2PForgetCutoff returns the cutoff of a KindP2PForget that drops about
// max of the finished transfers done at or before `before` (oldest first):
// the doneAt of the max-th, or of the last one if fewer; those done at that
// same instant go too (n counts them only up to max). 0 when none is due.
func (p *Processor) P2PForgetCutoff(before int64, max int) (cutoff int64, n int) {
	s := &p.p2p
	for i := s.doneHead; i < len(s.done) && n < max; i++ {
		t := s.transfers.at(s.done[i])
		if t.DoneAt > before {
			break
		}
		cutoff = t.DoneAt
		n++
	}
	return cutoff, n
}

// LastTime is the time of the last command applied (unix ns, clamped
// monotonic): every later command's time is at least this.
func (p *Processor) LastTime() int64 { return p.lastTime }

// P2PNextDue returns the executeAt of the next transfer a tick would
// execute, and whether there is one (the server's timer submits a tick only
// when one is due).
func (p *Processor) P2PNextDue() (int64, bool) {
	if len(p.p2p.pending) == 0 {
		return 0, false
	}
	return p.p2p.transfers.at(p.p2p.pending[0]).ExecuteAt, true
}

// p2pHeld adds what PENDING transfers hold to the full check's per-account
// totals (frozen == what open orders and pending transfers hold).
func (p *Processor) p2pHeld(sc *checkScratch) {
	for _, ti := range p.p2p.pending {
		t := p.p2p.transfers.at(ti)
		a := p.accountIdx(t.From)
		if a < 0 {
			continue // an account that vanished: the frozen check cannot match it anyway
		}
		if i := int(t.Asset) - 1; uint(i) < inlineAssets {
			sc.acct[a].held[i] += t.Amount
		} else {
			sc.heldExt[[2]uint64{uint64(a), uint64(t.Asset)}] += t.Amount
		}
	}
}
