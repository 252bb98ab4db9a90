package chaintx

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the spec's §5.2 signals, named ubs_chain_*.
type Metrics struct {
	LeaseAcquire  *prometheus.CounterVec // result: acquired | renewed | not_leader | error
	LeaseFenced   prometheus.Counter     // critical writes refused by the fence
	QueueDepth    *prometheus.GaugeVec   // worker: requests waiting in the writer's queue
	TxCreate      *prometheus.CounterVec // result: allocated | existing | not_leader | busy | error | unknown
	TxSubmit      *prometheus.CounterVec // result: ok | known | nonce_too_low | error
	ReceiptCheck  *prometheus.CounterVec // result: found | not_found | error
	PendingOldest *prometheus.GaugeVec   // submitter: age of the oldest pending tx, seconds
	Pending       *prometheus.GaugeVec   // submitter: pending txs (ALLOCATED + TRACKING + STUCK)
	Resubmit      *prometheus.CounterVec // result: ok | known | nonce_too_low | error
	Stuck         prometheus.Counter     // transitions to STUCK
	Reorgs        prometheus.Counter     // receipts whose block left the canonical chain
	Finalized     *prometheus.CounterVec // state: CONFIRMED | FAILED_FINAL
	Remediations  *prometheus.CounterVec // action
	RPCFailures   *prometheus.CounterVec // method, reason: timeout | unavailable (rpc.go)
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LeaseAcquire: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_lease_acquire_total",
			Help: "Lease acquire/renew attempts by result."}, []string{"result"}),
		LeaseFenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "ubs_chain_lease_fenced_total",
			Help: "Critical writes refused because the lease was no longer this node's (0 rows)."}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ubs_chain_writer_queue_depth",
			Help: "Creation requests waiting in each writer worker's queue."}, []string{"worker"}),
		TxCreate: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_tx_create_total",
			Help: "Managed tx creations by result."}, []string{"result"}),
		TxSubmit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_tx_submit_total",
			Help: "First broadcasts by result."}, []string{"result"}),
		ReceiptCheck: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_receipt_check_total",
			Help: "Receipt checks by result."}, []string{"result"}),
		PendingOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ubs_chain_pending_oldest_age_seconds",
			Help: "Age since allocation of the oldest pending (ALLOCATED, TRACKING, STUCK) tx."}, []string{"submitter"}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ubs_chain_pending_txs",
			Help: "Pending (ALLOCATED, TRACKING, STUCK) txs."}, []string{"submitter"}),
		Resubmit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_resubmit_total",
			Help: "Resubmissions of the same signed payload by result."}, []string{"result"}),
		Stuck: prometheus.NewCounter(prometheus.CounterOpts{Name: "ubs_chain_stuck_total",
			Help: "Transactions that went STUCK."}),
		Reorgs: prometheus.NewCounter(prometheus.CounterOpts{Name: "ubs_chain_reorg_total",
			Help: "Receipts whose block was reorged out (tx back to TRACKING)."}),
		Finalized: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_tx_final_total",
			Help: "Transactions that reached a final state."}, []string{"state"}),
		Remediations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_remediation_total",
			Help: "Stuck-resolution actions executed (hook or operator)."}, []string{"action"}),
		RPCFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_rpc_failures_total",
			Help: "Chain RPC calls that failed for want of an answer: timeout (no answer within --chain-rpc-timeout) or unavailable (not sent: the node timed out just before)."},
			[]string{"method", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.LeaseAcquire, m.LeaseFenced, m.QueueDepth, m.TxCreate, m.TxSubmit, m.ReceiptCheck,
			m.PendingOldest, m.Pending, m.Resubmit, m.Stuck, m.Reorgs, m.Finalized, m.Remediations, m.RPCFailures)
	}
	return m
}
