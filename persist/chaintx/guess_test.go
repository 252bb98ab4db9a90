package chaintx_test

// The writer's one-round-trip allocation end to end: after a submitter's
// first batch the writer sends guesses (requests signed ahead from its
// nonce cache) and the store takes them; every stored tx's signed raw
// carries exactly its nonce and hash, and the nonces of each submitter are
// contiguous from 0 (none skipped, none repeated), with concurrent
// requests (late binding adds requests after the ahead-signing started).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// guessCounter counts the groups that come with a guess.
type guessCounter struct {
	*pgstore.Store
	groups, guessed atomic.Int64
}

func (g *guessCounter) Allocate(ctx context.Context, gs []chaintx.AllocGroup) ([]chaintx.AllocResult, error) {
	for _, x := range gs {
		g.groups.Add(1)
		if x.Guess != nil {
			g.guessed.Add(1)
		}
	}
	return g.Store.Allocate(ctx, gs)
}

func TestWriterGuessesSignedAheadMatchTheirNonces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedPool(t, pgtest.NewDB(t))
	store := &guessCounter{Store: pgstore.New(pool)}
	signers := randomSigners(t, 2)
	m, err := chaintx.New(chaintx.Config{Store: store, Chain: stubChain{}, Signers: signers, NodeID: "n1", Workers: 2,
		Lease: chaintx.LeaseConfig{Duration: time.Hour}, TrackInterval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	const clients, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				s := signers[c%2].Address()
				if _, _, err := m.Create(ctx, transfer(s, fmt.Sprintf("c%d-%d", c, i), anviltest.Addr(c), int64(i+1))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, sg := range signers {
		rows, err := pool.Query(ctx, `SELECT m.nonce, m.tx_hash, g.tx_hash, g.raw FROM managed_tx m JOIN managed_tx_signed g USING (tx_id)
			WHERE m.submitter = $1 ORDER BY m.nonce`, string(sg.Address()))
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for rows.Next() {
			var nonce int64
			var h, gh string
			var raw []byte
			if err := rows.Scan(&nonce, &h, &gh, &raw); err != nil {
				t.Fatal(err)
			}
			var tx types.Transaction
			if err := tx.UnmarshalBinary(raw); err != nil {
				t.Fatal(err)
			}
			if nonce != n || int64(tx.Nonce()) != nonce || h != gh || tx.Hash().Hex() != h {
				t.Fatalf("%s: row %d: nonce %d, raw's nonce %d, hash %s / signed %s / raw's %s", sg.Address(), n, nonce, tx.Nonce(), h, gh, tx.Hash().Hex())
			}
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != clients/2*each {
			t.Fatalf("%s: %d txs, want %d", sg.Address(), n, clients/2*each)
		}
	}
	// Every batch after a submitter's first comes with a guess.
	if g, all := store.guessed.Load(), store.groups.Load(); g < all-2 || g == 0 {
		t.Fatalf("%d of %d groups guessed", g, all)
	}
}
