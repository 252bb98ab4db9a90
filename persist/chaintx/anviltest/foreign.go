package anviltest

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// SendForeign signs a value transfer with hexKey in nonce and sends it, with
// go-ethereum directly (outside the exchange: as someone holding the hot key
// would), at fees high enough to replace whatever waits in that nonce in
// the node's pool. It returns the tx's hash.
func (n *Node) SendForeign(t testing.TB, hexKey string, nonce uint64, to chaintx.Address, wei int64) chaintx.Hash {
	t.Helper()
	k, err := crypto.HexToECDSA(strings.TrimPrefix(hexKey, "0x"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ethclient.DialContext(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dst := common.HexToAddress(string(to))
	gwei := big.NewInt(1_000_000_000)
	tx, err := types.SignNewTx(k, types.NewLondonSigner(id), &types.DynamicFeeTx{ChainID: id, Nonce: nonce,
		GasTipCap: new(big.Int).Mul(gwei, big.NewInt(50)), GasFeeCap: new(big.Int).Mul(gwei, big.NewInt(500)),
		Gas: 21000, To: &dst, Value: big.NewInt(wei)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	return chaintx.Hash(strings.ToLower(tx.Hash().Hex()))
}
