// Command dedupengine compares dedup cache engines at size (issue 27 §2):
// Mosaic's embedded database (internal/state/bolt: a journal, sorted runs and
// Bloom filters in a bbolt file) against two kept embedded LSM trees,
// Pebble v2 and Badger v4, each used as a dedup.Store would need it:
// every round's Put durable (fsynced) when it returns, and a key already
// stored keeping its first value.
//
// It is a separate module so that the main module does not depend on
// Pebble or Badger for a benchmark; it takes in the main module by a
// replace, so when the packages it uses gain a dependency, run go mod
// tidy here too. Run from this directory:
//
//	go run . -engines bolt,pebble,badger -n 16777216
//
// For each engine, a child process fills a fresh cache in rounds of 1,000
// new random keys and reports, for each doubling of the cache, the wall
// and CPU time per entry (background merges included: they are the
// process's CPU) and the RSS; then lookups of present and absent keys,
// the bytes on disk per entry and the peak RSS. A second child fills
// another cache and is killed with SIGKILL in the middle of it; a third
// reopens that cache, timing the open, and checks that every record whose
// round had been acknowledged is there.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// engine is a dedup cache for one log, as the comparison uses it.
type engine interface {
	// Put stores records durably; a key already stored keeps its value.
	Put(ctx context.Context, records []dedup.Record) error
	Get(ctx context.Context, k dedup.Key) (dedup.Value, bool, error)
	// LeafIndex looks a record up by its leaf hash (the RFC 6962 read
	// API's index, which -hashes fills).
	LeafIndex(ctx context.Context, h [32]byte) (uint64, bool, error)
	Close() error
}

var engines = map[string]func(dir string) (engine, error){
	"bolt":   openBolt,
	"pebble": openPebble,
	"badger": openBadger,
}

// The LSM trees' settings (bolt has none).
var (
	cacheMiB    = flag.Int("cache-mib", 64, "the block cache of Pebble and Badger, MiB")
	memtableMiB = flag.Int("memtable-mib", 32, "the memtable of Pebble and Badger, MiB")
	compress    = flag.Bool("compress", true, "compress blocks (Snappy, the engines' default)")
	// hashes gives every record a leaf hash, so that the cache holds the
	// leaf hash index too, as with rfc6962_read_api.
	hashes = flag.Bool("hashes", false, "give every record a leaf hash: both indexes, as with rfc6962_read_api")
	// heapProfiles, if set, is where a fill writes a heap profile at the
	// end of every window (after a collection: slower, for diagnosis).
	heapProfiles = flag.String("heap-profiles", "", "a fill writes heap profiles PREFIX-N.pprof at each window's end (after a GC)")
	idle         = flag.Duration("idle", 10*time.Second, "how long a fill waits after its lookups before measuring its idle memory")
)

// logID is the one log the benchmark's records belong to.
var logID = [32]byte{'l', 'o', 'g'}

// record is the benchmark's record number n: a random-looking key, and
// with -hashes a random-looking leaf hash.
func record(n int) dedup.Record {
	r := dedup.Record{
		Key:   dedup.KeyFor(false, [32]byte{}, strconv.AppendInt(nil, int64(n), 10)),
		Value: dedup.Value{Index: uint64(n), Timestamp: 1767225600000 + uint64(n)},
	}
	if *hashes {
		r.LeafHash = leafHash(n)
	}
	return r
}

// leafHash is record n's leaf hash.
func leafHash(n int) [32]byte {
	return sha256.Sum256(strconv.AppendInt([]byte("leaf "), int64(n), 10))
}

// absent is a key no record has.
func absent(n int) dedup.Key {
	return dedup.KeyFor(true, [32]byte{}, strconv.AppendInt(nil, int64(n), 10))
}

const round = 1000

func main() {
	log.SetFlags(0)
	mode := flag.String("mode", "run", "run (compare -engines), or a child's fill, kill or verify")
	names := flag.String("engines", "bolt,pebble,badger", "engines to compare")
	name := flag.String("engine", "", "a child's engine")
	n := flag.Int("n", 1<<24, "entries to fill the cache with")
	killAt := flag.Int("kill-at", 1<<22, "entries acknowledged before the crash test's SIGKILL")
	dir := flag.String("dir", "", "a child's directory; run: where caches go (default a temporary directory)")
	flag.Parse()
	switch *mode {
	case "run":
		run(strings.Split(*names, ","), *n, *killAt, *dir)
	case "fill", "kill":
		fill(*name, *dir, *n, *mode == "kill")
	case "verify":
		verify(*name, *dir, *n)
	default:
		log.Fatalf("-mode %q is not run, fill, kill or verify", *mode)
	}
}

// report is one line a child writes to its standard output.
type report struct {
	Kind string `json:"kind"` // window, lookup, idle, size, acked, open
	N    int    `json:"n,omitempty"`
	// A window of fills: the cache grew from N/2 (or 0) to N.
	WallUS float64 `json:"wall_us,omitempty"`
	CPUUS  float64 `json:"cpu_us,omitempty"`
	RSSMiB float64 `json:"rss_mib,omitempty"`
	// AnonMiB is the RSS without the pages of mapped files (bbolt maps
	// its file; those pages are the kernel's page cache, reclaimable).
	AnonMiB float64 `json:"anon_mib,omitempty"`
	// PeakAnonMiB is the largest AnonMiB seen in the window (sampled
	// every 20 ms).
	PeakAnonMiB float64 `json:"peak_anon_mib,omitempty"`
	// The Go runtime's view (runtime/metrics) at the window's end: the
	// live heap as the last collection marked it, and all the memory the
	// runtime holds from the OS (heap, stacks, its own structures; not
	// mapped files), less what it has returned.
	HeapLiveMiB  float64 `json:"heap_live_mib,omitempty"`
	GoMemMiB     float64 `json:"go_mem_mib,omitempty"`
	PeakGoMemMiB float64 `json:"peak_go_mem_mib,omitempty"`
	// MaxPutMS is the longest Put of the window (a round's stall: a
	// journal's rotation, the wait for a merge, bbolt's remapping).
	MaxPutMS float64 `json:"max_put_ms,omitempty"`
	// Lookups, µs each: warm (the second pass), and cold (the first).
	PresentUS     float64 `json:"present_us,omitempty"`
	ColdPresentUS float64 `json:"cold_present_us,omitempty"`
	ColdAbsentUS  float64 `json:"cold_absent_us,omitempty"`
	AbsentUS      float64 `json:"absent_us,omitempty"`
	LeafUS        float64 `json:"leaf_us,omitempty"`
	// Size on disk after Close, and the peak RSS.
	BytesPerEntry float64 `json:"bytes_per_entry,omitempty"`
	PeakRSSMiB    float64 `json:"peak_rss_mib,omitempty"`
	// Recovery after the crash.
	OpenMS  float64 `json:"open_ms,omitempty"`
	Missing int     `json:"missing"`
}

func emit(r report) {
	b, _ := json.Marshal(r)
	os.Stdout.Write(append(b, '\n'))
}

func open(name, dir string) engine {
	o, ok := engines[name]
	if !ok {
		log.Fatalf("no engine %q", name)
	}
	e, err := o(dir)
	if err != nil {
		log.Fatalf("opening %s: %v", name, err)
	}
	return e
}

// peaks samples the process's anonymous RSS and the Go runtime's memory
// every 20 ms, and keeps the largest of each since the last take.
type peaks struct {
	mu         sync.Mutex
	anon, goMB float64
}

func (p *peaks) sample(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a, g := rss("RssAnon"), goMem()
		p.mu.Lock()
		p.anon, p.goMB = max(p.anon, a), max(p.goMB, g)
		p.mu.Unlock()
	}
}

func (p *peaks) take() (anon, goMB float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	anon, goMB = max(p.anon, rss("RssAnon")), max(p.goMB, goMem())
	p.anon, p.goMB = 0, 0
	return anon, goMB
}

// memory reads runtime/metrics: the live heap the last collection
// marked, and the memory the runtime holds, in MiB.
func memory() (live, held float64) {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	mib := func(v metrics.Value) float64 { return float64(v.Uint64()) / (1 << 20) }
	return mib(s[0].Value), mib(s[1].Value) - mib(s[2].Value)
}

func goMem() float64 { _, h := memory(); return h }

// windowReport is a window's report, the memory read now.
func windowReport(n int, wall, cpu time.Duration, entries float64, maxPut time.Duration, pk *peaks) report {
	live, held := memory()
	pa, pg := pk.take()
	return report{Kind: "window", N: n, WallUS: us(wall) / entries, CPUUS: us(cpu) / entries,
		RSSMiB: rss("VmRSS"), AnonMiB: rss("RssAnon"), PeakAnonMiB: pa,
		HeapLiveMiB: live, GoMemMiB: held, PeakGoMemMiB: pg, MaxPutMS: ms(maxPut)}
}

// fill is a child: it fills a fresh cache with n entries. With crash, it
// reports each acknowledged round and never stops by itself: the parent
// kills it.
func fill(name, dir string, n int, crash bool) {
	ctx := context.Background()
	var pk peaks
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go pk.sample(sctx)
	e := open(name, dir)
	start, cpu0 := time.Now(), cpuTime()
	next, prev := 1024*round, 0
	var maxPut time.Duration
	i := 0
	for ; i < n || crash; i += round {
		recs := make([]dedup.Record, round)
		for j := range recs {
			recs[j] = record(i + j)
		}
		t := time.Now()
		if err := e.Put(ctx, recs); err != nil {
			log.Fatalf("put: %v", err)
		}
		maxPut = max(maxPut, time.Since(t))
		if crash {
			emit(report{Kind: "acked", N: i + round})
			continue
		}
		if done := i + round; done == next || done >= n {
			now, cpu := time.Now(), cpuTime()
			emit(windowReport(done, now.Sub(start), cpu-cpu0, float64(done-prev), maxPut, &pk))
			if *heapProfiles != "" {
				writeHeapProfile(fmt.Sprintf("%s-%s-%d.pprof", *heapProfiles, name, done))
			}
			start, cpu0, prev, maxPut = time.Now(), cpuTime(), done, 0
			next *= 2
		}
	}
	n = i
	// Lookups of keys spread over the whole cache, present and absent,
	// twice: the first pass finds the pages (a run's, a mapped filter's)
	// where the fill left them, in memory or not; the second, warm, is
	// what a log that looks up every submission sees.
	const lookups = 100_000
	var lr report
	for pass := range 2 {
		t := time.Now()
		for i := range lookups {
			r := record(int(uint64(i) * 2654435761 % uint64(n)))
			v, ok, err := e.Get(ctx, r.Key)
			if err != nil || !ok || v != r.Value {
				log.Fatalf("get of record %d: %v, %v, %v", r.Value.Index, v, ok, err)
			}
		}
		present := us(time.Since(t)) / lookups
		t = time.Now()
		for i := range lookups {
			if _, ok, err := e.Get(ctx, absent(pass*lookups+i)); err != nil || ok {
				log.Fatalf("get of an absent key: %v, %v", ok, err)
			}
		}
		lr = report{Kind: "lookup", N: n, PresentUS: present, AbsentUS: us(time.Since(t)) / lookups, ColdPresentUS: lr.PresentUS, ColdAbsentUS: lr.AbsentUS}
		if *hashes {
			t = time.Now()
			for i := range lookups {
				j := int(uint64(i) * 2654435761 % uint64(n))
				idx, ok, err := e.LeafIndex(ctx, leafHash(j))
				if err != nil || !ok || idx != uint64(j) {
					log.Fatalf("leaf index of record %d: %v, %v, %v", j, idx, ok, err)
				}
			}
			lr.LeafUS = us(time.Since(t)) / lookups
		}
	}
	emit(lr)
	// Idle: the background merges the fill started have had time to
	// end; the memory now is what a quiet process of this size holds.
	pk.take()
	time.Sleep(*idle)
	runtime.GC()
	live, held := memory()
	pa, pg := pk.take()
	emit(report{Kind: "idle", N: n, RSSMiB: rss("VmRSS"), AnonMiB: rss("RssAnon"), PeakAnonMiB: pa, HeapLiveMiB: live, GoMemMiB: held, PeakGoMemMiB: pg})
	if *heapProfiles != "" {
		writeHeapProfile(*heapProfiles + "-" + name + "-idle.pprof")
	}
	if err := e.Close(); err != nil {
		log.Fatalf("close: %v", err)
	}
	emit(report{Kind: "size", N: n, BytesPerEntry: float64(du(dir)) / float64(n), PeakRSSMiB: rss("VmHWM"), AnonMiB: rss("RssAnon")})
}

func writeHeapProfile(path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// verify is a child: it opens a cache a killed child left, timing the
// open, and checks that every record below n (the acknowledged ones) is
// there with its value, and with -hashes its leaf hash.
func verify(name, dir string, n int) {
	ctx := context.Background()
	t := time.Now()
	e := open(name, dir)
	openMS := float64(time.Since(t).Microseconds()) / 1000
	missing := 0
	for i := range n {
		r := record(i)
		v, ok, err := e.Get(ctx, r.Key)
		if err != nil {
			log.Fatalf("get of record %d: %v", i, err)
		}
		if !ok || v != r.Value {
			missing++
			continue
		}
		if *hashes {
			idx, ok, err := e.LeafIndex(ctx, r.LeafHash)
			if err != nil {
				log.Fatalf("leaf index of record %d: %v", i, err)
			}
			if !ok || idx != uint64(i) {
				missing++
			}
		}
	}
	emit(report{Kind: "open", N: n, OpenMS: openMS, Missing: missing, RSSMiB: rss("VmHWM"), AnonMiB: rss("RssAnon")})
	if err := e.Close(); err != nil {
		log.Fatalf("close: %v", err)
	}
}

// run is the parent: for each engine, a fill and a crash and recovery.
func run(names []string, n, killAt int, dir string) {
	if dir == "" {
		d, err := os.MkdirTemp("", "dedupengine")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	lost := false
	var rows []summary
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range names {
		if _, ok := engines[name]; !ok {
			log.Fatalf("no engine %q", name)
		}
		d := filepath.Join(dir, name)
		row := summary{engine: name, fill: child(self, "-mode", "fill", "-engine", name, "-dir", d, "-n", strconv.Itoa(n))}
		os.RemoveAll(d)

		// The crash: SIGKILL once killAt entries are acknowledged.
		d = filepath.Join(dir, name+"-crash")
		cmd := exec.Command(self, append([]string{"-mode", "kill", "-engine", name, "-dir", d}, tuning()...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		acked, killed := 0, false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r report
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				log.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			acked = r.N
			if acked >= killAt && !killed {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		cmd.Wait()
		fmt.Printf("%s killed after %d acknowledged entries\n", name, acked)
		row.verify = child(self, "-mode", "verify", "-engine", name, "-dir", d, "-n", strconv.Itoa(acked))
		for _, r := range row.verify {
			if r.Missing > 0 {
				lost = true
			}
		}
		os.RemoveAll(d)
		rows = append(rows, row)
	}
	fmt.Println()
	fmt.Println("| engine | CPU µs/entry: last window, fit at 10⁹ | wall µs/entry: last window, fit at 10⁹ | bytes/entry | RSS MiB: largest, without mapped files | idle MiB: RSS, without mapped files, Go heap live | longest Put, ms | lookup µs, warm (first pass): present, absent; leaf hash | open after SIGKILL, ms | records lost |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r.line())
	}
	if lost {
		log.Fatal("an engine lost acknowledged records in the crash")
	}
}

// summary is one engine's reports in a run.
type summary struct {
	engine       string
	fill, verify []report
}

// line is the summary as a row of a Markdown table. The fits are
// least-squares lines of cost per entry against log₂ of the cache's size
// (at each window's middle) over the windows from 2²¹ entries on: an LSM
// tree's cost per entry grows with its levels, one per constant factor
// of growth.
func (s summary) line() string {
	var windows []report
	var lookup, idle, size, open report
	for _, r := range append(s.fill, s.verify...) {
		switch r.Kind {
		case "window":
			windows = append(windows, r)
		case "lookup":
			lookup = r
		case "idle":
			idle = r
		case "size":
			size = r
		case "open":
			open = r
		}
	}
	var last report // the last window of at least half a doubling
	var rssMax, anonMax, putMax float64
	prev := 0
	for _, w := range windows {
		if w.N-prev >= prev/2 {
			last = w
		}
		prev = w.N
		rssMax, anonMax, putMax = max(rssMax, w.RSSMiB), max(anonMax, w.AnonMiB, w.PeakAnonMiB), max(putMax, w.MaxPutMS)
	}
	anonMax = max(anonMax, idle.PeakAnonMiB)
	rssMax = max(rssMax, size.PeakRSSMiB)
	at := math.Log2(1e9)
	fitted := func(y func(report) float64) string {
		if f := fit(windows, y, at); !math.IsNaN(f) {
			return fmt.Sprintf("%.2f", f)
		}
		return "— (fewer than two windows from 2²¹)"
	}
	leaf := "—"
	if lookup.LeafUS > 0 {
		leaf = fmt.Sprintf("%.1f", lookup.LeafUS)
	}
	return fmt.Sprintf("| %s | %.2f, %s | %.2f, %s | %.1f | %.0f, %.0f | %.0f, %.0f, %.0f | %.0f | %.1f (%.1f), %.1f (%.1f); %s | %.0f | %d of %d |",
		s.engine, last.CPUUS, fitted(func(r report) float64 { return r.CPUUS }),
		last.WallUS, fitted(func(r report) float64 { return r.WallUS }),
		size.BytesPerEntry, rssMax, anonMax, idle.RSSMiB, idle.AnonMiB, idle.HeapLiveMiB, putMax,
		lookup.PresentUS, lookup.ColdPresentUS, lookup.AbsentUS, lookup.ColdAbsentUS, leaf, open.OpenMS, open.Missing, open.N)
}

// fit is the least-squares line of y against log₂ of the windows' middle
// sizes (from 2²¹ entries on), at x.
func fit(windows []report, y func(report) float64, x float64) float64 {
	var xs, ys []float64
	prev := 0
	for _, w := range windows {
		if w.N >= 2<<20 {
			xs = append(xs, math.Log2(float64(prev+w.N)/2))
			ys = append(ys, y(w))
		}
		prev = w.N
	}
	if len(xs) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	b := sxy / sxx
	return my + b*(x-mx)
}

// child runs the program again with args, prints its reports, the
// engine's name first, and returns them.
func child(self string, args ...string) []report {
	cmd := exec.Command(self, append(args, tuning()...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	var rs []report
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Printf("%s %s %s\n", args[3], args[1], l)
		var r report
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			log.Fatalf("%s: %q: %v", strings.Join(args, " "), l, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// tuning is the LSM trees' settings, as flags for a child.
func tuning() []string {
	return []string{"-cache-mib", strconv.Itoa(*cacheMiB), "-memtable-mib", strconv.Itoa(*memtableMiB), "-compress=" + strconv.FormatBool(*compress),
		"-hashes=" + strconv.FormatBool(*hashes), "-heap-profiles", *heapProfiles, "-idle", idle.String()}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss reads a field of /proc/self/status in MiB (VmRSS now, VmHWM the peak).
func rss(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// du is the bytes the files under dir take on disk.
func du(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			// Allocated blocks, not the apparent size: an engine may
			// leave sparse, preallocated files.
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					total += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return total
}
