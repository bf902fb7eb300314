package main

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCPUAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	s := []cpuSample{{t0, 0}, {t0.Add(time.Second), 500 * time.Millisecond}, {t0.Add(2 * time.Second), 1500 * time.Millisecond}}
	for _, tt := range []struct {
		at   time.Time
		want time.Duration
	}{
		{t0.Add(-time.Second), 0},
		{t0, 0},
		{t0.Add(500 * time.Millisecond), 250 * time.Millisecond},
		{t0.Add(1500 * time.Millisecond), time.Second},
		{t0.Add(time.Hour), 1500 * time.Millisecond},
	} {
		if got := cpuAt(s, tt.at); got != tt.want {
			t.Errorf("cpuAt(%v) = %v, want %v", tt.at.Sub(t0), got, tt.want)
		}
	}
}

func TestProcSampling(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("the benchmark needs /proc: %v", err)
	}
	if _, err := serverCPU(os.Getpid(), 100); err != nil {
		t.Error(err)
	}
	if rss, err := serverRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("serverRSS = %v, %v", rss, err)
	}
	if _, err := machineCPU(100); err != nil {
		t.Error(err)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.1: 2, 3: 5, 7: 10, 2100: 5000, 999: 1000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestOutputs(t *testing.T) {
	r := &Results{Date: time.Unix(0, 0).UTC(), CPU: "Test <CPU>", Cores: 2, Go: "go", StepS: 20, Steps: []Step{
		{TargetRate: 100, OfferedPerS: 100, AcceptedPerS: 90, AddChainP50: 100, AddChainP99: 200, IntegrateP50: 10, IntegrateP99: 50},
		{TargetRate: 0, OfferedPerS: 3000, AcceptedPerS: 2700, AddChainP50: 250, AddChainP99: 500, IntegrateP50: 40, IntegrateP99: 200},
	}}
	svg := chart(r)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart is not well-formed XML: %v", err)
			}
			break
		}
	}
	if !strings.Contains(svg, "Test &lt;CPU&gt;") || strings.Count(svg, "<polyline") != 6 {
		t.Errorf("chart lacks the title or its six lines")
	}
	md := markdown(r)
	if !strings.Contains(md, "| max | 3000 | 2700 |") || !strings.Contains(md, "| 100 | 100 | 90 |") {
		t.Errorf("markdown table:\n%s", md)
	}
}
