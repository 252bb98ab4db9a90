// Package bench is the benchmark harness: a deterministic synthetic
// workload (Workload) and the scenarios that drive it (Pipeline). The CLI in
// cmd/bench is a thin shell around it.
//
// The workload is a pure function of (seed, seq), so any number of producers
// can claim seq ranges in any interleaving and the WAL, the events and the
// final core.StateHash are always the same for the same seed and options.
//
// Workload layout by seq (defaults: 10,000 users, 2 markets, 1,000 seeded
// orders per book):
//
//	1..3                       CONFIG_ASSET  USDT(1, scale 6), BTC(2, 8), ETH(3, 8)
//	4..3+M                     CONFIG_MARKET BTC-USDT(1), ETH-USDT(2)
//	next 3*Users               ADJUST        +credit of every asset to users 1..Users
//	next SeedPerBook*M         PLACE_ORDER   GTC limits resting around each mid price
//	then, forever              blocks of 20: 12 GTC places (6 near, 6 deep),
//	                           6 cancels, 2 marketable (IOC limit or MARKET)
//
// Order ids are predicted, not tracked: the core gives the k-th accepted
// PLACE_ORDER order id k, and every PLACE_ORDER of this workload is valid,
// funded and within every limit, so the k-th place command gets id k. Cancels
// target the "deep" queue (seeded orders first, then deep places, in order),
// so the resting deep depth stays at about SeedPerBook per book; a cancel
// misses (ORDER_NOT_FOUND) only when a marketable order walked past the near
// levels and filled its target first.
package bench
