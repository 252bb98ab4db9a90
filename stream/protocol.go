package stream

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/ubscore/ubscore/core"
)

// Channel is a stream a client subscribes to.
type Channel uint8

// Channels. The public ones need a market (and an outcome for a binary
// market); the private ones a token.
const (
	ChDepth Channel = iota + 1
	ChTrades
	ChTicker
	ChOrders
	ChBalances
	ChPositions
	ChTransfers
	ChFunding
	numChannels
)

var channelNames = [numChannels]string{"", "depth", "trades", "ticker", "orders", "balances", "positions", "transfers", "funding"}

func (c Channel) String() string {
	if c < numChannels {
		return channelNames[c]
	}
	return "unknown"
}

// Private reports whether c carries one user's data (a token is needed).
func (c Channel) Private() bool { return c >= ChOrders }

// journaled reports whether c comes from the journal (each message has a
// seq; `since` replays what was missed).
func (c Channel) journaled() bool { return c >= ChOrders && c != ChFunding }

func channelByName(s string) (Channel, bool) {
	for i := ChDepth; i < numChannels; i++ {
		if channelNames[i] == s {
			return i, true
		}
	}
	return 0, false
}

// Op is what a client message asks.
type Op uint8

// Ops.
const (
	OpSubscribe Op = iota + 1
	OpUnsubscribe
	OpPing
)

// Limits of a client message's fields.
const (
	MaxMessageBytes = 4096 // a larger frame closes the socket (1009)
	maxMarketLen    = 32
	maxTokenLen     = 2048
)

// Request is one decoded client message.
type Request struct {
	Op       Op
	ID       uint64 // echoed in the answer (0: none given)
	Channel  Channel
	Market   string        // spot symbol, or a binary market's id (decimal)
	Binary   core.MarketID // the binary market's id when Outcome != 0
	Outcome  core.Outcome  // YES / NO for a binary market, 0 for spot
	Token    string        // a bearer JWT (without "Bearer ")
	Since    core.Seq      // the last seq seen (journaled private channels)
	HasSince bool
}

// Error is a protocol error answered to the client: a stable code and a message.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Error codes of the protocol (docs/streams.md).
const (
	CodeBadRequest        = "BAD_REQUEST"
	CodeUnknownOp         = "UNKNOWN_OP"
	CodeUnknownChannel    = "UNKNOWN_CHANNEL"
	CodeInvalidMarket     = "INVALID_MARKET"
	CodeInvalidOutcome    = "INVALID_OUTCOME"
	CodeUnauthorized      = "UNAUTHORIZED"
	CodeTooManyConns      = "TOO_MANY_CONNECTIONS"
	CodeTooManySubs       = "TOO_MANY_SUBSCRIPTIONS"
	CodeAlreadySubscribed = "ALREADY_SUBSCRIBED"
	CodeNotSubscribed     = "NOT_SUBSCRIBED"
	CodeResync            = "RESYNC_REQUIRED"
	CodeTokenExpired      = "TOKEN_EXPIRED"
	CodeUnavailable       = "UNAVAILABLE"
)

func badReq(code, msg string) *Error { return &Error{Code: code, Message: msg} }

// wire is a client message as JSON.
type wire struct {
	Op      string           `json:"op"`
	ID      *json.RawMessage `json:"id"`
	Channel string           `json:"channel"`
	Market  string           `json:"market"`
	Outcome string           `json:"outcome"`
	Token   string           `json:"token"`
	Since   *json.RawMessage `json:"since"`
}

// DecodeRequest parses one client message. Unknown members are refused
// (a typo must not silently subscribe to something else).
func DecodeRequest(b []byte) (Request, *Error) {
	var r Request
	if len(b) > MaxMessageBytes {
		return r, badReq(CodeBadRequest, "message larger than "+strconv.Itoa(MaxMessageBytes)+" bytes")
	}
	var w wire
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return r, badReq(CodeBadRequest, "not a JSON object of the protocol: "+err.Error())
	}
	if d.More() {
		return r, badReq(CodeBadRequest, "one JSON object per message")
	}
	if w.ID != nil {
		id, ok := canonUint(*w.ID)
		if !ok {
			return r, badReq(CodeBadRequest, "id must be a non-negative integer")
		}
		r.ID = id
	}
	switch w.Op {
	case "subscribe":
		r.Op = OpSubscribe
	case "unsubscribe":
		r.Op = OpUnsubscribe
	case "ping":
		r.Op = OpPing
		if w.Channel != "" || w.Market != "" || w.Outcome != "" || w.Token != "" || w.Since != nil {
			return r, badReq(CodeBadRequest, "ping takes only an id")
		}
		return r, nil
	case "":
		return r, badReq(CodeUnknownOp, "op is required: subscribe, unsubscribe or ping")
	default:
		return r, badReq(CodeUnknownOp, "unknown op (subscribe, unsubscribe, ping)")
	}
	ch, ok := channelByName(w.Channel)
	if !ok {
		return r, badReq(CodeUnknownChannel, "unknown channel (depth, trades, ticker, orders, balances, positions, transfers, funding)")
	}
	r.Channel = ch
	if len(w.Token) > maxTokenLen {
		return r, badReq(CodeUnauthorized, "token too long")
	}
	r.Token = w.Token
	if ch.Private() {
		if w.Market != "" || w.Outcome != "" {
			return r, badReq(CodeBadRequest, "a private channel takes no market or outcome")
		}
	} else {
		if w.Token != "" {
			return r, badReq(CodeBadRequest, "a public channel takes no token")
		}
		if w.Market == "" || len(w.Market) > maxMarketLen {
			return r, badReq(CodeInvalidMarket, "market is required (a spot symbol, or a binary market's id with an outcome)")
		}
		r.Market = w.Market
		switch w.Outcome {
		case "":
		case "YES", "NO":
			id, ok := canonUint([]byte(w.Market))
			if !ok || id == 0 || id > core.MaxMarkets {
				return r, badReq(CodeInvalidMarket, "a binary market is named by its id")
			}
			r.Binary = core.MarketID(id)
			r.Outcome = core.OutcomeYes
			if w.Outcome == "NO" {
				r.Outcome = core.OutcomeNo
			}
		default:
			return r, badReq(CodeInvalidOutcome, "outcome must be YES or NO")
		}
	}
	if w.Since != nil {
		if r.Op != OpSubscribe || !ch.journaled() {
			return r, badReq(CodeBadRequest, "since is for subscribing to orders, balances, positions or transfers")
		}
		s, ok := canonUint(*w.Since)
		if !ok {
			return r, badReq(CodeBadRequest, "since must be a non-negative integer (the last seq seen)")
		}
		r.Since, r.HasSince = core.Seq(s), true
	}
	return r, nil
}

// canonUint reads a JSON number that is a non-negative integer below 2^63.
func canonUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, v < 1<<63
}
