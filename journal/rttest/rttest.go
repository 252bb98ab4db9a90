// Package rttest holds the checks the tests of real-time threads share
// (journal.Config.RealtimeProcessor): whether this machine lets a process
// make a thread SCHED_FIFO, and which threads of a process are. It does not
// import package journal, so journal's own internal tests use it.
package rttest
