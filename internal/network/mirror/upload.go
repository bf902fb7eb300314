package mirror

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mosaic-ct/mosaic/internal/base/netlimit"
)

// The bounds of add-entries uploads. An upload holds a slot, and at most
// one package (256 entries of up to 64 KiB: 16 MiB) in memory, from the
// moment its header checked out until its body ends, so that holding
// slots costs a client, not the mirror:
//
//   - a slot is taken only once the upload's header has arrived (within
//     headerTimeout) and names a mirrored log, one of its pending
//     checkpoints and a range the mirror can take: a connection that
//     sends nothing, or junk, never holds one;
//   - from then on the body must arrive at minUploadRate on average, the
//     time the mirror spends storing what it received not counted; a
//     client may bank at most uploadGrace of slack, so one that stops
//     sending loses its slot within uploadGrace;
//   - one client group (an IPv4 address or IPv6 prefix, as the rate limit
//     groups clients) holds at most maxUploadsPerClient slots, one log's
//     uploads at most maxUploadsPerLog, and all together maxUploads
//     (128 MiB of packages at most).
//
// What is left to an attacker is to hold slots with valid headers from
// many addresses, each reconnecting every uploadGrace within the rate
// limit; docs/CONFIG.md (mirror) says so.
const (
	maxUploads          = 8
	maxUploadsPerClient = 2
	maxUploadsPerLog    = 4
	headerTimeout       = 5 * time.Second
	uploadGrace         = 10 * time.Second
	minUploadRate       = 64 << 10 // bytes a second
	// answerTimeout bounds the writing of an add-entries answer, once its
	// body is read.
	answerTimeout = 10 * time.Second
)

// errTooSlow is an upload whose client fell below the minimum transfer
// rate (or did not send its header in time).
var errTooSlow = errors.New("the client sent too slowly")

// rateReader reads a request body while enforcing a minimum average
// transfer rate on the time spent waiting for the client: each Read may
// wait at most the slack left, which starts at a grace and grows by
// 1/rate per byte received (up to maxSlack), and the time a Read waits is
// taken from it. The wait is enforced with the connection's read
// deadline, so a client that sends nothing costs a parked goroutine until
// the deadline, never longer.
type rateReader struct {
	r           io.Reader
	setDeadline func(time.Time) error
	now         func() time.Time
	rate        float64 // bytes a second; 0: no minimum (the header phase)
	slack       time.Duration
	maxSlack    time.Duration
}

func (rr *rateReader) Read(p []byte) (int, error) {
	if rr.slack <= 0 {
		return 0, errTooSlow
	}
	start := rr.now()
	if err := rr.setDeadline(start.Add(rr.slack)); err != nil && !errors.Is(err, errNoDeadline) {
		return 0, err
	}
	n, err := rr.r.Read(p)
	rr.slack -= rr.now().Sub(start)
	if rr.rate > 0 {
		rr.slack = min(rr.maxSlack, rr.slack+time.Duration(float64(n)/rr.rate*float64(time.Second)))
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errTooSlow
	}
	return n, err
}

// limitRate moves the reader from the header phase (a fixed time left) to
// the body phase: the minimum rate, with grace as the slack to start from
// and the most that can be banked.
func (rr *rateReader) limitRate(rate float64, grace time.Duration) {
	rr.rate, rr.slack, rr.maxSlack = rate, grace, grace
}

// errNoDeadline is what a ResponseWriter without deadlines (a test's
// recorder) answers; uploads then go unbounded in time.
var errNoDeadline = errors.New("no read deadline")

// uploadSlots counts the uploads in flight (see maxUploads).
type uploadSlots struct {
	// The time bounds (headerTimeout, uploadGrace, minUploadRate; tests
	// shorten them).
	headerTimeout, grace time.Duration
	minRate              float64

	exempt []netip.Prefix // client ranges not capped per client (a proxy in front)
	ipv6   int            // the IPv6 prefix length clients are grouped by

	gauge prometheus.Gauge // mosaic_mirror_uploads

	mu       sync.Mutex
	total    int
	byClient map[netip.Addr]int
	byLog    map[*mlog]int
}

func newUploadSlots(exempt []netip.Prefix, ipv6Bits int, gauge prometheus.Gauge) *uploadSlots {
	if ipv6Bits <= 0 || ipv6Bits > 128 {
		ipv6Bits = netlimit.DefaultIPv6Prefix
	}
	return &uploadSlots{headerTimeout: headerTimeout, grace: uploadGrace, minRate: minUploadRate,
		exempt: exempt, ipv6: ipv6Bits, gauge: gauge, byClient: map[netip.Addr]int{}, byLog: map[*mlog]int{}}
}

// Why an upload did not get a slot.
const (
	busyTotal  = "The mirror is busy with other uploads; retry later."
	busyClient = "This client address already has as many uploads in flight as the mirror allows; finish them first."
	busyLog    = "The mirror is busy with other uploads of this log; retry later."
)

// take takes a slot for an upload of l from client (the zero Addr: no
// network address, not capped per client), or says why not. The release
// function gives it back.
func (s *uploadSlots) take(client netip.Addr, l *mlog) (release func(), why string) {
	key, perClient := netip.Addr{}, false
	if client.IsValid() {
		client = client.Unmap()
		perClient = true
		for _, p := range s.exempt {
			if p.Contains(client) {
				perClient = false
			}
		}
		key = netlimit.ClientGroup(client, s.ipv6)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case perClient && s.byClient[key] >= maxUploadsPerClient:
		return nil, busyClient
	case s.byLog[l] >= maxUploadsPerLog:
		return nil, busyLog
	case s.total >= maxUploads:
		return nil, busyTotal
	}
	s.total++
	s.gauge.Inc()
	s.byLog[l]++
	if perClient {
		s.byClient[key]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			s.gauge.Dec()
			if s.byLog[l]--; s.byLog[l] == 0 {
				delete(s.byLog, l)
			}
			if perClient {
				if s.byClient[key]--; s.byClient[key] == 0 {
					delete(s.byClient, key)
				}
			}
		})
	}, ""
}
