package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot file names (report.md links them).
const (
	plotSweep      = "latency_vs_load.png"
	plotThroughput = "throughput_vs_ceiling.png"
)

// writePlots writes the PNGs it has data for and returns their names.
func writePlots(dir string, rep *allReport) ([]string, error) {
	var names []string
	if sw := rep.Sweep; sw != nil && len(sw.Points) > 0 {
		if err := sweepPlot(filepath.Join(dir, plotSweep), sw); err != nil {
			return nil, err
		}
		names = append(names, plotSweep)
	}
	var rows []pair
	for _, p := range rep.Pairs {
		if p.Ceiling > 0 { // a rate beside its ceiling (the sink lag row has none)
			rows = append(rows, p)
		}
	}
	if len(rows) > 0 {
		if err := throughputPlot(filepath.Join(dir, plotThroughput), rows); err != nil {
			return nil, err
		}
		names = append(names, plotThroughput)
	}
	return names, nil
}

// sweepPlot: p50, p99 and p99.9 (µs, log scale) against offered req/s.
func sweepPlot(path string, sw *sweepReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: latency vs offered load (max %.0f req/s)", sw.Target, sw.MaxRPS)
	p.X.Label.Text = "offered load (req/s)"
	p.Y.Label.Text = "latency (µs, corrected for coordinated omission)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	for i, q := range []struct {
		name string
		get  func(sweepPoint) float64
	}{
		{"p50", func(s sweepPoint) float64 { return s.Result.P50us }},
		{"p99", func(s sweepPoint) float64 { return s.Result.P99us }},
		{"p99.9", func(s sweepPoint) float64 { return s.Result.P999us }},
	} {
		xys := make(plotter.XYs, len(sw.Points))
		for j, pt := range sw.Points {
			xys[j].X, xys[j].Y = pt.Result.OfferedRPS, math.Max(q.get(pt), 1)
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(q.name, l, s)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// throughputPlot: one panel per row, the measured rate beside its ceiling,
// each in its own unit (they span six orders of magnitude).
func throughputPlot(path string, rows []pair) error {
	const cols = 3
	nrows := (len(rows) + cols - 1) / cols
	grid := make([][]*plot.Plot, nrows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, r := range rows {
		p := plot.New()
		p.Title.Text = r.Name
		p.Y.Label.Text = r.Unit
		p.Y.Min = 0
		measured, err := plotter.NewBarChart(plotter.Values{r.Value}, vg.Points(28))
		if err != nil {
			return err
		}
		measured.Color = plotutil.Color(0)
		measured.Offset = -vg.Points(15)
		ceiling, err := plotter.NewBarChart(plotter.Values{r.Ceiling}, vg.Points(28))
		if err != nil {
			return err
		}
		ceiling.Color = color.Gray{Y: 170}
		ceiling.Offset = vg.Points(15)
		p.Add(measured, ceiling)
		p.Legend.Add("measured", measured)
		p.Legend.Add(shorten(r.CeilingName, 28), ceiling)
		p.Legend.Top = true
		p.NominalX("")
		p.Y.Max = math.Max(r.Value, r.Ceiling) * 1.35
		if p.Y.Max == 0 {
			p.Y.Max = 1
		}
		grid[i/cols][i%cols] = p
	}
	for i := range grid { // empty cells: an empty plot
		for j := range grid[i] {
			if grid[i][j] == nil {
				e := plot.New()
				e.HideAxes()
				grid[i][j] = e
			}
		}
	}
	w, h := vg.Length(cols)*3.6*vg.Inch, vg.Length(nrows)*3*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
