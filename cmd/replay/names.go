package main

import "github.com/ubscore/ubscore/core"

// Readable names of the core's small enums that have no String method.
// Kind, EventKind, Code and OrderStatus use the core's own String.

func sideName(s core.Side) string {
	switch s {
	case core.Buy:
		return "BUY"
	case core.Sell:
		return "SELL"
	}
	return "UNKNOWN"
}

func typeName(t core.OrderType) string {
	switch t {
	case core.Limit:
		return "LIMIT"
	case core.Market:
		return "MARKET"
	}
	return "UNKNOWN"
}

func tifName(t core.TimeInForce) string {
	switch t {
	case core.GTC:
		return "GTC"
	case core.IOC:
		return "IOC"
	case core.FOK:
		return "FOK"
	case core.PostOnly:
		return "POST_ONLY"
	}
	return "UNKNOWN"
}

func stpName(s core.STP) string {
	switch s {
	case core.STPCancelResting:
		return "CANCEL_RESTING"
	case core.STPExpireTaker:
		return "EXPIRE_TAKER"
	}
	return "UNKNOWN"
}

func accountStatusName(s core.AccountStatus) string {
	switch s {
	case core.Active:
		return "ACTIVE"
	case core.Frozen:
		return "FROZEN"
	case core.Disabled:
		return "DISABLED"
	}
	return "UNKNOWN"
}

func marketStatusName(s core.MarketStatus) string {
	switch s {
	case core.MarketActive:
		return "ACTIVE"
	case core.MarketHalted:
		return "HALTED"
	}
	return "UNKNOWN"
}
