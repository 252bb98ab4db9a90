package main

import (
	"encoding/json"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// The hello-world baseline must answer the bench workload with as many
// bytes, in the same shape, as the exchange does (issue: "answers a
// same-sized response"): the same request stream goes to both, and the
// mean answer sizes agree within 10 % and the answers have the same keys.
func TestHelloAnswersLikeTheExchange(t *testing.T) {
	url := pgtest.NewDB(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "exchange")
	if b, err := exec.Command("go", "build", "-o", exe, "github.com/ubscore/ubscore/cmd/exchange").CombinedOutput(); err != nil {
		t.Fatalf("build the exchange: %v: %s", err, b)
	}
	x, err := startExchange(exe, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer x.stop()
	helloAddr, stop, err := bench.StartHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()

	// answers sends requests 0..n-1 of client 0 of the bench workload to
	// addr and returns the total answer size and the keys of each answer.
	answers := func(addr string, tokens []string, n int) (int, [][]string) {
		var total int
		var keys [][]string
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		build := authedOrder(tokens)
		for i := range n {
			req.Reset()
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + addr + "/api/v1/order")
			build(0, i, req)
			if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				t.Fatalf("%s: %d %s", addr, resp.StatusCode(), resp.Body())
			}
			total += len(resp.Body())
			var m map[string]any
			if err := json.Unmarshal(resp.Body(), &m); err != nil {
				t.Fatalf("%s: %v: %s", addr, err, resp.Body())
			}
			keys = append(keys, slices.Sorted(maps.Keys(m)))
		}
		return total, keys
	}
	const n = 200
	exBytes, exKeys := answers(x.addr, x.tokens, n)
	helloBytes, helloKeys := answers(helloAddr, helloTokens(), n)
	t.Logf("answers to %d requests: exchange %d bytes, hello-world %d", n, exBytes, helloBytes)
	if r := float64(helloBytes) / float64(exBytes); r < 0.9 || r > 1.1 {
		t.Errorf("hello-world answered %d bytes, the exchange %d (ratio %.2f): want within 10%%", helloBytes, exBytes, r)
	}
	for i := range exKeys {
		if !slices.Equal(exKeys[i], helloKeys[i]) {
			t.Fatalf("answer %d keys: exchange %v, hello-world %v", i, exKeys[i], helloKeys[i])
		}
	}
}
