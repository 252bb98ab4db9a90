package main

import (
	"github.com/prometheus/client_golang/prometheus"

	exmetrics "github.com/ubscore/ubscore/metrics"
)

// metrics is the exchange's registry (package metrics) under the names
// transfers.go uses (they go with it when it moves into persist/transfer).
type metrics struct {
	*exmetrics.Metrics
	reg *prometheus.Registry
}

func newMetrics() *metrics {
	m := exmetrics.New()
	return &metrics{Metrics: m, reg: m.Reg}
}

// promFactory registers transfers.go's gauges on one registry.
type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}
