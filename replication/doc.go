// Package replication is the replicated sequenced-command log
// (docs/design.md, "Replication"): the primary appends every group commit
// of the WAL — the same payloads, with their seqs — to a NATS JetStream
// stream that the NATS cluster replicates with its own Raft (R=3); a
// standby follows the stream and applies the commands to its own
// deterministic processor, reaching the same state.
//
// The log holds three kinds of records (record.go): runs of commands, epoch
// markers (a node became the writer) and state hashes (the writer's hash
// after a given command, which a follower compares with its own).
//
// Safety comes from the log, never from a clock: every append names the
// stream sequence it expects to follow (Nats-Expected-Last-Sequence). A
// node that claims the log (Claim: an epoch marker expecting the last
// record it has read) makes every later append of the previous writer fail
// that expectation: the old writer learns it is fenced (ErrFenced, sticky)
// and must acknowledge nothing more. An append whose answer is lost (a
// timeout, no quorum, a reconnect) is settled by reading the stream back:
// our records found after the last one we know are stored, anything else
// there fences us; otherwise the append is sent again, until a quorum
// stores it (Wait) — so writes pause, never fork, while the cluster has no
// quorum.
//
// What "stored" means: a JetStream ack says the record is held by a quorum
// of the stream's replicas. On nats-server 2.9 that quorum holds it in
// memory and syncs it to disk in the background (sync_interval, 2 minutes
// by default): a record survives the death of a minority of the NATS
// nodes, not the simultaneous power loss of a majority before their sync.
//
// Package natstest runs real JetStream servers and clusters inside a test.
package replication
