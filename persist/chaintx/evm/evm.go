// Package evm is the EVM JSON-RPC adapter of persist/chaintx (ports Chain
// and Signer) on go-ethereum's ethclient, types and crypto. It is the only
// package that imports go-ethereum.
package evm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// Client is a chaintx.Chain over one JSON-RPC endpoint.
type Client struct {
	rpc *rpc.Client
	eth *ethclient.Client
}

var _ chaintx.Chain = (*Client)(nil)

// Dial connects to url (http://, ws:// or an IPC path).
func Dial(ctx context.Context, url string) (*Client, error) {
	c, err := rpc.DialContext(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("evm: dial %s: %w", url, err)
	}
	return &Client{rpc: c, eth: ethclient.NewClient(c)}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.rpc.Close() }

// RPC calls any method (tests: anvil_* and evm_* controls).
func (c *Client) RPC(ctx context.Context, result any, method string, args ...any) error {
	return c.rpc.CallContext(ctx, result, method, args...)
}

// ChainID implements chaintx.Chain.
func (c *Client) ChainID(ctx context.Context) (*big.Int, error) { return c.eth.ChainID(ctx) }

// PendingNonce implements chaintx.Chain.
func (c *Client) PendingNonce(ctx context.Context, a chaintx.Address) (uint64, error) {
	return c.eth.PendingNonceAt(ctx, common.HexToAddress(string(a)))
}

// MinedNonce implements chaintx.Chain.
func (c *Client) MinedNonce(ctx context.Context, a chaintx.Address) (uint64, error) {
	return c.eth.NonceAt(ctx, common.HexToAddress(string(a)), nil)
}

// MinedNonceAt implements chaintx.Chain.
func (c *Client) MinedNonceAt(ctx context.Context, a chaintx.Address, block uint64) (uint64, error) {
	return c.eth.NonceAt(ctx, common.HexToAddress(string(a)), new(big.Int).SetUint64(block))
}

// Send implements chaintx.Chain.
func (c *Client) Send(ctx context.Context, raw []byte) error {
	err := c.rpc.CallContext(ctx, nil, "eth_sendRawTransaction", hexutil.Encode(raw))
	if err == nil {
		return nil
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "already known") || strings.Contains(msg, "already imported") ||
		strings.Contains(msg, "known transaction") || strings.Contains(msg, "already exists"):
		return fmt.Errorf("%w: %v", chaintx.ErrAlreadyKnown, err)
	case strings.Contains(msg, "nonce too low") || strings.Contains(msg, "nonce has already been used"):
		return fmt.Errorf("%w: %v", chaintx.ErrNonceTooLow, err)
	}
	return fmt.Errorf("evm: send: %w", err)
}

// Receipt implements chaintx.Chain.
func (c *Client) Receipt(ctx context.Context, h chaintx.Hash) (chaintx.ChainReceipt, error) {
	r, err := c.eth.TransactionReceipt(ctx, common.HexToHash(string(h)))
	if errors.Is(err, ethereum.NotFound) || (err == nil && r == nil) {
		return chaintx.ChainReceipt{}, chaintx.ErrReceiptNotFound
	}
	if err != nil {
		return chaintx.ChainReceipt{}, fmt.Errorf("evm: receipt: %w", err)
	}
	return chaintx.ChainReceipt{BlockNumber: r.BlockNumber.Uint64(), BlockHash: hashOf(r.BlockHash),
		Success: r.Status == types.ReceiptStatusSuccessful}, nil
}

// Head implements chaintx.Chain.
func (c *Client) Head(ctx context.Context) (uint64, error) { return c.eth.BlockNumber(ctx) }

// BlockHash implements chaintx.Chain.
func (c *Client) BlockHash(ctx context.Context, n uint64) (chaintx.Hash, error) {
	h, err := c.eth.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
	if errors.Is(err, ethereum.NotFound) {
		return "", nil // no block at n (any more): nothing is canonical there
	}
	if err != nil {
		return "", fmt.Errorf("evm: block %d: %w", n, err)
	}
	return hashOf(h.Hash()), nil
}

// Fees implements chaintx.Chain: tip = eth_maxPriorityFeePerGas, max fee =
// 2 x the latest base fee + tip (room for six full blocks of base-fee rise).
func (c *Client) Fees(ctx context.Context) (chaintx.Fees, error) {
	tip, err := c.eth.SuggestGasTipCap(ctx)
	if err != nil {
		return chaintx.Fees{}, fmt.Errorf("evm: tip: %w", err)
	}
	h, err := c.eth.HeaderByNumber(ctx, nil)
	if err != nil {
		return chaintx.Fees{}, fmt.Errorf("evm: head: %w", err)
	}
	base := h.BaseFee
	if base == nil {
		base = new(big.Int)
	}
	fee := new(big.Int).Mul(base, big.NewInt(2))
	return chaintx.Fees{MaxFee: fee.Add(fee, tip), MaxTip: tip}, nil
}

func hashOf(h common.Hash) chaintx.Hash { return chaintx.Hash(strings.ToLower(h.Hex())) }

// Signer signs EIP-1559 transactions for one key on one chain.
type Signer struct {
	key    *ecdsa.PrivateKey
	addr   chaintx.Address
	signer types.Signer
	chain  *big.Int
}

var _ chaintx.Signer = (*Signer)(nil)

// NewSigner returns a signer for the hex private key (0x optional) on chainID.
func NewSigner(hexKey string, chainID *big.Int) (*Signer, error) {
	k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(hexKey), "0x"))
	if err != nil {
		return nil, errors.New("evm: invalid private key") // never echo the key
	}
	return &Signer{key: k, addr: Normalize(crypto.PubkeyToAddress(k.PublicKey)), signer: types.NewLondonSigner(chainID),
		chain: new(big.Int).Set(chainID)}, nil
}

// LoadSigner reads a hex private key from a file (--chain-key-file).
func LoadSigner(path string, chainID *big.Int) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evm: key file: %w", err)
	}
	return NewSigner(string(b), chainID)
}

// Address implements chaintx.Signer.
func (s *Signer) Address() chaintx.Address { return s.addr }

// Sign implements chaintx.Signer.
func (s *Signer) Sign(u chaintx.Unsigned) (chaintx.Hash, []byte, error) {
	to := common.HexToAddress(string(u.Payload.To))
	value := u.Payload.Value
	if value == nil {
		value = new(big.Int)
	}
	tx, err := types.SignNewTx(s.key, s.signer, &types.DynamicFeeTx{ChainID: s.chain, Nonce: u.Nonce,
		GasTipCap: u.Fees.MaxTip, GasFeeCap: u.Fees.MaxFee, Gas: u.Payload.GasLimit, To: &to, Value: value, Data: u.Payload.Data})
	if err != nil {
		return "", nil, fmt.Errorf("evm: sign: %w", err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		return "", nil, err
	}
	return hashOf(tx.Hash()), raw, nil
}

// Normalize is the chaintx form of an address: 0x + lower-case hex.
func Normalize(a common.Address) chaintx.Address { return chaintx.Address(strings.ToLower(a.Hex())) }

// Checksummed is the EIP-55 form of a (for answers).
func Checksummed(a chaintx.Address) string { return common.HexToAddress(string(a)).Hex() }

// ErrBadAddress: not an address, or a mixed-case one whose EIP-55 checksum is wrong.
var ErrBadAddress = errors.New("evm: invalid address")

// ParseAddress validates a user-given address: 0x + 40 hex digits; in mixed
// case the EIP-55 checksum must match (all-lower or all-upper carries no
// checksum and is accepted as is). The zero address is refused.
func ParseAddress(s string) (chaintx.Address, error) {
	if len(s) != 42 || !strings.HasPrefix(s, "0x") || !common.IsHexAddress(s) {
		return "", ErrBadAddress
	}
	body := s[2:]
	if body != strings.ToLower(body) && body != strings.ToUpper(body) && common.HexToAddress(s).Hex() != s {
		return "", fmt.Errorf("%w: checksum mismatch", ErrBadAddress)
	}
	a := common.HexToAddress(s)
	if a == (common.Address{}) {
		return "", fmt.Errorf("%w: zero address", ErrBadAddress)
	}
	return Normalize(a), nil
}
