// Package anviltest runs anvil, Foundry's dev chain node (npm package
// @foundry-rs/anvil-linux-amd64, pinned in testdata/chain/package.json and
// installed there by `npm ci` from make test and .ci/run), for tests: bound
// to 127.0.0.1 on a free port, started within a deadline, stopped by PID.
// Only tests import it.
package anviltest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
)

// DevKey0 is anvil's first well-known dev account key (public, test only).
const DevKey0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// Node is a running anvil.
type Node struct {
	URL    string
	Client *evm.Client
	cmd    *exec.Cmd
}

// Binary finds anvil: $UBS_ANVIL, else testdata/chain/node_modules/.bin/anvil
// at the module root.
func Binary() (string, error) {
	if p := os.Getenv("UBS_ANVIL"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "testdata", "chain", "node_modules", ".bin", "anvil")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("anvil not installed at %s (run `npm ci --prefix testdata/chain`): %w", p, err)
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("anviltest: module root not found")
		}
		dir = up
	}
}

var listening = regexp.MustCompile(`Listening on (127\.0\.0\.1:\d+)`)

// Start runs anvil with extra arguments (e.g. "--block-time", "1").
func Start(extra ...string) (*Node, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--host", "127.0.0.1", "--port", "0", "--accounts", "2"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("anviltest: start: %w", err)
	}
	n := &Node{cmd: cmd}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		n.URL = "http://" + a
	case <-time.After(20 * time.Second):
		n.Stop()
		return nil, errors.New("anviltest: anvil did not listen within 20s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n.Client, err = evm.Dial(ctx, n.URL); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// StartT starts anvil for t and stops it when t ends; skipped when anvil is
// not installed, unless CI is set.
func StartT(t testing.TB, extra ...string) *Node {
	t.Helper()
	n, err := Start(extra...)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("anvil unavailable (CI=1 makes this fail): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// Stop kills anvil by PID and reaps it.
func (n *Node) Stop() {
	if n.Client != nil {
		n.Client.Close()
	}
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

func (n *Node) call(method string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Client.RPC(ctx, nil, method, args...)
}

// Mine mines blocks now.
func (n *Node) Mine(blocks int) error {
	return n.call("anvil_mine", hexutil.EncodeUint64(uint64(blocks)))
}

// Automine turns mining on every transaction on or off.
func (n *Node) Automine(on bool) error { return n.call("evm_setAutomine", on) }

// IntervalMining mines a block every secs seconds (0: off).
func (n *Node) IntervalMining(secs int) error { return n.call("evm_setIntervalMining", secs) }

// Drop removes a transaction from the pool.
func (n *Node) Drop(h chaintx.Hash) error { return n.call("anvil_dropTransaction", string(h)) }

// Reorg replaces the last depth blocks with new (empty) ones: the
// transactions they held go back to the pool.
func (n *Node) Reorg(depth int) error { return n.call("anvil_reorg", depth, []any{}) }

// SetCode puts runtime code at an address (e.g. "0x60006000fd": always revert).
func (n *Node) SetCode(a chaintx.Address, code string) error {
	return n.call("anvil_setCode", string(a), code)
}

// SetBalance sets an account's balance in wei.
func (n *Node) SetBalance(a chaintx.Address, wei *big.Int) error {
	return n.call("anvil_setBalance", string(a), hexutil.EncodeBig(wei))
}

// Balance is an account's balance in wei at the latest block.
func (n *Node) Balance(a chaintx.Address) (*big.Int, error) {
	var s hexutil.Big
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.Client.RPC(ctx, &s, "eth_getBalance", string(a), "latest")
	return (*big.Int)(&s), err
}

// TxNonceOnChain returns the nonce and sender of a mined transaction, and
// whether it is in the canonical chain.
func (n *Node) TxNonceOnChain(h chaintx.Hash) (nonce uint64, mined bool, err error) {
	var tx struct {
		Nonce       hexutil.Uint64 `json:"nonce"`
		BlockNumber *string        `json:"blockNumber"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Client.RPC(ctx, &tx, "eth_getTransactionByHash", string(h)); err != nil {
		return 0, false, err
	}
	return uint64(tx.Nonce), tx.BlockNumber != nil, nil
}

// BlockTxs returns the hashes of the transactions in canonical block n.
func (n *Node) BlockTxs(num uint64) ([]chaintx.Hash, error) {
	var b struct {
		Transactions []string `json:"transactions"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Client.RPC(ctx, &b, "eth_getBlockByNumber", hexutil.EncodeUint64(num), false); err != nil {
		return nil, err
	}
	out := make([]chaintx.Hash, len(b.Transactions))
	for i, h := range b.Transactions {
		out[i] = chaintx.Hash(strings.ToLower(h))
	}
	return out, nil
}

// NewKey returns a fresh random key (hex) and its address, funded with
// 1000 ETH on the node: a submitter of its own for one test.
func (n *Node) NewKey(t testing.TB) (string, chaintx.Address) {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a := evm.Normalize(crypto.PubkeyToAddress(k.PublicKey))
	wei, _ := new(big.Int).SetString("1000000000000000000000", 10)
	if err := n.SetBalance(a, wei); err != nil {
		t.Fatal(err)
	}
	return hexKey(k), a
}

func hexKey(k *ecdsa.PrivateKey) string { return hexutil.Encode(crypto.FromECDSA(k)) }

// Addr is a fixed test recipient address i: 0x7e57 followed by i in hex
// (never a precompile, which a plain 21000-gas transfer cannot pay for).
func Addr(i int) chaintx.Address {
	return evm.Normalize(common.HexToAddress(fmt.Sprintf("0x7e57%036x", i)))
}

// Sender returns the sender and nonce of a transaction.
func (n *Node) Sender(h chaintx.Hash) (chaintx.Address, uint64, error) {
	var tx struct {
		From  string         `json:"from"`
		Nonce hexutil.Uint64 `json:"nonce"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Client.RPC(ctx, &tx, "eth_getTransactionByHash", string(h)); err != nil {
		return "", 0, err
	}
	return chaintx.Address(strings.ToLower(tx.From)), uint64(tx.Nonce), nil
}
