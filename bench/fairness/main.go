// Command fairness measures issue 25's fairness table: for each descriptor
// limit and number of attacker addresses, a fresh dev log is served by the
// mosaic binary with limits.per_client_exempt: [], attackers (127.0.0.2 on)
// hold as many silent connections as they can, and a good client
// (127.0.0.1) submits at -rate for -duration. It prints one Markdown row
// per case: the good client's SCTs, the longest gap between them, and the
// /health answers polled every 500ms. Everything runs on loopback and is
// bounded by -duration per case.
//
//	go build -o /tmp/mosaic ./cmd/mosaic
//	go run ./bench/fairness -mosaic /tmp/mosaic -fd-limits 0,1024 -attackers 8,16,64
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-ct/mosaic/internal/testkit/fairtest"
)

func main() {
	bin := flag.String("mosaic", "", "the mosaic binary to serve the dev log with (required)")
	fdLimits := flag.String("fd-limits", "0,1024", "comma-separated RLIMIT_NOFILE values to serve with (0: the inherited limit)")
	attackers := flag.String("attackers", "8,16,64", "comma-separated numbers of attacker addresses")
	rate := flag.Float64("rate", 20, "the good client's submissions per second")
	duration := flag.Duration("duration", 30*time.Second, "how long the good client submits, per case")
	settle := flag.Duration("settle", 5*time.Second, "how long the attackers run before the good client starts")
	maxSlots := flag.Int("max-slots", 16000, "the most connection slots all attackers together hold open (the tool's own descriptors)")
	perAttacker := flag.Int("slots-per-attacker", 0, "connection slots each attacker holds (0: a little more than the per-address cap, and together at least twice the global cap)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "fairness: -mosaic is required (go build -o /tmp/mosaic ./cmd/mosaic)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Println("| descriptor limit (caps global / per address) | attacker addresses | good client's submissions that got an SCT | longest gap | other outcomes | `/health` (every 500 ms) | attacker connections |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, fl := range ints(*fdLimits) {
		for _, a := range ints(*attackers) {
			if err := runCase(ctx, *bin, fl, a, *rate, *duration, *settle, *maxSlots, *perAttacker); err != nil {
				fmt.Fprintf(os.Stderr, "fairness: limit %d, %d attackers: %v\n", fl, a, err)
				os.Exit(1)
			}
		}
	}
}

func runCase(ctx context.Context, bin string, fdLimit, attackers int, rate float64, duration, settle time.Duration, maxSlots, perAttacker int) error {
	dir, err := os.MkdirTemp("", "mosaic-fairness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := fairtest.StartDev(ctx, bin, dir, fdLimit, "")
	if err != nil {
		return err
	}
	defer srv.Kill()
	// Each attacker tries to hold a little more than it may (its
	// configured cap) and together at least twice the global cap, within
	// the tool's own descriptors.
	slots := min(srv.PerClient+8, 2*srv.Max/attackers+8, maxSlots/attackers)
	if perAttacker > 0 {
		slots = min(perAttacker, maxSlots/attackers)
	}
	res, err := fairtest.Run(ctx, fairtest.Config{Server: srv, Attackers: attackers, SlotsPerAttacker: slots, Rate: rate, Duration: duration, Settle: settle})
	if err != nil {
		return err
	}
	limit := "default"
	if fdLimit > 0 {
		limit = strconv.Itoa(fdLimit)
	}
	fmt.Printf("| %s (%d / %d) | %d | %d of %d (%.0f%%) | %.1f s | %s | %s | %d |\n",
		limit, srv.Max, srv.PerClient, attackers, res.SCTs, res.Submitted, 100*float64(res.SCTs)/float64(max(res.Submitted, 1)),
		res.LongestGap.Seconds(), res.FailureSummary(), res.HealthSummary(), res.AttackerDials)
	fmt.Fprintf(os.Stderr, "limit %s, %d attackers: server counters: %s\n", limit, attackers, res.ConnMetrics)
	return srv.Stop()
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(os.Stderr, "fairness: %q is not a number\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}
