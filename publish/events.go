package publish

import (
	"strconv"
	"time"

	"github.com/ubscore/ubscore/core"
)

// The stream's messages (subjects under SubjectPrefix, by default). Each one is a JSON
// object with eventType, seq (the command's) and timestamp (the command's
// time, ISO 8601). The transfer events carry spec 003 §7's payloads;
// amounts of the transfer service are JSON numbers with the asset's
// decimals, user ids its handles. trade, order and balance carry the core's
// integers (asset units, ids).
//
//	ubs.transfer.created    TRANSFER_CREATED   transferId fromUserId toUserId amount status createdAt executeAt
//	ubs.transfer.completed  TRANSFER_COMPLETED transferId fromUserId toUserId amount
//	ubs.transfer.failed     TRANSFER_FAILED    transferId fromUserId toUserId amount reason
//	ubs.transfer.cancelled  TRANSFER_CANCELLED transferId reason
//	ubs.trade               TRADE              tradeId market price qty quoteQty makerOrderId takerOrderId
//	                                           makerUserId takerUserId makerFee takerFee takerSide
//	ubs.order               ORDER              event (ORDER_ACCEPTED, ORDER_MATCHED, ...) orderId userId market status qty
//	ubs.balance             BALANCE            userId asset dAvailable dFrozen
const SubjectPrefix = "ubs."

// Names resolves what the payloads show by name: a transfer-service user's
// handle and an asset's scale (the publisher reads them from its replica).
type Names interface {
	P2PUserByID(core.UserID) (core.P2PUser, bool)
	AssetScale(core.AssetID) (uint8, bool)
}

// subject is a message's subject, under the prefix.
type subject uint8

const (
	subjTransferCreated subject = iota
	subjTransferCompleted
	subjTransferFailed
	subjTransferCancelled
	subjTrade
	subjOrder
	subjBalance
	numSubjects
)

var subjectNames = [numSubjects]string{"transfer.created", "transfer.completed", "transfer.failed", "transfer.cancelled",
	"trade", "order", "balance"}

// subjects are the full subjects under one prefix (made once, not per message).
type subjects [numSubjects]string

func newSubjects(prefix string) *subjects {
	var s subjects
	for i, n := range subjectNames {
		s[i] = prefix + n
	}
	return &s
}

// message is one event to publish: its subject, payload and index among
// its command's events (the message id is "<seq>-<index>").
type message struct {
	subject string
	idx     int
	data    []byte
}

// appendMessages appends the messages of one command's events (events the
// stream does not carry, e.g. EvResult, are skipped; a repeated requestId
// publishes nothing). data of each message is appended to buf, which it
// returns; the messages alias it.
func appendMessages(dst []message, buf []byte, subs *subjects, evs []core.Event, n Names) ([]message, []byte) {
	for i := range evs {
		e := &evs[i]
		start := len(buf)
		var subj subject
		switch e.Kind {
		case core.EvP2PTransfer:
			if e.Flags != 0 {
				continue
			}
			subj, buf = transferPayload(buf, e, n)
		case core.EvTrade:
			subj = subjTrade
			buf = head(buf, "TRADE", e)
			buf = num(buf, "tradeId", int64(e.TradeID))
			buf = num(buf, "market", int64(e.Market))
			buf = num(buf, "price", int64(e.Price))
			buf = num(buf, "qty", int64(e.Qty))
			buf = num(buf, "quoteQty", int64(e.Amount))
			buf = num(buf, "makerOrderId", int64(e.OrderID))
			buf = num(buf, "takerOrderId", int64(e.OtherOrderID))
			buf = num(buf, "makerUserId", int64(e.User))
			buf = num(buf, "takerUserId", int64(e.OtherUser))
			buf = num(buf, "makerFee", int64(e.Fee))
			buf = num(buf, "takerFee", int64(e.Fee2))
			buf = str(buf, "takerSide", e.Side.String())
		case core.EvOrderAccepted, core.EvOrderFilled, core.EvOrderPartiallyFilled, core.EvOrderCancelled,
			core.EvOrderExpired, core.EvOrderModified, core.EvOrderRejected:
			subj = subjOrder
			buf = head(buf, "ORDER", e)
			buf = str(buf, "event", e.Kind.String())
			buf = num(buf, "orderId", int64(e.OrderID))
			buf = num(buf, "userId", int64(e.User))
			buf = num(buf, "market", int64(e.Market))
			if e.Status != 0 {
				buf = str(buf, "status", e.Status.String())
			}
			buf = num(buf, "price", int64(e.Price))
			buf = num(buf, "qty", int64(e.Qty))
			if e.Code != core.OK {
				buf = str(buf, "reason", e.Code.String())
			}
		case core.EvBalance:
			subj = subjBalance
			buf = head(buf, "BALANCE", e)
			buf = num(buf, "userId", int64(e.User))
			buf = num(buf, "asset", int64(e.Asset))
			buf = num(buf, "dAvailable", int64(e.DAvail))
			buf = num(buf, "dFrozen", int64(e.DFrozen))
		default:
			continue
		}
		buf = append(buf, '}')
		dst = append(dst, message{subject: subs[subj], idx: i, data: buf[start:len(buf):len(buf)]})
	}
	return dst, buf
}

func transferPayload(buf []byte, e *core.Event, n Names) (subject, []byte) {
	scale, _ := n.AssetScale(e.Asset)
	handle := func(u core.UserID) string {
		if p, ok := n.P2PUserByID(u); ok {
			return p.Handle
		}
		return strconv.FormatUint(uint64(u), 10) // not expected: users precede their transfers
	}
	amount := func(b []byte) []byte {
		b = append(b, `,"amount":`...)
		return appendUnits(b, int64(e.Amount), scale)
	}
	switch core.P2PStatus(e.Detail) {
	case core.P2PPending:
		buf = head(buf, "TRANSFER_CREATED", e)
		buf = num(buf, "transferId", int64(e.OrderID))
		buf = str(buf, "fromUserId", handle(e.User))
		buf = str(buf, "toUserId", handle(e.OtherUser))
		buf = amount(buf)
		buf = str(buf, "status", "PENDING")
		buf = tm(buf, "createdAt", e.Time)
		buf = tm(buf, "executeAt", int64(e.Price))
		return subjTransferCreated, buf
	case core.P2PCompleted:
		buf = head(buf, "TRANSFER_COMPLETED", e)
		buf = num(buf, "transferId", int64(e.OrderID))
		buf = str(buf, "fromUserId", handle(e.User))
		buf = str(buf, "toUserId", handle(e.OtherUser))
		return subjTransferCompleted, amount(buf)
	case core.P2PDebitFailed:
		buf = head(buf, "TRANSFER_FAILED", e)
		buf = num(buf, "transferId", int64(e.OrderID))
		buf = str(buf, "fromUserId", handle(e.User))
		buf = str(buf, "toUserId", handle(e.OtherUser))
		buf = amount(buf)
		return subjTransferFailed, str(buf, "reason", e.Code.String())
	default: // CANCELLED
		buf = head(buf, "TRANSFER_CANCELLED", e)
		buf = num(buf, "transferId", int64(e.OrderID))
		return subjTransferCancelled, str(buf, "reason", "User requested cancellation")
	}
}

func head(b []byte, typ string, e *core.Event) []byte {
	b = append(b, `{"eventType":"`...)
	b = append(b, typ...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, uint64(e.Seq), 10)
	b = append(b, `,"timestamp":"`...)
	b = appendTime(b, e.Time)
	return append(b, '"')
}

func num(b []byte, k string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// str appends a string member; values are ASCII names, handles
// ([a-zA-Z0-9_-]) or times: nothing to escape.
func str(b []byte, k, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, `":"`...)
	b = append(b, v...)
	return append(b, '"')
}

// tm appends a time member: unix ns as RFC 3339 UTC text.
func tm(b []byte, k string, ns int64) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, `":"`...)
	b = appendTime(b, ns)
	return append(b, '"')
}

// appendTime appends unix ns as time.RFC3339Nano in UTC (no allocation).
func appendTime(b []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano)
}

// appendUnits appends v units at scale as a JSON number with exactly scale
// decimals (at least one digit before the point).
func appendUnits(b []byte, v int64, scale uint8) []byte {
	u := uint64(v)
	if v < 0 {
		b = append(b, '-')
		u = -u // math.MinInt64 too: its magnitude fits a uint64
	}
	var d [280]byte // up to 20 digits or scale+1 of them (scale <= 255), and the point
	i := len(d)
	for n := 0; u > 0 || n <= int(scale); n++ {
		if n == int(scale) && scale > 0 {
			i--
			d[i] = '.'
		}
		i--
		d[i] = byte('0' + u%10)
		u /= 10
	}
	return append(b, d[i:]...)
}

// MsgID is the stream's message id of event idx of command seq.
func MsgID(seq core.Seq, idx int) string {
	return strconv.FormatUint(uint64(seq), 10) + "-" + strconv.Itoa(idx)
}

// ParseMsgID reads "<seq>-<index>" (canonical decimal, seq >= 1, index >= 0).
func ParseMsgID(s string) (core.Seq, int, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			seq, ok1 := canonUint(s[:i])
			idx, ok2 := canonUint(s[i+1:])
			if !ok1 || !ok2 || seq == 0 || idx > 1<<31-1 {
				return 0, 0, false
			}
			return core.Seq(seq), int(idx), true
		}
	}
	return 0, 0, false
}

func canonUint(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
