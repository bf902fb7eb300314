package fastecdsa

import (
	"encoding/binary"
	"sync"

	"filippo.io/nistec"
)

// point is what a table needs of a nistec point type (*nistec.P256Point,
// *nistec.P384Point): their complete additions and the point at infinity
// from their constructor.
type point[P any] interface {
	*P
	Add(p1, p2 *P) *P
	Double(p *P) *P
	Negate(p *P) *P
	Set(p *P) *P
	BytesX() ([]byte, error)
}

// table holds T[i][j] = j·2ᶜⁱ·B for a base point B (T[i][0] is the point
// at infinity), c = window, for scalars of bits bits.
type table[P any, PT point[P]] struct {
	window, windows, half int
	rows                  [][]P
	newPoint              func() *P
}

// newTable computes base's table. newPoint returns a new point at
// infinity; each entry is a copy of one, so that it owns its coordinates
// (a P-384 point holds pointers to them).
func newTable[P any, PT point[P]](base *P, bits, window int, newPoint func() *P) *table[P, PT] {
	t := &table[P, PT]{window: window, windows: (bits + window) / window, half: 1 << (window - 1), newPoint: newPoint}
	b := PT(newPoint()).Set(base)
	t.rows = make([][]P, t.windows)
	for i := range t.rows {
		row := make([]P, t.half+1)
		for j := range row {
			row[j] = *newPoint()
		}
		for j := 1; j <= t.half; j++ {
			PT(&row[j]).Add(&row[j-1], b)
		}
		for range window { // b = 2ᶜ·b
			PT(b).Double(b)
		}
		t.rows[i] = row
	}
	return t
}

// maxWindows bounds a table's windows (384 bits in windows of 5 bits or
// more), so that digits need no allocation.
const maxWindows = 80

// mulAdd sets acc = acc + u·B for the big-endian scalar u and returns it.
func (t *table[P, PT]) mulAdd(acc *P, u []byte) *P {
	var d [maxWindows]int
	neg := t.newPoint()
	for i, di := range digits(d[:t.windows], u, t.window) {
		switch {
		case di > 0:
			PT(acc).Add(acc, &t.rows[i][di])
		case di < 0:
			PT(acc).Add(acc, PT(neg).Negate(&t.rows[i][-di]))
		}
	}
	return acc
}

// digits writes the big-endian scalar b (a whole number of 8-byte words)
// in signed base 2ᶜ (c = window) into d: b = Σᵢ dᵢ·2ᶜⁱ with
// −2ᶜ⁻¹ ≤ dᵢ ≤ 2ᶜ⁻¹. len(d) must be ⌈(8·len(b) + 1)/c⌉.
//
// Window i holds the bits ci to ci+c−1 of b as v (0 ≤ v < 2ᶜ), plus the
// carry (0 or 1) from window i−1. If v + carry > 2ᶜ⁻¹ the digit is
// v + carry − 2ᶜ and the window carries 1 into the next (whose weight is
// 2ᶜ times larger), so the sum is unchanged; otherwise the digit is
// v + carry. The last window holds 8·len(b) − c·(len(d)−1) ≤ c − 1 bits
// of b (that is what len(d) = ⌈(8·len(b) + 1)/c⌉ is chosen for), so there
// v + carry ≤ 2ᶜ⁻¹ and nothing is carried out of it.
func digits(d []int, b []byte, window int) []int {
	var le [7]uint64 // b as little-endian words (at most 6), and a zero word past the end
	words := len(b) / 8
	for i := range words {
		le[i] = binary.BigEndian.Uint64(b[len(b)-8*(i+1):])
	}
	half := 1 << (window - 1)
	carry := 0
	for i := range d {
		bit := i * window
		word, shift := bit/64, uint(bit%64)
		v := le[word] >> shift
		if shift+uint(window) > 64 {
			v |= le[word+1] << (64 - shift)
		}
		x := int(v&(1<<window-1)) + carry
		carry = 0
		if x > half {
			x -= 1 << window
			carry = 1
		}
		d[i] = x
	}
	return d
}

// The windows: P-256 keys as p256key had them (a 715 KB table of 7,453
// points, 29 additions); P-384 keys and P-384's generator as measured in
// BenchmarkWindows (docs/BENCHMARKS.md, "P-384 issuer tables").
const (
	p256Window  = 9
	p384Window  = 7
	p384GWindow = 8
)

// p256 is a P-256 key's table; u1·G is nistec's ScalarBaseMult, whose
// amd64 assembly has precomputed tables of its own.
type p256 struct {
	q *table[nistec.P256Point, *nistec.P256Point]
}

func newP256(raw []byte) (summer, error) {
	q, err := nistec.NewP256Point().SetBytes(raw)
	if err != nil {
		return nil, err
	}
	return &p256{q: newTable[nistec.P256Point, *nistec.P256Point](q, 256, p256Window, nistec.NewP256Point)}, nil
}

func (k *p256) sumX(u1, u2 []byte) ([]byte, bool) {
	p, err := nistec.NewP256Point().ScalarBaseMult(u1)
	if err != nil {
		return nil, false
	}
	x, err := k.q.mulAdd(p, u2).BytesX() // fails for the point at infinity
	return x, err == nil
}

// p384 is a P-384 key's table; u1·G is the same sum over p384G, one table
// of the generator for every key (nistec's own ScalarBaseMult selects
// each of its 96 additions among 15 points in constant time, which public
// inputs do not need).
type p384 struct {
	q *table[nistec.P384Point, *nistec.P384Point]
}

var p384G = sync.OnceValue(func() *table[nistec.P384Point, *nistec.P384Point] {
	return newTable[nistec.P384Point, *nistec.P384Point](nistec.NewP384Point().SetGenerator(), 384, p384GWindow, nistec.NewP384Point)
})

func newP384(raw []byte) (summer, error) {
	q, err := nistec.NewP384Point().SetBytes(raw)
	if err != nil {
		return nil, err
	}
	return &p384{q: newTable[nistec.P384Point, *nistec.P384Point](q, 384, p384Window, nistec.NewP384Point)}, nil
}

func (k *p384) sumX(u1, u2 []byte) ([]byte, bool) {
	p := p384G().mulAdd(nistec.NewP384Point(), u1)
	x, err := k.q.mulAdd(p, u2).BytesX() // fails for the point at infinity
	return x, err == nil
}
