package bench

import "github.com/ubscore/ubscore/core"

// The workload's assets and markets. Ids, scales, ticks and lots are those of
// the exchange's built-in config (cmd/exchange/config.go), so a bench WAL
// looks like a server's.
const (
	assetUSDT core.AssetID = 1 // scale 6
	assetBTC  core.AssetID = 2 // scale 8
	assetETH  core.AssetID = 3 // scale 8
)

// assetSpec is one configured asset and what every user is credited with.
type assetSpec struct {
	id    core.AssetID
	name  string
	scale uint8
	fund  core.Units // per-user credit (capped so the asset's total fits int64)
}

var assetTable = [...]assetSpec{
	{assetUSDT, "USDT", 6, 100_000_000 * 1_000_000}, // 1e8 USDT
	{assetBTC, "BTC", 8, 1_000 * 100_000_000},       // 1,000 BTC
	{assetETH, "ETH", 8, 10_000 * 100_000_000},      // 10,000 ETH
}

// maxAssetTotal bounds the sum of all users' credits of one asset, leaving
// headroom below MaxInt64 for fees and the conservation counters.
const maxAssetTotal = 4_000_000_000_000_000_000

// marketSpec is one market and how the workload prices orders in it.
type marketSpec struct {
	id   core.MarketID
	name string
	cfg  core.MarketCfg
	mid  core.Price // fixed mid price: bids rest below it, asks above it
	step core.Units // order quantities are multiples of step (a multiple of Lot)
}

// tick 0.01 USDT x lot 0.0001 base = 10^4 x 10^4 = 10^8 = 10^BaseScale, as the core requires.
var marketTable = [...]marketSpec{
	{1, "BTC-USDT", core.MarketCfg{Base: assetBTC, Quote: assetUSDT, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 1_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000},
		50_000 * 1_000_000, 100_000}, // mid 50,000 USDT; step 0.001 BTC
	{2, "ETH-USDT", core.MarketCfg{Base: assetETH, Quote: assetUSDT, BaseScale: 8, Tick: 10_000, Lot: 10_000,
		MinQty: 10_000, MaxQty: 10_000 * 100_000_000, MakerFee: 1_000, TakerFee: 2_000},
		3_000 * 1_000_000, 1_000_000}, // mid 3,000 USDT; step 0.01 ETH
}

// Price offsets from the mid, in ticks. Near and deep bands do not overlap,
// so marketable orders (limited to takerReach ticks, or MARKET) eat near
// orders first and deep ones only when the near levels run dry.
const (
	nearMin, nearSpan = 1, 5  // near places: 1..5 ticks from mid
	deepMin, deepSpan = 6, 35 // deep places: 6..40 ticks
	seedMin, seedSpan = 1, 40 // seeded orders: 1..40 ticks
	takerReach        = 10    // IOC limit takers cross up to 10 ticks past mid
)

// Quantities, in steps of marketSpec.step. Takers average 35 steps, about
// 3.3 resting orders, slightly more than the near places supply, so the
// near book stays shallow and deep orders are rarely eaten (the source of
// the ~10% of cancels that miss).
const (
	restMaxSteps                  = 20     // resting orders: 1..20 steps
	takerMinSteps, takerSpanSteps = 10, 51 // taker orders: 10..60 steps
)

// MARKET-by-quote budget: notional at the mid x 1.003 (covers the 0.2% taker fee).
const (
	feeHeadroom, feeHeadroomDenom = 1_003, 1_000
	notionalDivisor               = 100_000_000 // 10^BaseScale of every base asset here
)

// Hash salts of the per-order attributes.
const (
	orderSaltUser = iota + 1
	orderSaltMarket
	orderSaltSide
	orderSaltPrice
	orderSaltQty
	orderSaltTakerTyp
	orderSaltTakerQty
)
